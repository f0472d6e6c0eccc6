"""Regenerate the committed Python stubs from proto/v1/hpcpredict.proto.

    python proto/generate.py            # rewrite proto/v1/hpcpredict_pb2*.py(i)
    python proto/generate.py --check    # exit 1 when the committed stubs are stale

The stubs are committed (so installing needs no protoc) and ``tests/proto/test_stubs.py``
fails when they no longer match the .proto. They import as ``hpcpredict.proto.v1.*``: the
.proto is compiled under the virtual path ``hpcpredict/proto/v1/`` so the generated imports
carry the namespace.
"""
from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO = HERE / "v1" / "hpcpredict.proto"
OUTPUTS = ("hpcpredict_pb2.py", "hpcpredict_pb2.pyi", "hpcpredict_pb2_grpc.py")


def generate(out_dir: Path) -> Path:
    from grpc_tools import protoc  # test/dev dependency only

    args = [
        "protoc",
        f"-Ihpcpredict/proto/v1={PROTO.parent}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        "hpcpredict/proto/v1/hpcpredict.proto",
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return out_dir / "hpcpredict" / "proto" / "v1"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        produced = generate(Path(tmp))
        stale = [name for name in OUTPUTS
                 if not (HERE / "v1" / name).exists() or not filecmp.cmp(produced / name, HERE / "v1" / name, shallow=False)]
        if args.check:
            for name in stale:
                print(f"stale: proto/v1/{name}", file=sys.stderr)
            return 1 if stale else 0
        for name in OUTPUTS:
            shutil.copyfile(produced / name, HERE / "v1" / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
