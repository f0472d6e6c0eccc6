#!/usr/bin/env python3
"""Which client path can job_submit.lua afford? One Predict, four ways, against a real daemon.

* ``lua-inprocess``  - what the hook does inside slurmctld: lua-socket on the hook socket
                       (timed inside one Lua process, 1 connection per call, like the hook);
* ``lua-process``    - a fresh ``lua5.1`` process doing that call (upper bound incl. start-up);
* ``python-stdlib``  - a fresh ``/usr/bin/python3 -sE`` using slurm_plugin/hookclient.py
                       (what the prolog/epilog scripts do);
* ``python-grpc``    - a fresh venv Python importing grpc + the stubs and calling Predict on
                       the gRPC socket (the path the design rejected for the submit hook).

    .venv/bin/python benchmarks/slurm/client_paths.py --samples 40
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "slurm_plugin"
REQUEST = {"job": {"user": "alice", "job_name": "bench"}, "resources": {"nodes": 4, "ntasks": 16},
           "time_limit_s": 1800, "script": "IyEvYmluL3NoCnNydW4gLi9sbXAgLWluIGluLmxqCg=="}


def timed(cmd: list[str], env=None) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - started
    if done.returncode != 0 or "ok" not in done.stdout:
        raise RuntimeError(f"{cmd[0]}: {done.stdout} {done.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hpcpredict-clients-"))
    env = dict(os.environ, HPCPREDICT_DATA_DIR=str(work), HPCPREDICT_DAEMON_METRICS="")
    daemon = subprocess.Popen([str(Path(sys.executable).parent / "hpcpredictd")], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hook = work / "hook.sock"
    for _ in range(300):
        if hook.exists():
            break
        time.sleep(0.1)
    request = json.dumps(REQUEST)
    lua_call = (
        "slurm = {NO_VAL = 4294967294, NO_VAL16 = 65534, SUCCESS = 0, log_info = print, log_error = print,"
        " log_user = print}\n"
        f"dofile({str(PLUGIN / 'job_submit.lua')!r}); local H = HPCPREDICT; H.config.hook_socket = {str(hook)!r}\n"
        "H.config.budget_s = 2\nlocal req = H.json.decode({req!r})\nreq.resources.__array = nil\n"
    ).replace("{req!r}", json.dumps(request))
    python_stdlib = (f"import sys; sys.path.insert(0, {str(PLUGIN)!r}); import hookclient, json; "
                     f"r = hookclient.call('Predict', json.loads({request!r}), socket_path={str(hook)!r}); print('ok')")
    python_grpc = ("import grpc, json; from google.protobuf import json_format; "
                   "from hpcpredict.proto.v1 import hpcpredict_pb2 as pb, hpcpredict_pb2_grpc as g; "
                   f"ch = grpc.insecure_channel('unix:{work / 'hpcpredictd.sock'}'); "
                   f"r = g.PredictorStub(ch).Predict(json_format.Parse({request!r}, pb.JobRequest()), timeout=5); "
                   "print('ok')")
    results = {}
    try:
        inproc = subprocess.run(
            ["lua5.1", "-e", lua_call + f"""
local socket = require("socket")
local times = {{}}
for i = 1, {args.samples + 5} do
  local t = socket.gettime(); local r, err = H.call("Predict", req); assert(r, err)
  if i > 5 then times[#times + 1] = socket.gettime() - t end
end
print(table.concat(times, " "))"""], capture_output=True, text=True, check=True)
        results["lua-inprocess"] = [float(x) for x in inproc.stdout.split()]
        paths = {"lua-process": ["lua5.1", "-e", lua_call + 'local r = H.call("Predict", req); print(r and "ok")'],
                 "python-stdlib": ["/usr/bin/python3", "-sE", "-c", python_stdlib],
                 "python-grpc": [sys.executable, "-c", python_grpc]}
        for name, cmd in paths.items():
            timed(cmd)                                  # warm the page cache
            results[name] = [timed(cmd) for _ in range(args.samples)]
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
    print("| client path | n | median (ms) | p95 (ms) |")
    print("|---|---:|---:|---:|")
    for name, values in results.items():
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        print(f"| {name} | {len(values)} | {statistics.median(values) * 1e3:.1f} | {p95 * 1e3:.1f} |")
    Path(__file__).with_name("client_paths.json").write_text(json.dumps(
        {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         "ms": {k: [round(v * 1e3, 2) for v in vs] for k, vs in results.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
