"""hpcpredictd: build the daemon from a config, serve until SIGTERM, drain, exit.

``create_daemon(config)`` builds everything (store, registry, engine, gRPC server, admin relay,
hook socket, metrics) and binds; ``Daemon.start()`` starts serving; ``Daemon.stop(grace)``
drains. ``main()`` is the console entry point: ``hpcpredictd [--config FILE] [--socket PATH]``.
Signals: SIGTERM/SIGINT drain and exit, SIGHUP reloads the models. ``[daemon] cpu_affinity``
(env ``HPCPREDICT_DAEMON_CPU_AFFINITY``) pins the process to CPUs: see :func:`pin_to_cpus`.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent import futures
from dataclasses import replace
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from ClusterShell.RangeSet import RangeSet, RangeSetParseError
from grpc_reflection.v1alpha import reflection, reflection_pb2

from hpcpredict.daemon.adminsock import AdminRelay, admin_uids, peer_uid
from hpcpredict.daemon.config import Config, load_config
from hpcpredict.daemon.engine import PredictionEngine
from hpcpredict.daemon.errors import ConfigError, HpcPredictError
from hpcpredict.daemon.jobspec import invalid_utf8_fields
from hpcpredict.daemon.metrics import Metrics, start_metrics_server
from hpcpredict.daemon.registry import ModelRegistry
from hpcpredict.daemon.servicer import PredictorServicer
from hpcpredict.daemon.store import open_store
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

try:
    from hpcpredict.daemon.native_server import NativeServer
except ImportError as _error:  # the C++ module was not built (no libgrpc++-dev): gRPC Python serves
    NativeServer = None
    _NATIVE_MISSING = str(_error)

logger = logging.getLogger(__name__)

SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
SERVICE_NAMES = (SERVICE.full_name, health.SERVICE_NAME, reflection.SERVICE_NAME)
BUNDLED_MODELS = Path(__file__).resolve().parent / "bundled_models"
MAX_MESSAGE_BYTES = 64 << 20  # above every [limits] so our validator, not the transport, says what is wrong


def admin_socket_path(socket_path: str) -> str:
    base = socket_path[:-5] if socket_path.endswith(".sock") else socket_path
    return base + ".admin.sock"


class _BadRequest:
    """Stands in for a request that did not decode, so the handler can say which field was bad."""

    def __init__(self, message: str):
        self.message = message


def _lenient(message_class):
    def deserialize(data: bytes):
        try:
            return message_class.FromString(data)
        except Exception:
            fields = invalid_utf8_fields(data, message_class.DESCRIPTOR)
            if fields:
                return _BadRequest(f"{', '.join(fields)}: not valid UTF-8 text")
            return _BadRequest(f"request is not a valid {message_class.DESCRIPTOR.full_name}")
    return deserialize


def _guard(method):
    def handler(request, context):
        if isinstance(request, _BadRequest):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        return method(request, context)
    return handler


def _method_handlers(servicer):
    """(method name, handler, request decoder, response encoder) for every Predictor method."""
    for method in SERVICE.methods:
        request_class = getattr(pb, method.input_type.name)
        response_class = getattr(pb, method.output_type.name)
        yield (method.name, _guard(getattr(servicer, method.name)), _lenient(request_class),
               response_class.SerializeToString)


def _grpcio_server(daemon_cfg, servicer, health_servicer) -> grpc.Server:
    # maximum_concurrent_rpcs: gRPC itself answers RESOURCE_EXHAUSTED at once past the limit
    # (running + queued for a worker), so a burst never queues behind slow calls.
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=daemon_cfg.workers, thread_name_prefix="rpc"),
        maximum_concurrent_rpcs=daemon_cfg.max_concurrent,
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.so_reuseport", 0)])
    handlers = {name: grpc.unary_unary_rpc_method_handler(handler, request_deserializer=decode,
                                                          response_serializer=encode)
                for name, handler, decode, encode in _method_handlers(servicer)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),))
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(SERVICE_NAMES, server)
    return server


def _native_server(daemon_cfg, servicer) -> "NativeServer":
    # The C++ front end answers health checks itself and refuses calls past max_concurrent
    # with RESOURCE_EXHAUSTED before any Python runs.
    server = NativeServer(workers=daemon_cfg.workers, max_concurrent=daemon_cfg.max_concurrent,
                          max_message_bytes=MAX_MESSAGE_BYTES, background_io=daemon_cfg.grpc_io_background)
    for name, handler, decode, encode in _method_handlers(servicer):
        server.add_unary(f"/{SERVICE.full_name}/{name}", handler, decode, encode)
    reflecting = reflection.ReflectionServicer(SERVICE_NAMES)
    server.add_stream(f"/{reflection.SERVICE_NAME}/ServerReflectionInfo",
                      lambda request, context: next(reflecting.ServerReflectionInfo(iter((request,)), context)),
                      reflection_pb2.ServerReflectionRequest.FromString,
                      reflection_pb2.ServerReflectionResponse.SerializeToString)
    return server


class Daemon:
    def __init__(self, config: Config):
        self.config = config
        daemon_cfg = config.daemon
        self.socket_path = daemon_cfg.socket
        self.admin_socket_path = admin_socket_path(self.socket_path)
        self.private_dir = os.path.join(config.data_dir, "private")
        os.makedirs(os.path.dirname(os.path.abspath(self.socket_path)) or ".", exist_ok=True)
        # lazy: a broken store is a fault, not a refusal to serve
        self.store = open_store(config, lazy=True, journal=True)
        self.registry = ModelRegistry(config.models.dir, bundled=BUNDLED_MODELS if config.models.bundled else None)
        self.engine = PredictionEngine(config, self.store, self.registry)
        self.metrics = Metrics()
        self.metrics.journal_pending.set_function(self.store.pending_predictions)
        uids = admin_uids(daemon_cfg.admin_users)
        self.servicer = PredictorServicer(
            self.engine, self.store, self.metrics, config,
            is_admin=lambda context: peer_uid(context.peer(), self.private_dir) in uids)
        self.server_kind = daemon_cfg.server
        if self.server_kind == "native" and NativeServer is None:
            logger.warning("native gRPC front end not built (%s); serving with gRPC Python", _NATIVE_MISSING)
            self.server_kind = "grpcio"
        self.health = None  # gRPC Python's health service; the native front end has its own
        if self.server_kind == "native":
            self.server = _native_server(daemon_cfg, self.servicer)
            self.metrics.watch_grpc_front(self.server.stats)
        else:
            self.health = health.HealthServicer()
            self.server = _grpcio_server(daemon_cfg, self.servicer, self.health)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)  # a stale socket from a killed daemon
        self.server.add_insecure_port(f"unix:{self.socket_path}")
        self.tcp_port = None
        self._tcp_handle = None
        if daemon_cfg.tcp:
            key, cert = Path(daemon_cfg.tls_key).read_bytes(), Path(daemon_cfg.tls_cert).read_bytes()
            if self.server_kind == "native":
                self._tcp_handle = self.server.add_secure_port(daemon_cfg.tcp, key, cert)
            else:
                self.tcp_port = self.server.add_secure_port(daemon_cfg.tcp, grpc.ssl_server_credentials([(key, cert)]))
        self.relay = None
        self.hook_server = None
        self.metrics_server = None
        self.metrics_port = None
        self._stopped = threading.Event()

    def start(self) -> "Daemon":
        self.engine.start()
        self.metrics.set_models(self.engine.models.artifacts)
        self.metrics.set_faults(self.engine.faults)
        self.server.start()
        if self._tcp_handle is not None:
            self.tcp_port = self.server.bound_port(self._tcp_handle)
        os.chmod(self.socket_path, self.config.daemon.socket_mode)
        self.relay = AdminRelay(self.admin_socket_path, self.socket_path, self.private_dir).start()
        if self.config.daemon.hook_socket:
            self._start_hook_server()
        if self.config.daemon.metrics:
            self.metrics_server, self.metrics_port = start_metrics_server(self.config.daemon.metrics, self.metrics)
        self._set_serving(True)
        self._write_runtime_info()
        logger.info("hpcpredictd serving on unix:%s (%s server, admin %s, metrics port %s)", self.socket_path,
                    self.server_kind, self.admin_socket_path, self.metrics_port)
        return self

    def _set_serving(self, serving: bool) -> None:
        if self.health is None:
            for name in ("", SERVICE.full_name):
                self.server.set_serving(name, serving)
        elif serving:
            for name in ("", SERVICE.full_name):
                self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        else:
            self.health.enter_graceful_shutdown()

    def _write_runtime_info(self) -> None:
        """<data_dir>/hpcpredictd.json: where this daemon listens (for admins, tests, scripts)."""
        info = {"pid": os.getpid(), "socket": self.socket_path, "admin_socket": self.admin_socket_path,
                "hook_socket": self.config.daemon.hook_socket if self.hook_server else "",
                "metrics_port": self.metrics_port, "tcp_port": self.tcp_port, "started": time.time()}
        path = Path(self.config.data_dir) / "hpcpredictd.json"
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps(info, indent=1), encoding="utf-8")
        os.replace(temporary, path)

    def _start_hook_server(self) -> None:
        try:
            from hpcpredict.slurm_plugin.hookserver import HookServer
        except ImportError:
            logger.warning("hook socket requested but hpcpredict.slurm_plugin.hookserver is missing")
            return
        self.hook_server = HookServer(self.config.daemon.hook_socket, self.servicer)
        self.hook_server.start()

    def reload(self) -> None:
        models = self.engine.reload()
        self.metrics.set_models(models.artifacts)
        self.metrics.set_faults(self.engine.faults)

    def stop(self, grace: float | None = None) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        grace = self.config.daemon.grace_s if grace is None else grace
        self._set_serving(False)
        if self.hook_server is not None:
            self.hook_server.stop(grace)
        if self.relay is not None:
            self.relay.stop()
        self.server.stop(grace).wait()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
        self.store.close()
        for path in (self.socket_path,):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        logger.info("hpcpredictd stopped")

    def wait(self) -> None:
        self.server.wait_for_termination()


def create_daemon(config: Config) -> Daemon:
    return Daemon(config)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _setup_logging(config: Config) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if config.daemon.log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.daemon.log_level.upper())


def parse_cpu_list(text) -> set[int]:
    """CPUs in taskset/systemd form ("1", "0,2-3") or an iterable of ints; empty = no pinning;
    "auto" = the highest-numbered CPU this process may use (CPU 0 usually takes the interrupts).

    >>> sorted(parse_cpu_list("0,2-3")), parse_cpu_list(""), parse_cpu_list("auto") == {max(os.sched_getaffinity(0))}
    ([0, 2, 3], set(), True)
    """
    if not isinstance(text, str):
        return {int(cpu) for cpu in text}
    text = text.strip()
    if text == "auto":
        return {max(os.sched_getaffinity(0))}
    return {int(cpu) for cpu in RangeSet(text)} if text else set()


def pin_to_cpus(spec) -> None:
    """Pin this process (and every thread it starts afterwards) to the given CPUs.

    One Python process serves through one interpreter lock: its gRPC and worker threads hand
    the lock to each other on every call, and when they sit on different cores each hand-off
    crosses cores. Pinned to one core the same daemon answers 1.2-1.7x more Predicts with a
    lower CPU cost per call (benchmarks/README.md, issue 9). Threads started later inherit it.
    """
    try:
        cpus = parse_cpu_list(spec)
    except (ValueError, RangeSetParseError) as error:
        raise ConfigError(f"[daemon] cpu_affinity: not a CPU list: {spec!r}") from error
    if cpus:
        try:
            os.sched_setaffinity(0, cpus)
            for thread in os.listdir("/proc/self/task"):   # any started by imports (numpy's BLAS pool)
                try:
                    os.sched_setaffinity(int(thread), cpus)
                except ProcessLookupError:
                    pass
        except OSError as error:
            raise ConfigError(f"[daemon] cpu_affinity: cannot pin to CPUs {sorted(cpus)}: {error}") from error
        logger.info("pinned to CPUs %s", sorted(cpus))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpcpredictd", description="The hpcpredict prediction daemon.")
    parser.add_argument("--config", help="TOML config file (default: embedded defaults)")
    parser.add_argument("--socket", help="gRPC Unix socket path (overrides [daemon] socket)")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        if args.socket:
            config = replace(config, daemon=replace(config.daemon, socket=args.socket))
        _setup_logging(config)
        pin_to_cpus(config.daemon.cpu_affinity)
        daemon = create_daemon(config).start()
    except HpcPredictError as error:
        print(f"hpcpredictd: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"hpcpredictd: cannot start: {error}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_term(signum, frame):
        logger.info("signal %s: draining in-flight calls (grace %.1f s)", signum, config.daemon.grace_s)
        stop.set()

    def on_hup(signum, frame):
        threading.Thread(target=daemon.reload, name="sighup-reload", daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGHUP, on_hup)
    print(f"hpcpredictd: serving on unix:{daemon.socket_path}", file=sys.stderr, flush=True)
    while not stop.wait(1.0):
        pass
    daemon.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
