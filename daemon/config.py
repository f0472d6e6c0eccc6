"""The configuration of the daemon and of the CLI, and the one place that reads it.

Both read the same files, so an admin who types ``hpcpredict status`` reaches the site's
daemon: ``--config FILE`` or ``$HPCPREDICT_CONFIG`` names the only file read; otherwise the
site file ``/etc/hpcpredict/hpcpredict.toml`` and then the user's
``$XDG_CONFIG_HOME/hpcpredict/hpcpredict.toml`` (``~/.config/...``) are read when they exist,
a key of the later file replacing the same key of the earlier one
(``$HPCPREDICT_CONFIG_PATH``, colon-separated, replaces that search list; ``""`` = no file).
Every key has a documented default (README "Configuration reference"); any key can be
overridden by an environment variable ``HPCPREDICT_<SECTION>_<KEY>`` (upper case), which is
how tests and systemd units point the daemon somewhere else without a file. Paths may use
``{data_dir}``. With no file and no variables the daemon runs on embedded defaults: SQLite
store and models under a per-user data directory.

>>> cfg = load_config(None, environ={"HPCPREDICT_DATA_DIR": "/tmp/x", "HPCPREDICT_CONFIG_PATH": ""})
>>> cfg.store.path
'/tmp/x/hpcpredict.sqlite'
"""
from __future__ import annotations

import logging
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

from .errors import ConfigError

log = logging.getLogger(__name__)

SITE_CONFIG = "/etc/hpcpredict/hpcpredict.toml"

# Keys earlier versions read and this one does not, with what to do instead. Such a key is
# ignored with a warning naming the fix (an upgrade must not stop a daemon over a key whose
# removal changes nothing). Any other unknown key or section is ignored too, with a warning and
# a fault (`hpcpredict status`): it may be a typo or a key of a newer release (a downgrade must
# not stop the daemon either). An unknown key in [policy] may narrow where limits are set (a
# newer release's scope), so while one is there the daemon sets no limit (mode advise).
OBSOLETE_KEYS = {
    ("daemon", "server"): "the daemon always serves gRPC with grpcio now; delete the line",
    ("daemon", "cpu_affinity"): "the daemon no longer pins itself to CPUs (no measurement showed a gain); "
                                "delete the line",
    ("policy", "set_time_limit_when_absent"): "[policy] mode decides which limits are set; delete the line",
    ("policy", "set_time_min_when_given"): "[policy] mode decides which limits are set; delete the line",
}


def default_data_dir(environ: Mapping[str, str]) -> str:
    if environ.get("HPCPREDICT_DATA_DIR"):
        return environ["HPCPREDICT_DATA_DIR"]
    base = environ.get("XDG_DATA_HOME") or os.path.join(environ.get("HOME") or _home_directory(), ".local", "share")
    return os.path.join(base, "hpcpredict")


def _home_directory() -> str:
    """The user's home from the password database (a daemon started without ``HOME``, by an init
    script, must not end up with its store under a shared /tmp)."""
    import pwd

    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        home = ""
    if not home or home == "/" or not os.path.isdir(home):
        raise ConfigError(f"no data directory: uid {os.getuid()} has no HOME and no home directory; set "
                          f"data_dir in the config file or $HPCPREDICT_DATA_DIR")
    return home


@dataclass(frozen=True)
class DaemonConfig:
    # gRPC, for trusted tools only: whoever can open it acts as the daemon's own user, so its
    # mode may not let others in (0600, or 0660 with a group of trusted tools).
    socket: str = "{data_dir}/hpcpredictd.sock"
    socket_mode: int = 0o600
    # The local socket (line-JSON, every method): the kernel says who calls (SO_PEERCRED), so
    # everyone may connect and each call is checked against its caller (README "Who may call what").
    # Its keys keep the name sites' files and the hooks' settings use (hook_socket): the listener
    # is the local socket (daemon/listeners/local_socket.py), the hooks are but some of its callers.
    hook_socket: str = "{data_dir}/hook.sock"     # "" = off
    hook_socket_mode: int = 0o666
    workers: int = 2                              # Python threads answering calls; more only adds GIL contention
    max_concurrent: int = 64                      # beyond this, RESOURCE_EXHAUSTED at once
    max_connections: int = 512                    # open connections to the local socket
    max_connections_per_user: int = 32            # ... of one unprivileged uid
    reserved_connections: int = 64                # ... of max_connections, only for root, slurm_user and admins
    user_line_bytes: int = 131072                 # a request line of an unprivileged caller (the hooks' may be 4 MiB)
    request_timeout_s: float = 5.0                # a whole request line must arrive within this
    idle_timeout_s: float = 30.0                  # a connection with no request for this long is closed
    metrics: str = "127.0.0.1:9464"               # Prometheus endpoint host:port; port 0 = any free port; "" = off
    grace_s: float = 5.0                          # SIGTERM: drain in-flight calls this long
    slurm_user: str = "slurm"                     # SlurmUser: its hooks record predictions and outcomes
    admin_users: tuple[str, ...] = ("root", "hpcpredict")
    clusters: tuple[str, ...] = ()                # Slurm clusters served; the first is the one of requests naming none
    log_format: str = "text"                      # text | json
    log_level: str = "INFO"
    # Users on login and compute nodes (remote.py): Predict over TCP, the caller named by a MUNGE
    # credential. "host:port" to listen on; "" = off. Only for the cluster's internal network.
    remote_listen: str = ""
    remote_max_connections: int = 128             # open remote connections, all hosts
    remote_max_connections_per_host: int = 8      # ... of one address not past their credential yet
    remote_max_connections_per_user: int = 4      # ... of one uid once its credential is checked
    remote_max_rate: float = 100.0                # remote connections accepted a second: the listener's CPU ceiling
    remote_max_rate_per_user: float = 10.0        # ... of one user
    munge_socket: str = ""                        # this host's munged; "" = libmunge's default socket


@dataclass(frozen=True)
class StoreConfig:
    backend: str = "sqlite"                       # sqlite (embedded) | postgres (a shared server: dsn)
    dsn: str = ""                                 # postgres: libpq connection string, e.g. "host=/run/postgresql dbname=hpcpredict"
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
    # What one ordinary user's own Predicts may add to the store (history writers: unlimited):
    # KiB of prediction rows per uid per hour; past it the rows lose their requests, then are
    # not kept (the answers still come). ADMIN.md "Bounds on what is kept".
    user_stored_kib_per_hour: int = 4096
    # What the history writers' own Predicts (the Slurm hooks': root, SlurmUser, admins) may add,
    # KiB of request bytes per uid per hour (0: no budget): past it their rows keep a compact
    # request (no environment, no script), then none; the rows themselves are always kept.
    # 262144 KiB = 256 MiB an hour: ~17,000 submissions of 15 KB, ~1 MB of store a second banked.
    writer_stored_kib_per_hour: int = 262144
    # The store's cap: its files' size (0: none) and the space left on its file system (0: not
    # checked). Past it users' predictions are not kept and the hooks' keep a compact request;
    # outcomes are still stored. A fault says so, before the disk is full.
    max_store_mib: int = 16384
    min_free_mib: int = 256


@dataclass(frozen=True)
class ModelsConfig:
    dir: str = "{data_dir}/models"
    bundled: bool = True                          # serve the bundled example models when none published
    # Who must be able to read published models: "user" or "user:group" the daemon runs as;
    # "" = the owner and group of the models directory. Root's publish chowns to them; anyone
    # else's publish is refused when they could not read it.
    owner: str = ""
    keep_versions: int = 10                       # a publish removes older versions beyond this many (never the
                                                  # serving one); 0 = keep all. `hpcpredict rollback` picks among them


@dataclass(frozen=True)
class PolicyConfig:
    risk: float = 0.03                            # target P(job outlives the suggested limit)
    min_time_limit_s: int = 300                   # never suggest a limit below this
    default_runtime_s: int = 3600                 # cold start with no history and no request
    history_window: int = 20                      # recent runs kept per (user, application)
    # What the daemon does to a job's limits (daemon/policy: plan_limits): "soft" = the estimate
    # at `soft_risk` as --time-min, only where slurmctld runs with time_min_as_soft_limit (it then never
    # kills); "bound" = the runtime bound at `risk` as a kill-limit --time-min / --time (opt-in: a
    # site that accepts that risk); "advise" = no limit changes; "auto" = soft where the
    # controller is Slurm >= 23.11.0 with the option (daemon/policy/controller.py), else advise.
    mode: str = "auto"
    # soft only: set the soft --time-min only when the job's limit is at most this many times the
    # estimate (a width-blind guard of the reservation slip, off by default); 0 = no guard.
    soft_max_ratio: float = 0.0
    # soft only: set the soft --time-min only when the slip it can cause a waiting job's reservation
    # is at most this (seconds): the window the controller's planning rule opens (--time - time_min
    # at the start on 23.11-25.05.3; half that, once past time_min, on 25.05.4+) times the job's
    # share of the cluster's CPUs (daemon/policy/limits.py: reservation_slip_s); 0 = no guard.
    soft_max_slip_s: float = 1800.0
    # soft only: the soft --time-min is the runtime the job outlives with this probability (the
    # walltime model's bound at this risk, read beside the one at `risk`), per planning rule: on a
    # controller that plans a running soft job at its hard end (23.11 - 25.05.3) the value only
    # decides admission, so it stays above the point estimate; on one that plans it at its soft end,
    # then halfway (25.05.4+, 25.11+) the value is the plan and an overrun costs half a window.
    soft_risk_hard_end: float = 0.3
    soft_risk_halfway: float = 0.5
    # the key of earlier versions: one soft_risk for every rule when set (> 0); 0 = per rule, above.
    soft_risk: float = 0.0
    # How the daemon reads the controller's live configuration (SLURM_VERSION, SchedulerParameters;
    # a `scontrol ... show config` also gives `scontrol ... -o show nodes` for the cluster's size),
    # and how often (seconds; off the request path). A controller it cannot read gets no soft limit.
    controller_config_command: str = "scontrol show config"
    controller_check_s: float = 300.0
    advice_policy: str = "least-node-hours"       # node-count advice: least-node-hours | meets-request
    advice_tolerance: float = 0.10
    # Where limits may change (daemon/policy/scope.py); elsewhere jobs are only predicted and told.
    partitions: tuple[str, ...] = ()              # only jobs in these partitions; () = all
    accounts: tuple[str, ...] = ()                # only jobs of these accounts; () = all
    opt_out_users: tuple[str, ...] = ()           # these users' jobs are never changed

    def soft_risk_for(self, rule: str) -> float:
        """The soft --time-min's risk on a controller of planning ``rule`` (daemon/policy/controller.py):
        ``soft_risk`` where a site set it, else the rule's own (hard end for any other rule)."""
        if self.soft_risk > 0:
            return self.soft_risk
        return self.soft_risk_halfway if rule == "soft_then_halfway" else self.soft_risk_hard_end


@dataclass(frozen=True)
class RequestBounds:
    """``[limits]``: the bounds on one request's size and cost (bytes, counts), checked at the
    listeners and in jobspec before the request is parsed or predicted. Not a job's time limits:
    those are what ``[policy]`` decides (daemon/policy/). The section keeps its name (sites'
    files say ``[limits]``); ``Config.request_bounds`` holds it."""

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
class AccountingConfig:
    # Where `hpcpredict refresh` reads finished jobs: "auto" = pyslurm's database API when pyslurm
    # imports and was built for the site's Slurm release, else `sacct --json`; "sacct" | "pyslurm"
    # force one (a forced pyslurm that cannot be used is an error naming why).
    source: str = "auto"


@dataclass(frozen=True)
class ClientConfig:
    # Where the CLI asks when this host runs no daemon (a login or compute node): the controller's
    # [daemon] remote_listen, "host:port". "" = only the local socket.
    remote: str = ""
    # Who answers there: the reply must carry a MUNGE credential of this user (the daemon's, name
    # or uid), or the CLI believes nothing of it (a user who took the port gets nowhere).
    daemon_user: str = "hpcpredict"


@dataclass(frozen=True)
class ForecastConfig:
    # When will a job start (`hpcpredict when`, daemon/forecast/): a thread reads the queue
    # (`squeue_command` plus the format of daemon/forecast/queue.py) every `interval_s` and runs the
    # forecast (`runs` draws of every job's runtime) on it, whatever the number of users; `When`
    # about a submitted job reads what it kept. false = no thread, `When` answers that it is off.
    enabled: bool = True
    interval_s: float = 60.0
    runs: int = 32
    # running jobs plus the first pending ones in priority order; more than the forecast runs
    # (daemon/forecast/simulate.py MAX_JOBS, 2000) would be refused at every refresh: capped there
    max_jobs: int = 2000
    max_output_mib: int = 16                      # squeue writing more is killed: no picture this interval
    squeue_timeout_s: float = 30.0
    squeue_command: str = "squeue"                # e.g. "squeue -M cluster"
    compute_timeout_s: float = 60.0               # one forecast's process (daemon/forecast/worker.py), killed past it
    # A job not yet submitted (`hpcpredict when JOB_SCRIPT`) is one forecast computed for the call,
    # on the kept queue: at most this many a minute per user, and one at a time.
    user_requests_per_minute: float = 6.0
    # The sbatch line (Predict's user message) adds "likely to start in ~N min" for a job like the
    # one submitted: each refresh also forecasts a fixed grid of probe jobs (daemon/forecast/probes.py)
    # and Predict looks the job's class up, computing nothing. Costs the forecast's process up to
    # half an interval more each refresh.
    sbatch_line: bool = False


@dataclass(frozen=True)
class Config:
    data_dir: str
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    request_bounds: RequestBounds = field(default_factory=RequestBounds)   # the file's [limits]
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    accounting: AccountingConfig = field(default_factory=AccountingConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    source: str = "<defaults>"
    # What of the files was not understood and ignored (one line each, "FILE: [section] key ..."):
    # the daemon names them as a fault.
    ignored: tuple[str, ...] = ()


POLICY_MODES = ("auto", "soft", "bound", "advise")
SECTIONS = {"daemon": DaemonConfig, "store": StoreConfig, "models": ModelsConfig,
            "policy": PolicyConfig, "limits": RequestBounds, "topology": TopologyConfig,
            "accounting": AccountingConfig, "client": ClientConfig, "forecast": ForecastConfig}


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


def config_files(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The files that make the configuration, in the order they apply (a later key wins).

    A named file (``path``, else ``$HPCPREDICT_CONFIG``) is the only one and must exist; the
    search list (site file, then the user's) keeps only the files that exist.
    """
    environ = os.environ if environ is None else environ
    if path is None and environ.get("HPCPREDICT_CONFIG"):
        path = environ["HPCPREDICT_CONFIG"]
    if path is not None:
        return [str(path)]
    if "HPCPREDICT_CONFIG_PATH" in environ:
        search = [part for part in environ["HPCPREDICT_CONFIG_PATH"].split(":") if part]
    else:
        base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or "/nonexistent", ".config")
        search = [SITE_CONFIG, os.path.join(base, "hpcpredict", "hpcpredict.toml")]
    return [name for name in search if _exists(name)]


def _exists(name: str) -> bool:
    """True also for a file this user may not see: reading it then says "permission denied"
    instead of silently falling back to other settings."""
    try:
        os.stat(name)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _read_file(path: str, ignored: list[tuple[str, str]] | None = None) -> dict:
    """The file's sections and keys; what it holds that this release does not read is left
    out and appended to ``ignored`` as (section, line)."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ConfigError(f"config file not found: {path}") from error
    except PermissionError as error:
        raise ConfigError(f"{path}: permission denied (readable by the daemon's group; "
                          f"name another file with --config or $HPCPREDICT_CONFIG)") from error
    except IsADirectoryError as error:
        raise ConfigError(f"{path}: is a directory, not a config file") from error
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from error
    ignored = [] if ignored is None else ignored
    unknown = set(data) - set(SECTIONS) - {"data_dir"}
    if unknown:
        ignored.append(("", f"{path}: unknown section(s) {', '.join(f'[{name}]' for name in sorted(unknown))} "
                            f"ignored (a typo, or written for a newer hpcpredict)"))
        log.warning("%s", ignored[-1][1])
        for name in unknown:
            del data[name]
    for section in SECTIONS:
        values = data.get(section, {})
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: [{section}] must be a table")
        for key in sorted(set(values)):
            if (section, key) in OBSOLETE_KEYS:
                log.warning("%s: [%s] %s is obsolete and ignored: %s", path, section, key,
                            OBSOLETE_KEYS[section, key])
                del values[key]
        extra = set(values) - {f.name for f in fields(SECTIONS[section])}
        if extra:
            then = "; no limit is set until it is removed ([policy] mode advise)" if section == "policy" else ""
            ignored.append((section, f"{path}: [{section}] unknown key(s) {', '.join(sorted(extra))} ignored "
                                     f"(a typo, or written for a newer hpcpredict){then}"))
            log.warning("%s", ignored[-1][1])
            for key in extra:
                del values[key]
    return data


def load_config(path: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the config files (:func:`config_files`), apply ``HPCPREDICT_<SECTION>_<KEY>``
    overrides, expand paths."""
    environ = os.environ if environ is None else environ
    files = config_files(path, environ)
    data: dict = {}
    ignored: list[tuple[str, str]] = []
    for name in files:
        for key, value in _read_file(name, ignored).items():
            if isinstance(value, dict):
                data.setdefault(key, {}).update(value)
            else:
                data[key] = value
    source = " + ".join(files) or "<defaults>"
    data_dir = str(environ.get("HPCPREDICT_DATA_DIR") or data.pop("data_dir", "") or default_data_dir(environ))
    built = {}
    for section, cls in SECTIONS.items():
        values = data.get(section, {})
        defaults = cls()
        known = {f.name for f in fields(cls)}
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
    if built["policy"].mode not in POLICY_MODES:
        ignored.append(("policy", f"[policy] mode {built['policy'].mode!r} not understood (one of "
                                  f"{'|'.join(POLICY_MODES)}; a typo, or a mode of a newer hpcpredict): no limit is "
                                  f"set (mode advise)"))
        log.warning("%s", ignored[-1][1])
    if any(section == "policy" for section, _ in ignored):
        # Never more limits than the site asked for: what it wrote may narrow them, or be a mode we lack.
        built["policy"] = replace(built["policy"], mode="advise")
    built["request_bounds"] = built.pop("limits")     # the file's [limits]: the field says what it bounds
    config = Config(data_dir=data_dir, source=source, ignored=tuple(line for _, line in ignored), **built)
    _validate(config)
    return config


def _validate(config: Config) -> None:
    if not 0.0 < config.policy.risk < 1.0:
        raise ConfigError(f"[policy] risk must be in (0, 1), got {config.policy.risk}")
    for key in ("soft_risk_hard_end", "soft_risk_halfway"):
        if not 0.0 < getattr(config.policy, key) < 1.0:
            raise ConfigError(f"[policy] {key} must be in (0, 1), got {getattr(config.policy, key)}")
    if not 0.0 <= config.policy.soft_risk < 1.0:
        raise ConfigError(f"[policy] soft_risk must be in (0, 1) (or 0: per rule), got {config.policy.soft_risk}")
    if not 0.0 <= config.policy.soft_max_slip_s < float("inf"):
        raise ConfigError(f"[policy] soft_max_slip_s must be a finite number >= 0, got {config.policy.soft_max_slip_s}")
    if config.policy.soft_max_ratio < 0 or config.policy.controller_check_s <= 0:
        raise ConfigError("[policy] soft_max_ratio must be >= 0 and controller_check_s > 0")
    if config.store.backend not in ("sqlite", "postgres"):
        raise ConfigError(f"[store] backend must be sqlite|postgres, got {config.store.backend!r}")
    if config.store.backend == "postgres" and not config.store.dsn:
        raise ConfigError("[store] backend = postgres needs [store] dsn (a libpq connection string)")
    if config.accounting.source not in ("auto", "sacct", "pyslurm"):
        raise ConfigError(f"[accounting] source must be auto|sacct|pyslurm, got {config.accounting.source!r}")
    if config.store.synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ConfigError(f"[store] synchronous must be OFF|NORMAL|FULL|EXTRA, got {config.store.synchronous!r}")
    if not 0 <= config.store.journal_mib <= 1024:
        raise ConfigError(f"[store] journal_mib must be 0..1024, got {config.store.journal_mib}")
    if min(config.store.user_stored_kib_per_hour, config.store.writer_stored_kib_per_hour, config.store.max_store_mib,
           config.store.min_free_mib) < 0:
        raise ConfigError("[store] user_stored_kib_per_hour, writer_stored_kib_per_hour, max_store_mib and "
                          "min_free_mib must be >= 0")
    if config.models.keep_versions == 1 or config.models.keep_versions < 0:
        raise ConfigError(f"[models] keep_versions must be 0 (keep all) or >= 2 (the serving version and one to "
                          f"roll back to), got {config.models.keep_versions}")
    if config.daemon.workers < 1 or config.daemon.max_concurrent < 1:
        raise ConfigError("[daemon] workers and max_concurrent must be >= 1")
    if config.daemon.socket_mode & 0o007:
        raise ConfigError(f"[daemon] socket_mode {config.daemon.socket_mode:#o} would let every user act as the "
                          f"daemon on the gRPC socket: use 0600 or 0660 (users ask on the local socket)")
    if config.daemon.max_connections < 1 or config.daemon.max_connections_per_user < 1:
        raise ConfigError("[daemon] max_connections and max_connections_per_user must be >= 1")
    if not 0 <= config.daemon.reserved_connections < config.daemon.max_connections:
        raise ConfigError("[daemon] reserved_connections must be >= 0 and below max_connections")
    if config.daemon.user_line_bytes < 1024:
        raise ConfigError("[daemon] user_line_bytes must be >= 1024")
    if config.daemon.request_timeout_s <= 0 or config.daemon.idle_timeout_s <= 0:
        raise ConfigError("[daemon] request_timeout_s and idle_timeout_s must be > 0")
    for where, address in (("[daemon] remote_listen", config.daemon.remote_listen),
                           ("[client] remote", config.client.remote)):
        if address:
            host_port(address, where)
    if min(config.daemon.remote_max_connections, config.daemon.remote_max_connections_per_host,
           config.daemon.remote_max_connections_per_user) < 1:
        raise ConfigError("[daemon] remote_max_connections, remote_max_connections_per_host and "
                          "remote_max_connections_per_user must be >= 1")
    if config.client.remote and not config.client.daemon_user.strip():
        raise ConfigError("[client] daemon_user: the daemon's user (name or uid) is needed to check its answers")
    if config.daemon.remote_max_rate <= 0 or config.daemon.remote_max_rate_per_user <= 0:
        raise ConfigError("[daemon] remote_max_rate and remote_max_rate_per_user must be > 0")
    forecast = config.forecast
    if min(forecast.interval_s, forecast.squeue_timeout_s, forecast.compute_timeout_s,
           forecast.user_requests_per_minute) <= 0:
        raise ConfigError("[forecast] interval_s, squeue_timeout_s, compute_timeout_s and user_requests_per_minute "
                          "must be > 0")
    if not 1 <= forecast.runs <= 1000 or forecast.max_jobs < 1 or forecast.max_output_mib < 1:
        raise ConfigError("[forecast] runs must be 1..1000, max_jobs and max_output_mib >= 1")
    if config.daemon.log_format not in ("text", "json"):
        raise ConfigError(f"[daemon] log_format must be text or json, got {config.daemon.log_format!r}")


def host_port(address: str, where: str = "address") -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> (host, port).

    >>> host_port("ctl:7011"), host_port("[::1]:7011")
    (('ctl', 7011), ('::1', 7011))
    """
    host, _, port = address.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{where}: expected host:port, got {address!r}")
    return host, int(port)
