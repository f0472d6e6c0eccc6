"""The one config file (TOML) and the one place that reads it.

Every key has a documented default (README "Configuration reference"); any key can be
overridden by an environment variable ``HPCPREDICT_<SECTION>_<KEY>`` (upper case), which is
how tests and systemd units point the daemon somewhere else without a file. Paths may use
``{data_dir}``. With no file and no variables the daemon runs on embedded defaults: SQLite
store and models under a per-user data directory.

>>> cfg = load_config(None, environ={"HPCPREDICT_DATA_DIR": "/tmp/x"})
>>> cfg.store.path
'/tmp/x/hpcpredict.sqlite'
"""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

from .errors import ConfigError


def default_data_dir(environ: Mapping[str, str]) -> str:
    if environ.get("HPCPREDICT_DATA_DIR"):
        return environ["HPCPREDICT_DATA_DIR"]
    base = environ.get("XDG_DATA_HOME") or os.path.join(environ.get("HOME") or "/tmp", ".local", "share")
    return os.path.join(base, "hpcpredict")


@dataclass(frozen=True)
class DaemonConfig:
    socket: str = "{data_dir}/hpcpredictd.sock"   # gRPC Unix socket
    socket_mode: int = 0o666                      # who may connect; admin RPCs are checked by SO_PEERCRED
    hook_socket: str = "{data_dir}/hook.sock"     # line-JSON socket for the Slurm hook; "" = off
    tcp: str = ""                                 # "127.0.0.1:50051" to also listen on TCP (requires TLS)
    tls_cert: str = ""
    tls_key: str = ""
    workers: int = 2                              # Python threads answering calls; more only adds GIL contention
    cpu_affinity: str = ""                        # "1" or "0,2-3": pin the daemon to these CPUs; "" = no pinning
    max_concurrent: int = 64                      # beyond this, RESOURCE_EXHAUSTED at once
    metrics: str = "127.0.0.1:0"                  # Prometheus endpoint host:port; port 0 = any free port; "" = off
    grace_s: float = 5.0                          # SIGTERM: drain in-flight calls this long
    admin_users: tuple[str, ...] = ("root", "slurm", "hpcpredict")
    log_format: str = "text"                      # text | json
    log_level: str = "INFO"


@dataclass(frozen=True)
class StoreConfig:
    path: str = "{data_dir}/hpcpredict.sqlite"
    # FULL: every acknowledged outcome is on disk before the reply (survives power loss, not
    # just kill -9); the cost is one fsync per transaction, small next to a gRPC round trip.
    synchronous: str = "FULL"
    busy_timeout_ms: int = 5000
    # Each of the daemon's two prediction journals (memory-mapped, committed in batches);
    # 0 writes every prediction straight into SQLite. 8 MiB holds ~5,000 predictions.
    journal_mib: int = 8
    # Prediction rows (one per Predict, each with its bounded request) are deleted after this
    # many days and beyond this many rows, oldest first (0 = no limit); outcomes are kept.
    keep_predictions_days: int = 90
    keep_predictions: int = 5_000_000


@dataclass(frozen=True)
class ModelsConfig:
    dir: str = "{data_dir}/models"
    bundled: bool = True                          # serve the bundled example models when none published
    # Who must be able to read published models: "user" or "user:group" the daemon runs as;
    # "" = the owner and group of the models directory. Root's publish chowns to them; anyone
    # else's publish is refused when they could not read it.
    owner: str = ""


@dataclass(frozen=True)
class PolicyConfig:
    risk: float = 0.03                            # target P(job outlives the suggested limit)
    min_time_limit_s: int = 300                   # never suggest a limit below this
    default_runtime_s: int = 3600                 # cold start with no history and no request
    history_window: int = 20                      # recent runs kept per (user, application)
    set_time_limit_when_absent: bool = True       # job_submit: no --time -> time_limit = bound
    set_time_min_when_given: bool = True          # job_submit: --time given -> time_min = point
    advice_policy: str = "least-node-hours"       # node-count advice: least-node-hours | meets-request
    advice_tolerance: float = 0.10


@dataclass(frozen=True)
class LimitsConfig:
    max_script_bytes: int = 1 << 20
    max_inputs: int = 512
    max_text_bytes: int = 4096                    # any single string field, each argv word, each environment key and value
    max_environment: int = 256                    # environment variables per request
    max_nodes: int = 1_000_000
    max_ntasks: int = 100_000_000
    max_node_list_bytes: int = 1 << 20
    max_messages: int = 1_000_000
    max_time_s: int = 366 * 86400
    parse_cache_mib: int = 16                     # memory for parsed scripts (keyed by digest, evicted by bytes)
    # What a stored prediction keeps of its request: whole up to stored_request_bytes; beyond,
    # without its environment, its script cut to stored_script_bytes (the parsed inputs kept
    # instead), and not at all when that is still too large.
    stored_request_bytes: int = 65536
    stored_script_bytes: int = 16384


@dataclass(frozen=True)
class TopologyConfig:
    file: str = ""                                # placement JSON from `hpcpredict topology import`


@dataclass(frozen=True)
class Config:
    data_dir: str
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    source: str = "<defaults>"


SECTIONS = {"daemon": DaemonConfig, "store": StoreConfig, "models": ModelsConfig,
            "policy": PolicyConfig, "limits": LimitsConfig, "topology": TopologyConfig}


def _coerce(section: str, key: str, raw, default):
    where = f"[{section}] {key}"
    try:
        if isinstance(default, bool):
            if isinstance(raw, str):
                if raw.lower() in ("1", "true", "yes", "on"):
                    return True
                if raw.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError(raw)
            if not isinstance(raw, bool):
                raise ValueError(raw)
            return raw
        if isinstance(default, int):
            if isinstance(raw, str):
                return int(raw, 0)
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise ValueError(raw)
            return raw
        if isinstance(default, float):
            if isinstance(raw, bool):
                raise ValueError(raw)
            return float(raw)
        if isinstance(default, tuple):
            if isinstance(raw, str):
                return tuple(part.strip() for part in raw.split(",") if part.strip())
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                raise ValueError(raw)
            return tuple(raw)
        if not isinstance(raw, str):
            raise ValueError(raw)
        return raw
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{where}: expected {type(default).__name__}, got {raw!r}") from error


def load_config(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the TOML file (optional), apply ``HPCPREDICT_<SECTION>_<KEY>`` overrides, expand paths."""
    environ = os.environ if environ is None else environ
    data: dict = {}
    source = "<defaults>"
    if path is None and environ.get("HPCPREDICT_CONFIG"):
        path = environ["HPCPREDICT_CONFIG"]
    if path is not None:
        source = str(path)
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise ConfigError(f"config file not found: {path}") from error
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path}: not valid TOML: {error}") from error
    data_dir = str(data.pop("data_dir", "") or default_data_dir(environ))
    unknown = set(data) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"{source}: unknown section(s): {', '.join(sorted(unknown))}")
    built = {}
    for section, cls in SECTIONS.items():
        values = data.get(section, {})
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        defaults = cls()
        known = {f.name for f in fields(cls)}
        extra = set(values) - known
        if extra:
            raise ConfigError(f"{source}: [{section}] unknown key(s): {', '.join(sorted(extra))}")
        changes = {}
        for name in known:
            default = getattr(defaults, name)
            env_name = f"HPCPREDICT_{section.upper()}_{name.upper()}"
            if env_name in environ:
                changes[name] = _coerce(section, name, environ[env_name], default)
            elif name in values:
                changes[name] = _coerce(section, name, values[name], default)
            if isinstance(changes.get(name, default), str):
                changes[name] = changes.get(name, default).replace("{data_dir}", data_dir)
        built[section] = replace(defaults, **changes)
    config = Config(data_dir=data_dir, source=source, **built)
    _validate(config)
    return config


def _validate(config: Config) -> None:
    if not 0.0 < config.policy.risk < 1.0:
        raise ConfigError(f"[policy] risk must be in (0, 1), got {config.policy.risk}")
    if config.store.synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ConfigError(f"[store] synchronous must be OFF|NORMAL|FULL|EXTRA, got {config.store.synchronous!r}")
    if not 0 <= config.store.journal_mib <= 1024:
        raise ConfigError(f"[store] journal_mib must be 0..1024, got {config.store.journal_mib}")
    if config.daemon.workers < 1 or config.daemon.max_concurrent < 1:
        raise ConfigError("[daemon] workers and max_concurrent must be >= 1")
    if config.daemon.tcp and not (config.daemon.tls_cert and config.daemon.tls_key):
        raise ConfigError("[daemon] tcp requires tls_cert and tls_key (a TCP listener always uses TLS)")
    if config.daemon.log_format not in ("text", "json"):
        raise ConfigError(f"[daemon] log_format must be text or json, got {config.daemon.log_format!r}")
