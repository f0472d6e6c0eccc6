"""What the fuzzers feed, and the one property every input parser must keep.

Property (:func:`exercise`): for ANY input the parser either returns a value or raises one of
our :class:`HpcPredictError` subclasses whose message is one non-empty line and, for a
request, names the field. Anything else (``IndexError``, ``MemoryError``, a hang caught by
hypothesis' per-example deadline) is a crash.

Inputs are built from real samples: lines of the repository's real tool outputs
(``tests/data/topology``) kept, dropped, repeated and spliced with random text, so the
fuzzer spends its time past the first line of each parser rather than on pure noise. Shared
by ``tests/fuzz`` (small counts, CI) and ``benchmarks/fuzz`` (>= 10^5 cases).

Numbers that make a parser *expand* text (hostlist ranges, ``COUNT(xREPEAT)``) are kept small
here: unbounded expansion is a known gap tested separately (``test_expansion_limits.py``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from hypothesis import strategies as st

from hpcpredict.daemon.errors import HpcPredictError, InvalidRequest

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


def _lines(*patterns: str) -> list[list[str]]:
    """The lines of each sample file matching ``patterns`` (first 400 of each)."""
    files = [path.read_text(errors="replace").splitlines()[:400]
             for pattern in patterns for path in sorted(DATA.glob(pattern))]
    return [lines for lines in files if lines] or [[""]]


def _splice(args) -> str:
    line, at, cut, insert = args
    at = at % (len(line) + 1)
    return line[:at] + insert + line[at + cut:]


def corpus_text(files: list[list[str]], *, max_lines: int = 40, tokens: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """Text made of real lines (of ``files``), mutated lines, tokens and noise."""
    real = st.sampled_from([line for lines in files for line in lines])
    noise = st.text(max_size=30)
    if tokens:
        noise = st.one_of(noise, st.lists(st.sampled_from(tokens), max_size=8).map(" ".join))
    mutated = st.tuples(real, st.integers(0, 400), st.integers(0, 6), noise).map(_splice)
    line = st.one_of(real, real, mutated, noise)
    separator = st.sampled_from(["\n", "\n", "\n", "\r\n", "\n\n", "\t"])
    mixed = st.tuples(st.lists(line, max_size=max_lines), separator).map(lambda pair: pair[1].join(pair[0]))
    # a run of consecutive real lines (often from a file's start) with at most one line changed:
    # reaches the deep states of a parser that a line-by-line mix never does
    start = st.one_of(st.just(0), st.integers(0, 400))
    chunk = st.tuples(st.sampled_from(files), start, st.integers(1, max_lines * 3), st.integers(-1, max_lines * 2),
                      st.integers(0, 400), st.integers(0, 6), noise).map(lambda t: _chunk(*t))
    return st.integers(0, 2).flatmap(lambda pick: mixed if pick == 0 else chunk)


def _chunk(lines, start, length, changed, at, cut, insert) -> str:
    start = start % len(lines)
    part = list(lines[start:start + length])
    if 0 <= changed < len(part):
        part[changed] = _splice((part[changed], at, cut, insert))
    return "\n".join(part) + "\n"


# ---------------------------------------------------------------- hostlists (bounded ranges)
SMALL_NUMBER = st.integers(0, 300).map(str) | st.sampled_from(["001", "016", "0", "-1", "08", "9" * 3])
HOSTLIST = st.lists(st.one_of(st.sampled_from(["node", "n", "ib-leaf", "x1000c0s", "nid", "[", "]", "-", ",", ":",
                                               "@", "^", " ", "!", "&", ".", "*"]), SMALL_NUMBER),
                    min_size=0, max_size=14).map("".join)


def _hostlist_size_ok(text: str) -> bool:
    """Keep fuzzed hostlists small (see the module docstring)."""
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

    try:
        return len(NodeSet(text.strip(), resolver=RESOLVER_NOGROUP)) <= 5000
    except Exception:
        return True


@dataclass(frozen=True)
class Target:
    name: str
    strategy: st.SearchStrategy
    run: Callable[[Any], Any]


def exercise(target: Target, example) -> str:
    """Run one example; 'ok' or 'rejected'; any other exception propagates (a crash)."""
    try:
        target.run(example)
        return "ok"
    except HpcPredictError as error:
        message = str(error)
        assert message.strip(), f"{target.name}: empty error message ({type(error).__name__})"
        assert "Traceback" not in message
        if isinstance(error, InvalidRequest):
            assert error.field.strip(), f"{target.name}: InvalidRequest without a field: {message}"
        return "rejected"


# ---------------------------------------------------------------- topology parsers
def _topology_targets() -> list[Target]:
    from hpcpredict.topology import cray, hostlist, ibnetdiscover, ibtools, infiniband, mapping, sitemap, slurm_tree
    from hpcpredict.topology.placement import Placement

    slurm_tokens = ("SwitchName=s1", "Switches=s[1-3]", "Nodes=n[1-4]", "Level=2", "LinkSpeed=1", "#", "=",
                    "SwitchName=", "Nodes=", "Switches=")
    ib_tokens = ('Switch', 'Ca', '36', '2', '"S-0002c9030000b0a0"', '# "leaf01"', '[1]', '"H-0002c9030000a001"[1]',
                 'lid', '4', 'lmc', '0', '4xQDR', 'vendid=0x2c9', 'switchguid=0x2c9030000b0a0', '"', '(', ')')
    cray_tokens = ("c0-0c0s0n0", "c1-0c2s15n3", "nid00001", "compute", "up", "batch", "service", "down", "XT", "n3",
                   "c0n0", ";", "S", "A")
    conf_lines = _lines("slurm/topology.conf.*", "negative/topology.conf.*")
    scontrol_lines = _lines("slurm/scontrol-show-topology*")
    ib_lines = _lines("infiniband/*/ibnetdiscover*.txt", "infiniband/handmade/*", "negative/ibnetdiscover*")
    ibstat_lines = _lines("infiniband/*/ibstat*", "negative/ibstat*")
    listing_lines = _lines("infiniband/*/ibswitches*", "infiniband/*/ibhosts*", "infiniband/*/ibnodes*")
    xtp_lines = _lines("cray/xtprocadmin*", "negative/xtprocadmin*")
    xtn_lines = _lines("cray/xtnodestat*", "negative/xtnodestat*")
    map_lines = _lines("infiniband/*/node-name-map", "infiniband/*/ibnetdiscover-node-name-map.txt",
                       "cray/theta-cabinet-to-group.txt", "negative/site-map*")
    placement_texts = [p.read_text() for p in sorted(DATA.glob("negative/placement*.json"))]

    def tree(text, parse):
        return slurm_tree.placement_from_tree(parse(text))

    def ib(text):
        return infiniband.placement_from_fabric(ibnetdiscover.parse_ibnetdiscover(text))

    def placement_json(text):
        try:
            data = json.loads(text)
        except ValueError:
            return None  # not JSON at all: Placement.load reports that itself; from_dict sees only JSON
        return Placement.from_dict(data)

    def ranks(args):
        nodes, ntasks, distribution, tasks_per_node, per_node = args
        return mapping.map_ranks(nodes, ntasks, distribution, tasks_per_node or None, per_node or None)

    json_text = st.one_of(st.sampled_from(placement_texts or ["{}"]),
                          st.tuples(st.sampled_from(placement_texts or ["{}"]), st.integers(0, 4000),
                                    st.integers(0, 8), st.text(max_size=10)).map(_splice),
                          st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                                           st.sampled_from(["kind", "levels", "nodes", "warnings", "source", "n1"]),
                                           inner, max_size=5), max_leaves=20).map(json.dumps))
    tasks_item = st.tuples(st.integers(0, 64), st.integers(-2, 40)).map(
        lambda t: f"{t[0]}(x{t[1]})" if t[1] != 1 else str(t[0]))
    tasks_text = st.one_of(st.lists(tasks_item, max_size=6).map(",".join), st.text(max_size=12))
    return [
        Target("hostlist.expand", HOSTLIST.filter(_hostlist_size_ok), hostlist.expand),
        Target("hostlist.fold", st.lists(st.one_of(HOSTLIST, st.text(max_size=10)), max_size=20), hostlist.fold),
        Target("slurm_tree.topology_conf", corpus_text(conf_lines, tokens=slurm_tokens),
               lambda text: tree(text, slurm_tree.parse_topology_conf)),
        Target("slurm_tree.scontrol_topology", corpus_text(scontrol_lines, tokens=slurm_tokens),
               lambda text: tree(text, slurm_tree.parse_scontrol_topology)),
        Target("ibnetdiscover", corpus_text(ib_lines, max_lines=60, tokens=ib_tokens), ib),
        Target("ibnetdiscover.node_name_map", corpus_text(map_lines, tokens=ib_tokens),
               ibnetdiscover.parse_node_name_map),
        Target("ibtools.ibstat", corpus_text(ibstat_lines, tokens=ib_tokens), ibtools.parse_ibstat),
        Target("ibtools.listing", corpus_text(listing_lines, tokens=ib_tokens), ibtools.parse_ib_listing),
        Target("cray.xtprocadmin", corpus_text(xtp_lines, tokens=cray_tokens),
               lambda text: cray.placement_from_xtprocadmin(cray.parse_xtprocadmin(text), cabinets_per_row=4)),
        Target("cray.xtnodestat", corpus_text(xtn_lines, tokens=cray_tokens), cray.parse_xtnodestat),
        Target("cray.cname", st.one_of(st.builds("c{}-{}c{}s{}n{}".format, *[st.integers(0, 3)] * 2, st.integers(0, 3), st.integers(0, 16), st.integers(0, 4)),
                                       st.sampled_from(cray_tokens), HOSTLIST, st.text(max_size=20)),
               cray.decode_cname),
        Target("sitemap", corpus_text(map_lines), sitemap.parse_site_map),
        Target("placement.from_dict", json_text, placement_json),
        Target("mapping.tasks_per_node", tasks_text, mapping.parse_tasks_per_node),
        Target("mapping.map_ranks", st.tuples(st.integers(-1, 64), st.integers(-1, 512),
                                              st.sampled_from(["block", "cyclic", "plane=4", "plane=0", "arbitrary",
                                                               "block:cyclic", "", "fcyclic", "plane=x"]),
                                              tasks_text, st.integers(0, 16)), ranks),
    ]


# ---------------------------------------------------------------- requests and scripts
SCRIPT_LINES = [[
    "#!/bin/bash", "#SBATCH -N 2", "#SBATCH --ntasks-per-node=4", "#SBATCH -t 1:30:00", "#SBATCH --time=2-00:00:00",
    "#SBATCH -J melt", "#SBATCH --nodes=2-4", "#SBATCH -n 64", "#SBATCH -c 2", "#SBATCH --gpus=a100:2",
    "#SBATCH -m plane=4", "#SBATCH --time=UNLIMITED", "#SBATCH -t 15", "#SBATCH -p batch -A proj -q high",
    "#HPCPREDICT app=lmp size=400", "#HPCPREDICT mesh=fine", "export OMP_NUM_THREADS=4", "export A=1 B=two",
    "module load lammps", "cd $SLURM_SUBMIT_DIR", "srun --mpi=pmix ./solver --size=400 --verbose -t 10 in.deck",
    "mpirun -np 64 lmp -in in.melt -var x 10", "srun -n $SLURM_NTASKS python3 -u run.py --steps ${STEPS}",
    "mpiexec -n 4 ./a.out < input.txt > out.log 2>&1", "srun bash -c 'echo \"$x\"' \\", "  --continued=1",
    "python run.py --lr=0.1 --epochs 10 data/", "echo done", "wait", "for i in 1 2; do srun ./x $i; done",
    "srun ./x --a=\"unterminated", "srun ./x ${UNSET:-default} $((1+2))", "#SBATCH --ntasks=-4",
]]
SCRIPT_TOKENS = ("srun", "mpirun", "-n", "-np", "--", "=", "'", '"', "\\", "$", "${", "}", "#SBATCH", "#HPCPREDICT",
                 "-N", "-t", "--time=", "--nodes=", "export", "<", ">", "|", "&&", ";", "x=1", "--flag")


def script_bytes() -> st.SearchStrategy[bytes]:
    text = corpus_text(SCRIPT_LINES, max_lines=30, tokens=SCRIPT_TOKENS).map(lambda t: t.encode("utf-8", "replace"))
    raw = st.binary(max_size=400)
    latin = corpus_text(SCRIPT_LINES, max_lines=10).map(lambda t: t.encode("latin-1", "replace"))
    return st.one_of(text, text, text, raw, latin)


SBATCH_ARGV = st.lists(st.one_of(st.sampled_from(["-N", "2", "-n", "8", "-t", "1:00:00", "--time", "junk", "-J", "x",
                                                  "--nodes=0", "--ntasks-per-node=4", "-c", "-1", "--gpus", "gpu:x",
                                                  "-m", "cyclic", "--unknown", "--", "-p"]),
                                 st.text(max_size=12)), max_size=10)


def _text_field(max_size: int = 20) -> st.SearchStrategy[str]:
    return st.one_of(st.just(""), st.sampled_from(["alice", "lmp", "batch", "a" * 5000, "x\x00y", "ümlaut"]),
                     st.text(max_size=max_size))


def _mostly(good: st.SearchStrategy, wild: st.SearchStrategy) -> st.SearchStrategy:
    """Usually a sensible value, sometimes anything: most requests get past the first check."""
    return st.integers(0, 7).flatmap(lambda pick: wild if pick == 0 else good)


def job_requests() -> st.SearchStrategy:
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    u32 = st.one_of(st.integers(0, 64), st.integers(0, 2**32 - 1))
    value = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(lambda f: pb.Value(number=f)),
                      _text_field().map(lambda t: pb.Value(text=t)), st.booleans().map(lambda b: pb.Value(flag=b)),
                      st.just(pb.Value()))
    comm = st.builds(
        lambda name, size, grid, peers, messages, phases: pb.CommPattern(
            name=name, message_bytes=size, grid=grid, peers=peers, phases=phases,
            messages=[pb.RankMessage(src=s, dst=d, bytes=b) for s, d, b in messages]),
        st.sampled_from(["", "halo3d", "benchmark", "explicit", "lulesh1", "ring", "HALO4D"]),
        st.one_of(st.integers(0, 1 << 20), st.integers(0, 2**64 - 1)),
        st.lists(st.integers(0, 16), max_size=9), u32,
        st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70), st.integers(0, 2**64 - 1)), max_size=5), u32)
    return st.builds(
        lambda user, app, name, account, nodes, ntasks, per_node, cpus, dist, tpn, gpus, limit, risk, script, argv,
        env, inputs, node_list, comm_message, submit, job_id: pb.JobRequest(
            job=pb.JobIdentity(user=user, application=app, job_name=name, account=account),
            resources=pb.Resources(nodes=nodes, ntasks=ntasks, ntasks_per_node=per_node, cpus_per_task=cpus,
                                   distribution=dist, tasks_per_node=tpn, gpus=gpus),
            time_limit_s=limit, risk=risk, script=script, argv=argv, environment=env, inputs=inputs,
            node_list=node_list, comm=comm_message, submit_time=submit, job_id=job_id),
        _mostly(st.sampled_from(["alice", "bob", "u1"]), _text_field()), _mostly(st.just("lmp"), _text_field()),
        _mostly(st.just("run"), _text_field()), _mostly(st.just(""), _text_field()),
        _mostly(st.integers(0, 8), u32), _mostly(st.integers(8, 64), u32), _mostly(st.just(0), u32),
        _mostly(st.integers(0, 4), u32),
        st.sampled_from(["", "block", "cyclic", "plane=4", "Arbitrary", "fcyclic", "block:cyclic", "x"]),
        _mostly(st.just(""), st.one_of(st.sampled_from(["4,2,1(x2)", "2(x4)", "x"]), st.text(max_size=8))), u32,
        _mostly(st.integers(0, 86400 * 7), u32),
        _mostly(st.sampled_from([0.0, 0.03, 0.5]), st.floats(allow_nan=True, allow_infinity=True)),
        st.one_of(st.just(b""), script_bytes()), st.lists(st.text(max_size=10), max_size=5),
        st.dictionaries(st.text(max_size=10), st.text(max_size=20), max_size=4),
        _mostly(st.dictionaries(st.sampled_from(["x", "steps", "mesh"]), value, max_size=3),
                st.dictionaries(_text_field(10), value, max_size=5)),
        st.one_of(st.just(""), HOSTLIST), _mostly(st.just(pb.CommPattern()), comm), st.integers(-2**63, 2**63 - 1),
        _mostly(st.just(""), _text_field()))


def _request_targets() -> list[Target]:
    from hpcpredict.daemon.config import RequestBounds
    from hpcpredict.daemon.jobspec import job_spec_from_request
    from hpcpredict.daemon.runtime.inputs import MAX_INPUTS, MAX_WARNINGS, extract_inputs
    from hpcpredict.daemon.sbatch_options import parse_sbatch
    from hpcpredict.daemon.listeners.grpc_adapter import _BadRequest, _lenient
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    limits = RequestBounds()
    decode = _lenient(pb.JobRequest)

    def validate(request):
        spec = job_spec_from_request(request, limits)
        assert spec.user and len(spec.user) <= limits.max_text_bytes
        assert spec.nodes <= limits.max_nodes and spec.ntasks <= limits.max_ntasks
        return spec

    def wire(data: bytes):
        request = decode(data)
        if isinstance(request, _BadRequest):
            assert request.message.strip()
            return None
        return validate(request)

    def inputs(args):
        script, environment = args
        result = extract_inputs(script, environment)  # documented: never raises
        assert len(result.inputs) <= MAX_INPUTS and len(result.warnings) <= MAX_WARNINGS + 1
        assert all(isinstance(v, (float, str, bool)) for v in result.inputs.values())
        return result

    def sbatch(args):
        script, argv = args
        options = parse_sbatch(script, argv)
        assert options.nodes >= 0 and options.ntasks >= 0 and options.time_limit_s >= 0
        return options

    mutated_wire = st.tuples(job_requests().map(lambda r: r.SerializeToString()), st.integers(0, 1 << 16),
                             st.integers(0, 8), st.binary(max_size=8)).map(
        lambda t: t[0][:t[1] % (len(t[0]) + 1)] + t[3] + t[0][t[1] % (len(t[0]) + 1) + t[2]:])
    return [
        Target("jobspec.job_spec_from_request", job_requests(), validate),
        Target("jobspec.wire_bytes", st.one_of(mutated_wire, st.binary(max_size=200)), wire),
        Target("runtime.extract_inputs", st.tuples(script_bytes(), st.dictionaries(
            st.sampled_from(["STEPS", "SIZE", "OMP_NUM_THREADS", "x", ""]), st.text(max_size=12), max_size=4)), inputs),
        Target("sbatch_options.parse_sbatch", st.tuples(script_bytes(), SBATCH_ARGV), sbatch),
    ]


def all_targets() -> list[Target]:
    return _request_targets() + _topology_targets()
