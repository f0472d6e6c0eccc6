"""hpcpredictd: build the daemon from a config, serve until SIGTERM, drain, exit.

``Daemon(config)`` builds everything (store, registry, engine, the transport-free
:class:`~hpcpredict.daemon.service.PredictionService`, its local socket, gRPC server and
metrics) and binds; ``Daemon.start()`` starts serving; ``Daemon.stop(grace)`` drains.
``main()`` is the console entry point:
``hpcpredictd [--config FILE] [--grpc-socket PATH] [--socket PATH]``.
Signals: SIGTERM/SIGINT drain and exit (health turns NOT_SERVING first), SIGHUP reloads the
models. A local socket whose loop cannot go on turns health NOT_SERVING and makes the daemon
drain and exit with status 2, for its service manager to restart it.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import resource
import signal
import socket
import stat
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from grpc_health.v1 import health_pb2

from .buildinfo import VersionAction
from .config import Config, load_config
from .engine import PredictionEngine
from .errors import ConfigError, HpcPredictError
from .listeners import (LocalSocketServer, Metrics, MetricsServer, RemoteServer, grpc_server, set_serving,
                        start_metrics_server)
from .registry import ModelRegistry
from .service import PredictionService
from .store import open_store

logger = logging.getLogger(__name__)

#: gRPC health service names of the TCP listeners: NOT_SERVING while their port cannot be bound
#: (the daemon's own names, "" and the Predictor's, say whether predictions are served)
REMOTE_HEALTH = "hpcpredict.remote_listener"
METRICS_HEALTH = "hpcpredict.metrics"
BIND_RETRY_S = 5.0

BUNDLED_MODELS = Path(__file__).resolve().parent / "bundled_models"

#: Directories the daemon creates: private to it (and its group, which may read logs and models);
#: the one that holds the local socket is 0711 so every user can reach the socket, and no more.
PRIVATE_DIR_MODE = 0o750
SOCKET_DIR_MODE = 0o711


def own_directory(path: str, mode: int) -> None:
    """Make sure ``path`` is a directory others cannot write: created (with missing parents)
    with exactly ``mode`` whatever the umask; an existing one keeps its mode, but one that other
    users may write (or that another user owns) is refused: whoever can write the data or the
    socket's directory can swap the local socket for their own (and read every job's script
    sent to it) or plant a model the daemon would serve."""
    path = os.path.abspath(path)
    missing: list[str] = []
    head = path
    while not os.path.lexists(head):
        missing.insert(0, head)
        head = os.path.dirname(head)
    for folder in missing:
        try:
            os.mkdir(folder, mode)
            os.chmod(folder, mode)
        except FileExistsError:
            pass
        except OSError as error:   # a read-only or full file system: what needs it reports the fault
            logger.warning("cannot create %s: %s", folder, error)
            return
    try:
        info = os.stat(path)
    except OSError as error:
        logger.warning("cannot check %s: %s", path, error)
        return
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path} is not a directory")
    if info.st_uid not in (0, os.geteuid()):
        raise ConfigError(f"refusing to use {path}: owned by uid {info.st_uid}, neither root nor the daemon's "
                          f"user (uid {os.geteuid()}), who could replace what the daemon keeps there")
    if info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid not in (os.getegid(), 0)):
        raise ConfigError(f"refusing to use {path}: mode {stat.S_IMODE(info.st_mode):04o} lets other users write "
                          f"in it (replace the local socket, plant a model): chmod o-w,g-w {path}")


def _warn_if_any_user_may_bind(component: str, address: str) -> None:
    """A port any user may bind can be taken while the daemon restarts: said at every start."""
    port = address.rpartition(":")[2]
    try:
        with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as handle:
            first = int(handle.read())
    except (OSError, ValueError):
        first = 1024
    if port.isdigit() and int(port) >= first:
        logger.warning("%s on %s: any user of this host may bind port %s while the daemon is not listening (a "
                       "restart); use a port below %d (ADMIN.md, \"Ports no user can take\")", component, address,
                       port, first)


#: How often a runtime info file that could not be written (a full disk) is tried again
RUNTIME_INFO_RETRY_S = 5.0


def _bind_failure(path: str) -> str:
    """Why a Unix socket cannot be bound at ``path`` (gRPC's own error does not say)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.bind(path)
    except OSError as error:
        return error.strerror or str(error)
    else:
        os.unlink(path)
        return ""
    finally:
        probe.close()


class Daemon:
    def __init__(self, config: Config):
        self.config = config
        daemon_cfg = config.daemon
        self.socket_path = daemon_cfg.socket
        hook_dir = os.path.dirname(os.path.abspath(daemon_cfg.hook_socket)) if daemon_cfg.hook_socket else None
        # The local socket's directory first: it may be the data directory (the default), which
        # then needs 0711 so every user can reach the socket.
        for folder in (hook_dir, config.data_dir, os.path.dirname(os.path.abspath(self.socket_path)),
                       os.path.dirname(os.path.abspath(config.store.path)) if config.store.backend == "sqlite" else None,
                       config.models.dir if os.path.lexists(config.models.dir) else None):   # made by a publish
            if folder:
                own_directory(folder, SOCKET_DIR_MODE if folder == hook_dir else PRIVATE_DIR_MODE)
        # lazy: a broken store is a fault, not a refusal to serve
        self.store = open_store(config, lazy=True, journal=True)
        self.registry = ModelRegistry(config.models.dir, bundled=BUNDLED_MODELS if config.models.bundled else None)
        self.engine = PredictionEngine(config, self.store, self.registry)
        if config.ignored:   # a typo or a newer release's key: served without it, and said where it shows
            self.engine.faults.set("config", "read", "; ".join(config.ignored))
        if self.store.journal_error:   # served without it: slower, not wrong
            self.engine.faults.set("store", "open prediction journal", self.store.journal_error)
        self.metrics = Metrics()
        self.metrics.watch(self.engine.faults, self.engine, self.store)
        self.service = PredictionService(self.engine, self.store, self.metrics, config)
        # gRPC Python cannot see who is on the other end of a Unix socket. So the gRPC socket is
        # for trusted tools only: its mode (never open to others, config.py) admits the daemon's
        # user (and a group the admin chose), and every gRPC call acts as the daemon's own user.
        # Users, the hooks and the CLI use the local socket, where the kernel names each caller.
        self.server, self.health = grpc_server(
            self.service, workers=daemon_cfg.workers, max_concurrent=daemon_cfg.max_concurrent,
            caller_uid=lambda context: os.getuid())
        # A gRPC socket that cannot be made (a read-only data directory in the default layout) is a
        # fault, not a traceback: the local socket, where the hooks and users call, serves on.
        self.grpc_error = self._bind_grpc()
        if self.grpc_error:
            self.engine.faults.set("grpc", "listen", self.grpc_error)
            logger.error("gRPC socket not served: %s", self.grpc_error)
        self.local_socket: LocalSocketServer | None = None
        self.remote_server: RemoteServer | None = None
        self.metrics_server: MetricsServer | None = None
        self.metrics_port: int | None = None
        self._stopped = threading.Event()
        self.failed = threading.Event()    # a part cannot go on: main() exits non-zero

    @property
    def serving_on(self) -> str:
        return f"unix:{self.socket_path}" if not self.grpc_error else f"{self.config.daemon.hook_socket} only (no gRPC)"

    def _start_local_socket(self, daemon_cfg) -> LocalSocketServer:
        return LocalSocketServer(
            daemon_cfg.hook_socket, self.service, user_line_bytes=daemon_cfg.user_line_bytes,
            max_connections=daemon_cfg.max_connections, reserved_connections=daemon_cfg.reserved_connections,
            max_connections_per_user=daemon_cfg.max_connections_per_user, on_fatal=self._local_socket_died,
            request_timeout=daemon_cfg.request_timeout_s, idle_timeout=daemon_cfg.idle_timeout_s,
            mode=daemon_cfg.hook_socket_mode,
            # A Predict whose record goes to the memory-mapped journal never waits for the
            # disk: answered on the socket's own thread, without a hand-off to a worker.
            inline=frozenset({"Predict"}) if self.config.store.journal_mib else frozenset()).start()

    def _bind_grpc(self) -> str | None:
        """Bind the gRPC socket (replacing a stale one); None, or why it cannot be bound."""
        try:
            if os.path.lexists(self.socket_path):
                os.unlink(self.socket_path)  # a stale socket from a killed daemon
            self.server.add_insecure_port(f"unix:{self.socket_path}")
            return None
        except (OSError, RuntimeError) as error:
            # gRPC's RuntimeError names no cause: a bind of our own says which (read-only, missing...).
            reason = error.strerror if isinstance(error, OSError) and error.strerror else _bind_failure(self.socket_path)
            return f"unix:{self.socket_path}: {reason or error}"

    def _local_socket_died(self, message: str) -> None:
        """The local socket's loop gave up (listeners/local_socket.py): the hooks fail open from now on. Health
        says NOT_SERVING at once; main() sees ``failed`` and exits non-zero, so the service manager
        (Restart=on-failure in contrib/systemd) starts a daemon whose socket works."""
        self.engine.faults.set("local socket", "serve", message)
        set_serving(self.health, False)
        self.failed.set()

    def start(self) -> "Daemon":
        self.service.reload()
        self.engine.policy_mode.start()   # reads the controller's SchedulerParameters off the request path
        self.engine.slurm_defaults.start()   # ... and the partitions and default accounts predict fills in
        self.service.forecast.start()     # reads the queue and forecasts it off the request path
        # The models and the history replay are a few million long-lived objects: out of the
        # cyclic collector's sight, a full collection no longer walks them (a 100+ ms pause
        # that landed on whichever call was running).
        gc.freeze()
        # gRPC binds in start(): no moment in which the umask leaves the socket open to others
        umask = os.umask(0o177)
        try:
            self.server.start()
        finally:
            os.umask(umask)
        if not self.grpc_error:
            os.chmod(self.socket_path, self.config.daemon.socket_mode)
        daemon_cfg = self.config.daemon
        if self.grpc_error and not daemon_cfg.hook_socket:
            raise OSError(f"gRPC socket {self.grpc_error}, and the local socket is off ([daemon] hook_socket): "
                          f"nothing to serve")
        if daemon_cfg.hook_socket:
            try:
                self.local_socket = self._start_local_socket(daemon_cfg)
            except OSError as error:
                also = f"; gRPC socket {self.grpc_error}" if self.grpc_error else ""
                raise OSError(f"local socket {daemon_cfg.hook_socket}: {error.strerror or error}{also}") from error
        if daemon_cfg.remote_listen:   # users on login and compute nodes (remote.py)
            remote = RemoteServer(
                daemon_cfg.remote_listen, self.service, munge_socket=daemon_cfg.munge_socket,
                max_body_bytes=daemon_cfg.user_line_bytes,   # a remote caller is an ordinary user
                max_connections=daemon_cfg.remote_max_connections,
                max_connections_per_host=daemon_cfg.remote_max_connections_per_host,
                max_connections_per_user=daemon_cfg.remote_max_connections_per_user,
                max_rate=daemon_cfg.remote_max_rate, max_rate_per_user=daemon_cfg.remote_max_rate_per_user,
                request_timeout=daemon_cfg.request_timeout_s)

            def start_remote() -> None:
                self.remote_server = remote.start()
            self._listen("remote listener", daemon_cfg.remote_listen, REMOTE_HEALTH, start_remote)
        if self.config.daemon.metrics:
            def start_metrics() -> None:
                self.metrics_server, self.metrics_port = start_metrics_server(self.config.daemon.metrics, self.metrics)
            self._listen("metrics", self.config.daemon.metrics, METRICS_HEALTH, start_metrics)
        set_serving(self.health, not self.failed.is_set())
        self._remove_stale_runtime_info()
        self._write_runtime_info()
        logger.info("hpcpredictd serving on %s (gRPC) and %s (local), metrics port %s", self.serving_on,
                    self.config.daemon.hook_socket or "no local socket", self.metrics_port)
        return self

    def _listen(self, component: str, address: str, health_name: str, start) -> None:
        """``start()`` binds a TCP listener at ``address``. If it cannot (the port taken: by
        another daemon, or by a user while this one restarted), predictions on the local socket
        matter more: the daemon serves without it, and says so loudly (a fault in `status` and
        the metrics, an error in the log, ``health_name`` NOT_SERVING in the health check) while
        a thread retries every BIND_RETRY_S until the port is free."""
        self.health.set(health_name, health_pb2.HealthCheckResponse.NOT_SERVING)
        _warn_if_any_user_may_bind(component, address)
        try:
            start()
        except OSError as error:
            message = f"cannot listen on {address}: {error.strerror or error}; retrying every {BIND_RETRY_S:g} s"
            logger.error("%s %s (the daemon serves without it)", component, message)
            self.engine.faults.set(component, "listen", message)
            threading.Thread(target=self._retry_listen, args=(component, address, health_name, start),
                             name=f"listen-{component.replace(' ', '-')}", daemon=True).start()
            return
        self.health.set(health_name, health_pb2.HealthCheckResponse.SERVING)

    def _retry_listen(self, component: str, address: str, health_name: str, start) -> None:
        while not self._stopped.wait(BIND_RETRY_S):
            try:
                start()
            except OSError:
                continue
            if self._stopped.is_set():   # a stop() raced the bind: it did not see this listener
                self._stop_late_listeners()
                return
            self.engine.faults.clear(component, "listen")
            self.health.set(health_name, health_pb2.HealthCheckResponse.SERVING)
            logger.warning("%s now listening on %s", component, address)
            self._write_runtime_info()
            return

    def _stop_late_listeners(self) -> None:
        if self.remote_server is not None:
            self.remote_server.stop(0)
        if self.metrics_server is not None:
            self.metrics_server.shutdown()

    def _write_runtime_info(self) -> None:
        """<data_dir>/hpcpredictd.json: where this daemon listens (for admins, tests, scripts)."""
        remote = self.remote_server.address if self.remote_server else None
        info = {"pid": os.getpid(), "socket": self.socket_path,
                "hook_socket": self.config.daemon.hook_socket if self.local_socket else "",
                "remote": "%s:%d" % remote if remote else "",
                "metrics_port": self.metrics_port, "started": time.time()}
        path = Path(self.config.data_dir) / "hpcpredictd.json"
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            if temporary.exists():
                temporary.unlink()
            with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600),
                      "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), 0o600)
                handle.write(json.dumps(info, indent=1))
            os.replace(temporary, path)
        except OSError as error:
            # A read-only or full data directory must not keep the daemon from answering (and
            # from telling GetStatus what is wrong): the file only helps people find it. main()
            # writes it again every RUNTIME_INFO_RETRY_S until it works.
            self.engine.faults.set("daemon", "write runtime info", f"{path}: {error.strerror or error}")
            try:
                temporary.unlink(missing_ok=True)   # a full disk's half-written copy
            except OSError:
                pass
        else:
            self.engine.faults.clear("daemon", "write runtime info")

    def _remove_stale_runtime_info(self) -> None:
        """``.hpcpredictd.json.PID`` copies left by daemons that died while writing (kill -9)."""
        for leftover in Path(self.config.data_dir).glob(".hpcpredictd.json.*"):
            pid = leftover.name.rsplit(".", 1)[1]
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                os.kill(int(pid), 0)
                continue                            # that daemon still runs: its file
            except ProcessLookupError:
                pass
            except OSError:
                continue
            try:
                leftover.unlink()
            except OSError as error:
                logger.warning("cannot remove %s: %s", leftover, error.strerror or error)

    def retry_runtime_info(self) -> None:
        """Write the runtime info again if it could not be (a full disk that has room again)."""
        if self.engine.faults.has("daemon", "write runtime info"):
            self._write_runtime_info()

    def stop(self, grace: float | None = None) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.engine.policy_mode.stop()
        self.engine.slurm_defaults.stop()
        self.service.forecast.stop()
        grace = self.config.daemon.grace_s if grace is None else grace
        self.health.enter_graceful_shutdown()   # Check and Watch say NOT_SERVING while we drain
        if self.local_socket is not None:
            self.local_socket.stop(grace)
        if self.remote_server is not None:
            self.remote_server.stop(grace)
        self.server.stop(grace).wait()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
        self.store.close()
        try:
            if not self.grpc_error:
                os.unlink(self.socket_path)
        except OSError as error:
            logger.warning("could not remove gRPC socket %s: %s", self.socket_path, error.strerror or error)
        logger.info("hpcpredictd stopped")

    def wait(self) -> None:
        self.server.wait_for_termination()


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


def raise_open_file_limit() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit: the connection caps, not a default of 1024,
    should bound the sockets (nothing here uses select(), which needs fds below 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as error:
            logger.warning("cannot raise the open file limit from %d to %d: %s", soft, hard, error)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hpcpredictd", description="The hpcpredict prediction daemon.")
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument("--config",
                        help="TOML config file, the only one read (default: /etc/hpcpredict/hpcpredict.toml,"
                             " then ~/.config/hpcpredict/hpcpredict.toml, then embedded defaults)")
    parser.add_argument("--grpc-socket", help="gRPC Unix socket path (overrides [daemon] socket)")
    # The same name as `hpcpredict --socket`: the socket the hooks and the CLI talk to.
    parser.add_argument("--socket", "--local-socket", dest="local_socket",
                        help="the local socket's path (overrides [daemon] hook_socket)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
        if args.grpc_socket:
            config = replace(config, daemon=replace(config.daemon, socket=args.grpc_socket))
        if args.local_socket:
            config = replace(config, daemon=replace(config.daemon, hook_socket=args.local_socket))
        _setup_logging(config)
        # Private by default: whatever a library or a later change creates without a mode of its
        # own (SQLite's files, gRPC's socket, temporary files) is the daemon's only. The objects
        # that need a mode (the local socket 0666, its directory 0711, models 0640) set it
        # explicitly, as everything else does too, so a daemon built in-process (tests, tools)
        # is as private as this one, and a wide umask from the unit or the shell cannot undo it.
        os.umask(0o077)
        raise_open_file_limit()
        daemon = Daemon(config).start()
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
        threading.Thread(target=daemon.service.reload, name="sighup-reload", daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGHUP, on_hup)
    print(f"hpcpredictd: serving on {daemon.serving_on}", file=sys.stderr, flush=True)
    next_retry = time.monotonic() + RUNTIME_INFO_RETRY_S
    while not stop.wait(0.5) and not daemon.failed.is_set():
        if time.monotonic() >= next_retry:
            next_retry = time.monotonic() + RUNTIME_INFO_RETRY_S
            daemon.retry_runtime_info()
    daemon.stop()
    if daemon.failed.is_set():
        print(f"hpcpredictd: exiting to be restarted: {'; '.join(daemon.engine.faults.lines())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
