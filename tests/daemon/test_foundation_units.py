"""Config, store and registry on their own (real SQLite files, real folders)."""
from __future__ import annotations

import json
import os

import pytest

from hpcpredict.daemon import server
from hpcpredict.daemon.cli.main import build_parser
from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.errors import ConfigError, InvalidRequest, ModelArtifactError, ModelNotFound
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.registry import CURRENT, ModelRegistry
from hpcpredict.daemon.sbatch_options import parse_sbatch
from hpcpredict.daemon.store import PredictionRow, SQLiteStore
from hpcpredict.daemon.timefmt import parse_slurm_time, slurm_time


def test_config_defaults_file_and_environment(tmp_path):
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(tmp_path)})
    assert config.store.path == f"{tmp_path}/hpcpredict.sqlite"
    assert config.policy.risk == 0.03
    path = tmp_path / "c.toml"
    path.write_text('[policy]\nrisk = 0.05\n[daemon]\nadmin_users = ["ops"]\n')
    config = load_config(path, environ={"HPCPREDICT_DATA_DIR": str(tmp_path), "HPCPREDICT_DAEMON_WORKERS": "3"})
    assert (config.policy.risk, config.daemon.admin_users, config.daemon.workers) == (0.05, ("ops",), 3)


@pytest.mark.parametrize("text,expected", [
    ("[policy]\nrisk = 2.0\n", "risk"),
    ("[daemon]\nworkers = 'many'\n", "[daemon] workers"),
    ("[daemon\n", "not valid TOML"),
    ("[daemon]\nsocket_mode = 0o666\n", "socket_mode 0o666 would let every user act as the daemon"),
])
def test_config_errors_are_one_clear_line(tmp_path, text, expected):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[")):
        load_config(path, environ={})


@pytest.mark.parametrize("text, line, mode", [
    ("[polcy]\nrisk = 0.1\n", "unknown section(s) [polcy] ignored", "auto"),
    ("[daemon]\nworkerz = 3\n", "[daemon] unknown key(s) workerz ignored", "auto"),
    ("[policy]\nmode = 'bound'\nonly_queues = ['short']\n", "[policy] unknown key(s) only_queues ignored", "advise"),
    ("[policy]\nmode = 'bound-by-partition'\n", "[policy] mode 'bound-by-partition' not understood", "advise"),
])
def test_unknown_keys_are_warned_not_fatal_and_never_widen_the_limits(tmp_path, caplog, text, line, mode):
    """A typo or a newer release's key (a downgrade) is ignored, logged and kept for the daemon's
    faults; one in [policy] (it may narrow where limits are set) or a mode this release lacks
    leaves every limit as submitted (mode advise), never the default."""
    path = tmp_path / "newer.toml"
    path.write_text(text)
    config = load_config(path, environ={"HPCPREDICT_DATA_DIR": str(tmp_path)})
    assert any(line in ignored for ignored in config.ignored), config.ignored
    assert line in caplog.text
    assert config.policy.mode == mode


def record(job_id, end, runtime=100.0, user="u", state="COMPLETED"):
    return JobRecord(job_id=job_id, user=user, submit_time=end - runtime - 10, runtime_s=runtime,
                     end_time=end, state=state, application="app", inputs={"size": 4.0})


def test_store_round_trip_idempotence_and_order(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.sqlite"))
    assert store.add_jobs([record("2", 200), record("1", 100)], "swf:t") == (2, 0)
    assert store.add_jobs([record("1", 100)], "swf:t") == (0, 1)
    assert store.record_outcome(record("9", 150), prediction_id="p")
    assert not store.record_outcome(record("9", 150))
    assert [r.job_id for r in store.iter_jobs()] == ["1", "9", "2"]  # end-time order
    assert next(store.iter_jobs()).inputs == {"size": 4.0}
    store.record_prediction(PredictionRow("p", "9", "submit", "u", "app", 1.0, 120.0, 90.0, 150.0, 200.0, 0.0,
                                          None, "m", "1", False, b"\x01"))
    assert store.prediction("p").request == b"\x01"
    assert store.counts() == {"jobs": 3, "outcomes": 1, "predictions": 1}
    assert store.recent_accuracy()["accuracy"] == pytest.approx(100 / 120)
    store.close()
    reopened = SQLiteStore(str(tmp_path / "s.sqlite"))  # migrations are not re-applied
    assert reopened.counts()["jobs"] == 3


def test_registry_publish_verify_and_refuse(tmp_path):
    from hpcpredict.topology.placement import Placement

    registry = ModelRegistry(tmp_path / "models")
    with pytest.raises(ModelNotFound):
        registry.current("topology")
    folder = tmp_path / "m"
    folder.mkdir()
    Placement(kind="tree", levels=("level1",), paths={"a": ("s",)}).save(folder / "topology.json")
    first = registry.publish("topology", folder, metadata={"note": "x"})
    second = registry.publish("topology", folder)
    assert registry.current("topology").version == second.version != first.version
    assert registry.versions("topology") == sorted([first.version, second.version])
    manifest = json.loads((second.path / "artifact.json").read_text())
    assert set(manifest["files"]) == {"model/topology.json"}
    (second.model_path / "topology.json").write_text("{}")
    with pytest.raises(ModelArtifactError, match="checksum"):
        registry.load("topology")
    (second.path / "artifact.json").unlink()
    with pytest.raises(ModelArtifactError, match="not a model artifact"):
        registry.current("topology")
    with pytest.raises(ModelArtifactError, match="unknown model kind"):
        registry.publish("pickle", folder)
    with pytest.raises(ModelArtifactError, match="key"):
        registry.publish("topology", folder, key="../etc")
    # an interrupted publish (staging folder left behind) never becomes current
    (registry.root / "topology" / "_site" / ".tmp-crashed").mkdir()
    assert (registry.root / "topology" / "_site" / CURRENT).read_text().strip() == second.version


def test_sbatch_options_and_times():
    script = b"#!/bin/bash\n#SBATCH --nodes=2-4\n#SBATCH -n 16 -t 1-00:00\n#SBATCH --mail-user=x@y\necho\n#SBATCH -N 9\n"
    opts = parse_sbatch(script, ["-t", "30"])
    assert (opts.nodes, opts.ntasks, opts.time_limit_s) == (2, 16, 1800)  # directives stop at the first command
    assert slurm_time(3601) == "01:01:00" and slurm_time(86400 * 2) == "2-00:00:00"
    assert parse_slurm_time("2-03:04:05") == ((2 * 24 + 3) * 60 + 4) * 60 + 5
    with pytest.raises(InvalidRequest, match="--time"):
        parse_sbatch(b"#!/bin/sh\n", ["-t", "soon"])


def test_predict_cli_reads_its_own_options_after_the_script():
    from hpcpredict.daemon.cli.predict import split_own_options

    args = build_parser().parse_args(["predict", "job.sh", "-N", "4", "--user", "91", "-t", "1:00:00", "--json"])
    assert split_own_options(args) == ["-N", "4", "-t", "1:00:00"]
    assert (args.user, args.json) == ("91", True)
    args = build_parser().parse_args(["predict", "--user", "7", "job.sh", "-N", "2"])
    assert split_own_options(args) == ["-N", "2"] and args.user == "7"


def test_config_site_then_user_file_then_environment(tmp_path):
    """Daemon and CLI read the same files: the site's, then the user's (a later key wins), then
    ``HPCPREDICT_<SECTION>_<KEY>``; a named file replaces the search."""
    site = tmp_path / "etc" / "hpcpredict.toml"
    site.parent.mkdir()
    site.write_text('data_dir = "/srv/hp"\n[daemon]\nsocket = "/run/hp/d.sock"\nworkers = 3\n[policy]\nrisk = 0.05\n')
    user = tmp_path / "home" / ".config" / "hpcpredict" / "hpcpredict.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[daemon]\nworkers = 4\n")
    environ = {"HPCPREDICT_CONFIG_PATH": f"{site}:{user}:{tmp_path / 'absent.toml'}"}
    config = load_config(None, environ=environ)
    assert (config.daemon.socket, config.daemon.workers, config.policy.risk) == ("/run/hp/d.sock", 4, 0.05)
    assert config.store.path == "/srv/hp/hpcpredict.sqlite"
    assert config.source == f"{site} + {user}"
    assert load_config(None, environ={**environ, "HPCPREDICT_DAEMON_WORKERS": "5"}).daemon.workers == 5
    assert load_config(None, environ={**environ, "HPCPREDICT_DATA_DIR": "/d"}).store.path == "/d/hpcpredict.sqlite"
    assert load_config(site, environ=environ).daemon.workers == 3          # --config: that file only
    assert load_config(None, environ={**environ, "HPCPREDICT_CONFIG": str(user)}).daemon.socket != "/run/hp/d.sock"
    # Without HPCPREDICT_CONFIG_PATH the user's file is found under XDG_CONFIG_HOME.
    from hpcpredict.daemon.config import config_files
    assert str(user) in config_files(None, {"XDG_CONFIG_HOME": str(user.parents[1])})


def test_config_obsolete_key_is_ignored_with_the_fix_named(tmp_path, caplog):
    path = tmp_path / "old.toml"
    path.write_text('[daemon]\nserver = "native"\nworkers = 2\n')
    with caplog.at_level("WARNING"):
        config = load_config(path, environ={})
    assert config.daemon.workers == 2
    assert "[daemon] server is obsolete" in caplog.text and "delete the line" in caplog.text


def test_config_keys_removed_in_the_serving_core_split_do_not_stop_an_upgraded_daemon(tmp_path, caplog):
    """The example config set cpu_affinity: an upgraded site keeps its file and its daemon."""
    path = tmp_path / "old.toml"
    path.write_text('[daemon]\ncpu_affinity = "auto"\n[policy]\nset_time_limit_when_absent = false\n'
                    'set_time_min_when_given = true\nrisk = 0.05\n')
    with caplog.at_level("WARNING"):
        config = load_config(path, environ={})
    assert config.policy.risk == 0.05
    for key in ("cpu_affinity", "set_time_limit_when_absent", "set_time_min_when_given"):
        assert f"{key} is obsolete" in caplog.text


def test_config_unreadable_file_says_permission_denied(tmp_path):
    """The CLI as an ordinary user (nobody) on a site file it may not read: one line naming
    the cause, not a traceback."""
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root to run the CLI as another user")
    tmp_path.chmod(0o755)
    path = tmp_path / "hpcpredict.toml"
    path.write_text("[daemon]\n")
    path.chmod(0o600)
    cli = os.path.join(os.path.dirname(sys.executable), "hpcpredict")
    done = subprocess.run(["runuser", "-u", "nobody", "--", "env", f"HPCPREDICT_CONFIG_PATH={path}", cli, "status"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == f"hpcpredict: {path}: permission denied (readable by the daemon's group; " \
                                  "name another file with --config or $HPCPREDICT_CONFIG)"


@pytest.mark.parametrize("flag", ["--socket", "--local-socket"])
def test_one_flag_name_means_one_socket_in_both_programs(flag):
    """`hpcpredict --socket` and `hpcpredictd --socket` are both the local socket; gRPC's is
    `hpcpredictd --grpc-socket`, a name the CLI does not take."""
    assert build_parser().parse_args([flag, "/l.sock", "status"]).socket == "/l.sock"
    daemon_args = server.build_parser().parse_args([flag, "/l.sock", "--grpc-socket", "/g.sock"])
    assert (daemon_args.local_socket, daemon_args.grpc_socket) == ("/l.sock", "/g.sock")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--grpc-socket", "/g.sock", "status"])
