"""Requests in, plain validated job descriptions out.

Everything that crosses the wire is checked here once, with limits from ``[limits]``; a bad
field raises :class:`InvalidRequest` naming it (the servicer turns that into
``INVALID_ARGUMENT``). Downstream code (models, features, policy) sees only :class:`JobSpec`.
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

from .bytecache import ByteBoundedCache
from .errors import InvalidRequest
from .records import JobRecord

from .runtime.inputs import extract_inputs
from ..topology.hostlist import count as count_hosts
from ..topology.mapping import count_tasks_per_node


# Script parsing costs ~0.5 ms (shlex) and the same scripts come back (arrays, sweeps,
# resubmits). Keyed by a digest and bounded by bytes ([limits] parse_cache_mib): a cache keyed
# on whole scripts held every distinct 1 MiB script a client cared to send.
_PARSE_CACHE = ByteBoundedCache(16 << 20)


def _value_bytes(extracted) -> int:
    """What one parse result costs in memory, roughly (Python objects, not their text alone)."""
    size = 400 + len(extracted.application) + len(extracted.launcher)
    for key, value in extracted.inputs.items():
        size += 120 + len(key) + (len(value) if isinstance(value, str) else 0)
    return size + sum(80 + len(warning) for warning in extracted.warnings)


def _extract_cached(script: bytes, environment, limits):
    budget = limits.parse_cache_mib << 20
    if budget != _PARSE_CACHE.max_bytes:
        _PARSE_CACHE.resize(budget)
    digest = hashlib.blake2b(script, digest_size=20)
    for key, value in sorted(environment.items()):
        digest.update(b"\0%d:%s=%d:%s" % (len(key), key.encode(), len(value), value.encode()))
    key = digest.digest()
    extracted = _PARSE_CACHE.get(key)
    if extracted is None:
        extracted = extract_inputs(script, dict(environment))
        _PARSE_CACHE.put(key, extracted, _value_bytes(extracted))
    return extracted


PATTERNS = frozenset({"benchmark", "halo3d", "halo4d", "lulesh1", "lulesh2", "lulesh3", "explicit"})
DISTRIBUTIONS = ("block", "cyclic", "plane", "arbitrary", "")


@dataclass(frozen=True, slots=True)
class CommSpec:
    pattern: str
    message_bytes: int
    grid: tuple[int, ...]
    peers: int
    messages: tuple[tuple[int, int, int], ...]
    seed: int
    phases: int


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One validated request for a prediction: the job as submitted, and how to answer.

    The job itself (who, what, when, the request and its size) is the same thing
    :class:`~hpcpredict.daemon.records.JobRecord` describes, and :meth:`record` is the one
    mapping between them. JobSpec stays a type of its own for what only a prediction has: the
    task layout (``ntasks_per_node``, ``distribution``, ``tasks_per_node``), ``gpus``/``mem_mb``,
    the communication pattern, the allocated ``node_list``, the ``risk`` asked for, whether the
    time limit was the partition default, and the validation ``warnings``; history has none of
    these, and a record has an outcome a request never has.
    """

    user: str
    application: str
    account: str = ""
    partition: str = ""
    job_name: str = ""
    group: str = ""
    qos: str = ""
    cluster: str = ""
    inputs: dict = field(default_factory=dict)
    nodes: int = 0
    ntasks: int = 0
    ntasks_per_node: int = 0
    cpus_per_task: int = 1
    distribution: str = "block"
    tasks_per_node: str = ""
    gpus: int = 0
    mem_mb: int = 0
    time_limit_s: int = 0
    time_limit_unlimited: bool = False   # --time=UNLIMITED
    time_min_s: int = 0                  # the user's --time-min (0 = none)
    max_time_s: int = 0                  # partition MaxTime / QOS MaxWall the hook sees (0 = unlimited or unknown)
    default_time_s: int = 0              # partition DefaultTime (0 = none or unknown)
    risk: float = 0.0
    submit_time: float = 0.0
    job_id: str = ""
    node_list: str = ""
    comm: CommSpec | None = None
    warnings: tuple[str, ...] = ()


    def record(self, **outcome) -> JobRecord:
        """This job as history describes it: without ``outcome`` the job at submission (what the
        history models are asked about), with the outcome fields (``runtime_s``, ``state``,
        ``start_time``, ``end_time``, ``exit_code``, ``submit_time``...) the ended job they learn
        from. With no task count the node count is the job's size."""
        job: dict[str, Any] = dict(job_id=self.job_id, user=self.user, submit_time=self.submit_time,
                   requested_time_s=float(self.time_limit_s),
                   application=self.application, job_name=self.job_name, group=self.group,
                   account=self.account, partition=self.partition, qos=self.qos, nodes=self.nodes,
                   requested_procs=self.ntasks * self.cpus_per_task or self.nodes, inputs=self.inputs,
                   cluster=self.cluster)
        job.update(outcome)
        return JobRecord(**job)


def _text(value: str, name: str, limits) -> str:
    if len(value) > limits.max_text_bytes:
        raise InvalidRequest(name, f"longer than {limits.max_text_bytes} characters")
    if "\x00" in value:
        raise InvalidRequest(name, "contains a NUL character")
    return value


def _count(value: int, name: str, upper: int) -> int:
    if value > upper:
        raise InvalidRequest(name, f"{value} is larger than the limit {upper}")
    return int(value)


def _comm_spec(comm, ntasks: int, limits) -> CommSpec | None:
    if not comm.name:
        if comm.messages or comm.message_bytes:
            raise InvalidRequest("comm.name", "a communication pattern needs a name")
        return None
    name = comm.name.lower()
    if name not in PATTERNS:
        raise InvalidRequest("comm.name", f"unknown pattern {comm.name!r} (known: {', '.join(sorted(PATTERNS))})")
    if len(comm.messages) > limits.max_messages:
        raise InvalidRequest("comm.messages", f"{len(comm.messages)} messages exceed the limit {limits.max_messages}")
    if name == "explicit":
        if not comm.messages:
            raise InvalidRequest("comm.messages", "pattern 'explicit' needs at least one message")
        bound = max(ntasks, 1)
        for index, message in enumerate(comm.messages):
            if message.src >= bound or message.dst >= bound:
                raise InvalidRequest(f"comm.messages[{index}]", f"rank outside 0..{bound - 1}")
    elif comm.message_bytes == 0:
        raise InvalidRequest("comm.message_bytes", "must be > 0 for a named pattern")
    if comm.message_bytes > 1 << 40:
        raise InvalidRequest("comm.message_bytes", f"{comm.message_bytes} bytes is absurd")
    if len(comm.grid) > 8 or any(g == 0 for g in comm.grid):
        raise InvalidRequest("comm.grid", "at most 8 dimensions, each >= 1")
    if comm.grid and ntasks and math.prod(comm.grid) != ntasks:
        raise InvalidRequest("comm.grid", f"grid {list(comm.grid)} has {math.prod(comm.grid)} ranks, job has {ntasks}")
    return CommSpec(pattern=name, message_bytes=int(comm.message_bytes), grid=tuple(comm.grid),
                    peers=int(comm.peers), messages=tuple((m.src, m.dst, m.bytes) for m in comm.messages),
                    seed=int(comm.seed), phases=int(comm.phases) or 1)


def _comm_from_inputs(inputs: dict, ntasks: int, limits) -> CommSpec | None:
    """``#HPCPREDICT comm=halo3d comm_bytes=65536 [comm_grid=4x4x4] [comm_peers=4] [comm_phases=100]``."""
    name = inputs.get("comm")
    if not isinstance(name, str) or not name:
        return None
    name = name.lower()
    if name not in PATTERNS - {"explicit"}:
        raise InvalidRequest("inputs['comm']", f"unknown pattern {name!r} (known: {', '.join(sorted(PATTERNS - {'explicit'}))})")

    def number(key: str, default: float = 0.0) -> int:
        value = inputs.get(key, default)
        if not isinstance(value, float) or not math.isfinite(value) or value < 0 or value > 1 << 40:
            raise InvalidRequest(f"inputs[{key!r}]", f"not a non-negative number: {value!r}")
        return int(value)

    size = number("comm_bytes")
    if size <= 0:
        raise InvalidRequest("inputs['comm_bytes']", "a communication pattern needs comm_bytes > 0")
    grid_text = inputs.get("comm_grid", "")
    grid: tuple[int, ...] = ()
    if grid_text:
        parts = str(grid_text).lower().replace("*", "x").split("x")
        if not all(p.strip().isdigit() and int(p) > 0 for p in parts) or len(parts) > 8:
            raise InvalidRequest("inputs['comm_grid']", f"not a process grid like 4x4x4: {grid_text!r}")
        grid = tuple(int(p) for p in parts)
        if ntasks and math.prod(grid) != ntasks:
            raise InvalidRequest("inputs['comm_grid']", f"grid {grid_text} has {math.prod(grid)} ranks, job has {ntasks}")
    return CommSpec(pattern=name, message_bytes=size, grid=grid, peers=number("comm_peers"), messages=(),
                    seed=number("comm_seed"), phases=number("comm_phases", 1.0) or 1)


def _input_value(value, name: str, limits):
    kind = value.WhichOneof("kind")
    if kind == "number":
        if not math.isfinite(value.number):
            raise InvalidRequest(name, "not a finite number")
        return float(value.number)
    if kind == "text":
        return _text(value.text, name, limits)
    if kind == "flag":
        return bool(value.flag)
    raise InvalidRequest(name, "value has no number, text or flag")


def job_spec_from_request(request, limits, *, node_list: str = "", job_id: str = "", tasks_per_node: str = "") -> JobSpec:
    """Validate a ``JobRequest`` (plus allocation fields) into a :class:`JobSpec`."""
    job, res = request.job, request.resources
    user = _text(job.user, "job.user", limits)
    if not user:
        raise InvalidRequest("job.user", "required")
    warnings: list[str] = []
    nodes = _count(res.nodes, "resources.nodes", limits.max_nodes)
    ntasks = _count(res.ntasks, "resources.ntasks", limits.max_ntasks)
    per_node = _count(res.ntasks_per_node, "resources.ntasks_per_node", 1 << 16)
    cpus = _count(res.cpus_per_task, "resources.cpus_per_task", 1 << 16) or 1
    if ntasks == 0 and nodes and per_node:
        ntasks = nodes * per_node
    if nodes and ntasks and ntasks < nodes:
        raise InvalidRequest("resources.ntasks", f"{ntasks} tasks cannot fill {nodes} nodes")
    if nodes and per_node and ntasks > nodes * per_node:
        raise InvalidRequest("resources.ntasks_per_node", f"{nodes} nodes x {per_node} tasks < {ntasks} tasks")
    distribution = _text(res.distribution, "resources.distribution", limits).lower()
    if distribution.split("=")[0].split(":")[0] not in DISTRIBUTIONS:
        raise InvalidRequest("resources.distribution", f"unknown distribution {res.distribution!r}")
    if request.time_limit_s > limits.max_time_s:
        raise InvalidRequest("time_limit_s", f"{request.time_limit_s} s is longer than {limits.max_time_s} s")
    risk = float(request.risk)
    if not (risk == 0.0 or 0.0 < risk < 1.0) or not math.isfinite(risk):
        raise InvalidRequest("risk", f"must be in (0, 1), got {request.risk}")
    if len(request.script) > limits.max_script_bytes:
        raise InvalidRequest("script", f"{len(request.script)} bytes is larger than the limit {limits.max_script_bytes}")
    if len(request.inputs) > limits.max_inputs:
        raise InvalidRequest("inputs", f"{len(request.inputs)} inputs exceed the limit {limits.max_inputs}")
    if len(request.argv) > limits.max_inputs:
        raise InvalidRequest("argv", f"{len(request.argv)} arguments exceed the limit {limits.max_inputs}")
    for index, argument in enumerate(request.argv):
        _text(argument, f"argv[{index}]", limits)
    if len(request.environment) > limits.max_environment:
        raise InvalidRequest("environment", f"{len(request.environment)} variables exceed the limit {limits.max_environment}")
    for name, value in request.environment.items():
        _text(name, "environment key", limits)
        _text(value, f"environment[{name[:40]!r}]", limits)
    node_list = node_list or request.node_list
    if len(node_list) > limits.max_node_list_bytes:
        raise InvalidRequest("node_list", f"longer than {limits.max_node_list_bytes} bytes")
    # Short strings can name huge allocations (`n[0-99999999]`, `1(x2000000000)`): count them
    # from their text, before anything downstream expands them.
    if node_list and count_hosts(node_list) > limits.max_nodes:
        raise InvalidRequest("node_list", f"names more than the limit of {limits.max_nodes} nodes")
    tasks_per_node = tasks_per_node or res.tasks_per_node
    if tasks_per_node and count_tasks_per_node(tasks_per_node) > limits.max_nodes:
        raise InvalidRequest("tasks_per_node", f"names more than the limit of {limits.max_nodes} nodes")
    inputs: dict = {}
    application = _text(job.application, "job.application", limits)
    if request.script:
        extracted = _extract_cached(bytes(request.script), request.environment, limits)
        inputs.update(extracted.inputs)
        warnings.extend(extracted.warnings)
        application = application or extracted.application
    for key, value in request.inputs.items():
        inputs[_text(key, "inputs key", limits)] = _input_value(value, f"inputs[{key!r}]", limits)
    return JobSpec(
        user=user, application=application or _text(job.job_name, "job.job_name", limits),
        account=_text(job.account, "job.account", limits), partition=_text(job.partition, "job.partition", limits),
        job_name=_text(job.job_name, "job.job_name", limits), group=_text(job.group, "job.group", limits),
        qos=_text(job.qos, "job.qos", limits), cluster=_text(job.cluster, "job.cluster", limits),
        inputs=inputs, nodes=nodes, ntasks=ntasks, ntasks_per_node=per_node, cpus_per_task=cpus,
        distribution=distribution or "block",
        tasks_per_node=_text(tasks_per_node, "resources.tasks_per_node", limits),
        gpus=_count(res.gpus, "resources.gpus", 1 << 16), mem_mb=int(res.mem_mb),
        time_limit_s=int(request.time_limit_s),
        time_limit_unlimited=bool(request.time_limit_unlimited), time_min_s=int(request.time_min_s),
        max_time_s=int(request.max_time_s), default_time_s=int(request.default_time_s),
        risk=risk, submit_time=float(request.submit_time or time.time()),
        job_id=_text(job_id or request.job_id, "job_id", limits), node_list=node_list,
        comm=_comm_spec(request.comm, ntasks, limits) or _comm_from_inputs(inputs, ntasks, limits),
        warnings=tuple(warnings[:20]))


def stored_request(request, spec: JobSpec, limits) -> bytes:
    """The bytes a prediction row keeps of ``request`` (validated into ``spec``), bounded by
    ``[limits] stored_request_bytes``.

    A request that fits is kept whole (a later allocation-time call re-reads it exactly). A
    larger one loses its environment and all but the first ``stored_script_bytes`` of its
    script (cut at a line end, followed by a comment line with the SHA-256 of the whole;
    ``script_bytes`` says the full size, as when the Slurm hook cuts one), and keeps instead
    what they yielded: the application and the parsed inputs. If even
    that is too large, nothing is kept (b""): the prediction's row stays, its request does not.
    """
    from ..proto.v1 import hpcpredict_pb2 as pb

    data = request.SerializeToString()
    if len(data) <= limits.stored_request_bytes:
        return data
    kept = pb.JobRequest()
    kept.CopyFrom(request)
    kept.ClearField("environment")
    if len(request.script) > limits.stored_script_bytes:
        cut = request.script.rfind(b"\n", 0, limits.stored_script_bytes) + 1
        digest = hashlib.sha256(request.script).hexdigest()
        # A shell comment (never a directive) says where the cut is and what the whole was.
        kept.script = request.script[:cut] + (f"# hpcpredict: script cut at {cut} of {len(request.script)} bytes "
                                              f"received, sha256 {digest}\n").encode()
        kept.script_bytes = request.script_bytes or len(request.script)
    if not kept.job.application:
        kept.job.application = spec.application
    room = limits.max_inputs - len(kept.inputs)
    for key, value in spec.inputs.items():
        if room <= 0:
            break
        if key in kept.inputs or len(key) > limits.max_text_bytes:
            continue
        if isinstance(value, bool):
            kept.inputs[key].flag = value
        elif isinstance(value, float):
            kept.inputs[key].number = value
        elif isinstance(value, str) and len(value) <= limits.max_text_bytes:
            kept.inputs[key].text = value
        else:
            continue
        room -= 1
    data = kept.SerializeToString()
    return data if len(data) <= limits.stored_request_bytes else b""


def invalid_utf8_fields(data: bytes, descriptor, prefix: str = "") -> list[str]:
    """Names of string fields whose bytes are not UTF-8 in a serialized message.

    protobuf refuses such a message as a whole; this walks the wire format (via the
    unknown-field view of an empty message) to say *which* field was bad.
    """
    from google.protobuf import empty_pb2
    from google.protobuf.unknown_fields import UnknownFieldSet

    holder = empty_pb2.Empty()
    try:
        holder.ParseFromString(data)
    except Exception:
        return []   # not well-formed protobuf at all: no field to blame for bad UTF-8
    bad: list[str] = []
    for item in UnknownFieldSet(holder):
        fd = descriptor.fields_by_number.get(item.field_number)
        if fd is None or item.wire_type != 2:
            continue
        name = f"{prefix}{fd.name}"
        if fd.message_type is not None:  # nested messages and map entries alike
            bad.extend(invalid_utf8_fields(item.data, fd.message_type, f"{name}."))
        elif fd.type == fd.TYPE_STRING:
            try:
                item.data.decode("utf-8")
            except UnicodeDecodeError:
                bad.append(name)
    return sorted(set(bad))
