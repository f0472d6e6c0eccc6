"""Upgrade and downgrade on one /etc/hpcpredict and one data directory, as ADMIN.md says.

Real wheels (`pip wheel` of a clean clone of this commit and of PREVIOUS, the last commit before
the downgrade work of #40), each installed in its own venv, real daemons on real Unix sockets,
the config install-site.sh writes (contrib/site/hpcpredict.toml.example, paths moved to a tmp
directory), a controller that answers with a real 22.05.8 `scontrol show config` (it has the
word time_min_as_soft_limit, which 22.05 accepts and ignores: a --time-min is a kill limit there).

What it proves:

1. downgrade: this release ingests and trains (its model, its config), then PREVIOUS serves the
   same config and data, after ADMIN.md's step `[policy] mode = "advise"`: it answers and sets
   no limit. Without that step PREVIOUS reads the word, not the release, and would set a
   --time-min (a kill limit on 22.05): that is why the step is in the procedure.
2. the other way, for the releases to come: this release starts on a config written for a newer
   one (unknown sections and keys) and a model of a newer format as the serving version; it
   names both as faults, serves the older version it reads, and sets no limit (an unknown
   [policy] key leaves limits as submitted).

PREVIOUS itself cannot be made to read a newer config (it refuses unknown keys): a downgrade to
a release before this change works only with a config holding no key it does not know.

The venvs get the test environment's dependencies through a .pth line (not its own hpcpredict:
that venv's .pth files are not read), so no package index is needed; the wheels are real.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PREVIOUS = "f67592017f22ced0bd71ffca313d05f06fdeff66"
KTH = REPO / "tests" / "data" / "traces" / "KTH-SP2.swf"
SHOW_CONFIG = REPO / "tests" / "data" / "slurm" / "show_config_22.05.8.txt"
JOB = REPO / "contrib" / "examples" / "kth-user91-job.sh"


def run(*args, check=True, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, **kwargs)
    if check:
        assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def has_commit(commit: str) -> bool:
    return run("git", "-C", REPO, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0


def install(tmp: Path, name: str, commit: str) -> Path:
    """A venv with the wheel built from a clean clone of ``commit``; its bin folder."""
    tree = tmp / f"src-{name}"
    run("git", "clone", "-q", "--no-hardlinks", "--no-checkout", REPO, tree)
    run("git", "-C", tree, "checkout", "-q", commit)
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp / f"wheel-{name}", tree)
    [wheel] = (tmp / f"wheel-{name}").glob("hpcpredict-*.whl")
    venv = tmp / f"venv-{name}"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    purelib = Path(run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
                   .stdout.strip())
    (purelib / "test-deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-deps", wheel)
    where = run(venv / "bin" / "python", "-c", "import hpcpredict.daemon as d; print(d.__file__)", cwd=tmp).stdout
    assert where.startswith(str(venv)), where
    return venv / "bin"


def site_config(tmp: Path, extra: str = "", mode: str | None = None) -> Path:
    """install-site.sh's config (the example with data_dir set), its paths and users moved here."""
    text = (REPO / "contrib" / "site" / "hpcpredict.toml.example").read_text()
    me = getpass.getuser()
    text = text.replace('data_dir = "/var/lib/hpcpredict"', f'data_dir = "{tmp}/data"')
    text = text.replace("/run/hpcpredict/", f"{tmp}/run/")
    text = text.replace('slurm_user = "slurm"', f'slurm_user = "{me}"')
    text = text.replace('admin_users = ["root", "hpcpredict"]', f'admin_users = ["{me}"]')
    text = text.replace('controller_config_command = "scontrol show config"',
                        f'controller_config_command = "cat {SHOW_CONFIG}"')
    if mode is not None:
        text = text.replace('mode = "auto"', f'mode = "{mode}"')
    assert f"{tmp}/data" in text and "cat " in text and (mode is None or f'mode = "{mode}"' in text)
    path = tmp / "etc" / "hpcpredict.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text + extra)
    (tmp / "run").mkdir(exist_ok=True)
    return path


def environment(tmp: Path, config: Path) -> dict:
    return {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "HPCPREDICT_CONFIG": str(config),
            "HPCPREDICT_DAEMON_METRICS": ""}


class Daemon:
    def __init__(self, bin_dir: Path, tmp: Path, config: Path, name: str):
        self.bin, self.env, self.tmp = bin_dir, environment(tmp, config), tmp
        info = tmp / "data" / "hpcpredictd.json"
        info.unlink(missing_ok=True)
        self.log = tmp / f"daemon-{name}.log"
        self.process = subprocess.Popen([bin_dir / "hpcpredictd"], env=self.env, cwd=tmp,
                                        stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while not info.exists():
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "hpcpredictd did not start in 90 s"
            time.sleep(0.2)

    def cli(self, *args) -> dict:
        return json.loads(run(self.bin / "hpcpredict", *args, "--json", env=self.env, cwd=self.tmp).stdout)

    def predict(self, hours: int) -> dict:
        return self.cli("predict", JOB, "--user", "91", "-t", f"{hours}:00:00")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


def assert_advises(estimate: dict) -> None:
    """What a site in advise mode gets: an answer, and no limit set."""
    assert estimate["runtime_s"] > 0 and estimate["suggested_time_limit_s"] >= 300, estimate
    assert estimate.get("policy_mode") == "advise", estimate
    assert not estimate.get("apply_time_limit_s") and not estimate.get("apply_time_min_s"), estimate


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    if not has_commit(PREVIOUS):
        pytest.skip(f"this clone lacks {PREVIOUS[:12]} (shallow): the previous release cannot be built")
    tmp = tmp_path_factory.mktemp("downgrade")
    return tmp, install(tmp, "current", "HEAD"), install(tmp, "previous", PREVIOUS)


def test_downgrade_to_the_previous_release_serves_and_sets_no_limit(installs):
    tmp, current, previous = installs
    config = site_config(tmp)
    env = environment(tmp, config)
    run(current / "hpcpredict", "ingest", KTH, env=env, cwd=tmp)
    run(current / "hpcpredict", "train", "--no-reload", env=env, cwd=tmp)
    daemon = Daemon(current, tmp, config, "current")
    try:
        assert_advises(daemon.predict(48))          # auto on 22.05 (the word ignored there): advise
        status = daemon.cli("status")
        assert status["build"]["commit"].startswith(run("git", "-C", REPO, "rev-parse", "HEAD").stdout.strip())
        assert "config" not in " ".join(status.get("faults", [])), status["faults"]
    finally:
        daemon.stop()

    # Without ADMIN.md's step, PREVIOUS reads the word and not the release: a --time-min on 22.05.
    daemon = Daemon(previous, tmp, config, "previous-auto")
    try:
        unsafe = daemon.predict(48)
        assert unsafe.get("policy_mode") == "soft" and unsafe.get("apply_time_min_s"), unsafe
    finally:
        daemon.stop()

    # ADMIN.md's downgrade procedure: mode = "advise" first (both releases read it), then PREVIOUS.
    config = site_config(tmp, mode="advise")
    daemon = Daemon(previous, tmp, config, "previous")
    try:
        estimate = daemon.predict(48)
        assert_advises(estimate)
        assert not estimate.get("fallback"), estimate     # it loaded this release's walltime model
        assert "walltime" in estimate["model_name"] or estimate["model_name"] == "recent-history", estimate
        models = daemon.cli("status")["models"]
        assert any(model["kind"] == "walltime" and not model.get("bundled") for model in models), models
    finally:
        daemon.stop()


def newer_model(published: Path, target: Path) -> None:
    """A copy of a published walltime version as a newer release would write it: format 6 and a
    parameter this release does not know, checksums made right (so only the format refuses it)."""
    shutil.copytree(published, target)
    model = target / "model"
    state = json.loads((model / "state.json").read_text())
    state["params"]["a_newer_parameter"] = 1.0
    payload = json.dumps(state).encode()
    (model / "state.json").write_bytes(payload)
    manifest = json.loads((model / "manifest.json").read_text())
    manifest.update(format_version=6, sha256=hashlib.sha256(payload).hexdigest())
    (model / "manifest.json").write_text(json.dumps(manifest))
    artifact = json.loads((target / "artifact.json").read_text())
    artifact["version"] = target.name
    for name in artifact["files"]:
        artifact["files"][name] = hashlib.sha256((target / name).read_bytes()).hexdigest()
    (target / "artifact.json").write_text(json.dumps(artifact))


def test_this_release_serves_a_newer_releases_config_and_model(installs):
    tmp, current, _ = installs
    tmp = tmp / "newer"
    tmp.mkdir()
    # mode bound: what the unknown [policy] key must override (bound would answer "bound" here)
    config = site_config(tmp, extra="\n[future_section]\nknob = 1\n", mode="bound")
    # keys of a newer release in the sections the file has: one may narrow where limits are set
    text = config.read_text().replace("[policy]\n", '[policy]\nfuture_scope = ["short"]\n', 1)
    config.write_text(text.replace("[daemon]\n", '[daemon]\nfuture_listener = "x"\n', 1))
    env = environment(tmp, config)
    run(current / "hpcpredict", "ingest", KTH, env=env, cwd=tmp)
    run(current / "hpcpredict", "train", "--no-reload", env=env, cwd=tmp)
    home = tmp / "data" / "models" / "walltime" / "_site"
    [trained] = [p for p in home.iterdir() if p.is_dir()]
    newer_model(trained, home / "29991231T000000000000Z-future")
    (home / "CURRENT").write_text("29991231T000000000000Z-future")
    daemon = Daemon(current, tmp, config, "newer")
    try:
        status = daemon.cli("status")
        faults = " ".join(status.get("faults", []))
        for named in ("[future_section]", "future_scope", "future_listener",
                      "format 6 was written by a newer hpcpredict", f"serving version {trained.name} instead (kept)"):
            assert named in faults, (named, faults)
        assert "TypeError" not in faults
        [walltime] = [model for model in status["models"] if model["kind"] == "walltime"]
        assert walltime["version"] == trained.name
        estimate = daemon.predict(48)
        assert_advises(estimate)                 # an unknown [policy] key: no limit set, whatever the mode
        assert walltime["version"] in estimate["model_version"] or estimate["model_name"] == "recent-history"
    finally:
        daemon.stop()
    assert (home / "CURRENT").read_text() == "29991231T000000000000Z-future"   # the site's choice kept on disk
