"""Choosing the accounting source of `hpcpredict refresh`: pyslurm only when it imports and
matches the site's Slurm release, else `sacct --json`, with the reason reported.

This machine runs Debian's Slurm 22.05, for which there is no pyslurm (PyPI has 25.11 only,
Debian ships none), so the real path here is "pyslurm missing -> sacct --json": these tests run
the real `sacct --version`, the real import, and the real `hpcpredict refresh` falling back to
(or refusing) a source. The pyslurm-present branches are checked on version texts, which is all
the choice reads."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.errors import ConfigError
from hpcpredict.daemon.lab.history.accounting import choose_source, import_pyslurm, pyslurm_release, slurm_release

DUMP = Path(__file__).resolve().parents[1] / "data" / "slurm" / "sacct_22.05_jobs.json"
PYSLURM_INSTALLED = importlib.util.find_spec("pyslurm") is not None


@pytest.mark.parametrize("setting, slurm, pyslurm, name, reason", [
    ("auto", "slurm 25.11.1", "25.11.2", "pyslurm", "matches the site's Slurm 25.11"),
    ("auto", "slurm-wlm 24.05.4", "24.5.1", "pyslurm", "matches the site's Slurm 24.05"),
    ("auto", "slurm-wlm 22.05.8", "25.11.2", "sacct", "built for Slurm 25.11, the site runs Slurm 22.05"),
    ("auto", "slurm 24.11.0", "24.5.1", "sacct", "built for Slurm 24.05, the site runs Slurm 24.11"),
    ("auto", "slurm-wlm 22.05.8", None, "sacct", "pyslurm is not installed"),
    ("auto", None, "25.11.2", "sacct", "the site's Slurm release is unknown"),
    ("auto", "sacct: fatal: Could not establish a configuration source", "25.11.2", "sacct", "release is unknown"),
    ("auto", "slurm 25.11.1", "dev", "sacct", "names no Slurm release"),
    ("sacct", "slurm 25.11.1", "25.11.2", "sacct", "[accounting] source = sacct"),
    ("pyslurm", "slurm 25.11.1", "25.11.2", "pyslurm", "matches"),
])
def test_choice_and_reason(setting, slurm, pyslurm, name, reason):
    choice = choose_source(setting, slurm_version=slurm, pyslurm_version=pyslurm)
    assert choice.name == name and reason in choice.reason


@pytest.mark.parametrize("slurm, pyslurm, error, reason", [
    ("slurm-wlm 22.05.8", None, "pyslurm is not installed", "pyslurm is not installed"),
    ("slurm-wlm 22.05.8", "25.11.2", "", "built for Slurm 25.11, the site runs Slurm 22.05"),
    (None, "25.11.2", "", "release is unknown"),
])
def test_forced_pyslurm_that_cannot_be_used_is_an_error_naming_why(slurm, pyslurm, error, reason):
    with pytest.raises(ConfigError, match="source = pyslurm, but") as raised:
        choose_source("pyslurm", slurm_version=slurm, pyslurm_version=pyslurm, pyslurm_error=error)
    assert reason in str(raised.value)


def test_unknown_setting_is_a_config_error():
    with pytest.raises(ConfigError, match="auto|sacct|pyslurm"):
        choose_source("slurmrestd", slurm_version=None, pyslurm_version=None)
    with pytest.raises(ConfigError, match=r"\[accounting\] source"):
        load_config(None, environ={"HPCPREDICT_DATA_DIR": "/tmp/x", "HPCPREDICT_CONFIG_PATH": "",
                                   "HPCPREDICT_ACCOUNTING_SOURCE": "slurmrestd"})


def test_config_key_from_a_file(tmp_path):
    path = tmp_path / "hpcpredict.toml"
    path.write_text('[accounting]\nsource = "sacct"\n')
    assert load_config(path, environ={"HPCPREDICT_DATA_DIR": str(tmp_path)}).accounting.source == "sacct"
    assert load_config(None, environ={"HPCPREDICT_DATA_DIR": str(tmp_path),
                                      "HPCPREDICT_CONFIG_PATH": ""}).accounting.source == "auto"


@pytest.fixture
def slurm_conf(tmp_path):
    """A minimal slurm.conf: sacct reads its config before it answers even --version."""
    assert shutil.which("sacct"), "sacct missing: install contrib/apt-packages.txt"
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=probe\nSlurmctldHost=localhost\nAccountingStorageType=accounting_storage/none\n")
    return conf


def test_the_installed_slurm_release_from_the_real_sacct(slurm_conf):
    done = subprocess.run(["sacct", "--version"], env={**os.environ, "SLURM_CONF": str(slurm_conf)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert slurm_release(done.stdout) == (22, 5)            # Debian 12's slurm-wlm 22.05.8
    choice = choose_source("auto", slurm_version=done.stdout, pyslurm_version="25.11.2")
    assert choice.name == "sacct" and "the site runs Slurm 22.05" in choice.reason
    assert pyslurm_release("25.11.2") != slurm_release(done.stdout)


@pytest.mark.skipif(PYSLURM_INSTALLED, reason="pyslurm is installed here; the test is of its absence")
def test_pyslurm_absent_here_is_reported_as_such():
    module, reason = import_pyslurm()
    assert module is None and reason == "pyslurm is not installed"


def cli(data_dir, slurm_conf, *args, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", *args], capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "HPCPREDICT_DATA_DIR": str(data_dir), "SLURM_CONF": str(slurm_conf),
                               **env})


@pytest.mark.skipif(PYSLURM_INSTALLED, reason="pyslurm is installed here; the test is of its absence")
@pytest.mark.parametrize("how", [("--source", "pyslurm"), ()])
def test_refresh_with_pyslurm_forced_but_missing_stops_before_reading(tmp_path, slurm_conf, how):
    done = cli(tmp_path, slurm_conf, "refresh", *how, HPCPREDICT_ACCOUNTING_SOURCE="pyslurm")
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("hpcpredict: [accounting] source = pyslurm, but pyslurm is not installed")
    assert not (tmp_path / "hpcpredict.sqlite").exists()     # nothing was read, nothing stored


@pytest.mark.skipif(PYSLURM_INSTALLED, reason="pyslurm is installed here; the test is of its absence")
def test_refresh_auto_falls_back_to_the_real_sacct(tmp_path, slurm_conf):
    """auto, no pyslurm: the real `sacct --json` runs (and, accounting being disabled in this
    slurm.conf, fails with sacct's own message, which proves it was the one called)."""
    done = cli(tmp_path, slurm_conf, "-v", "refresh", "--json")
    assert done.returncode == 1
    assert "accounting source: sacct (pyslurm is not installed)" in done.stderr
    assert "command failed: sacct --json -a" in done.stderr and "accounting storage is disabled" in done.stderr
    assert "Traceback" not in done.stderr


def test_refresh_forced_sacct_does_not_import_pyslurm(tmp_path, slurm_conf):
    done = cli(tmp_path, slurm_conf, "-v", "refresh", "--source", "sacct", "--json")
    assert done.returncode == 1 and "command failed: sacct --json" in done.stderr
    assert "pyslurm" not in done.stderr


def test_refresh_from_a_dump_chooses_no_source(tmp_path, slurm_conf):
    """A saved dump is read as it is, whatever [accounting] source says."""
    done = cli(tmp_path, slurm_conf, "refresh", "--sacct-json", str(DUMP), "--no-reload", "--json",
               HPCPREDICT_ACCOUNTING_SOURCE="pyslurm")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["finished_jobs"] == 3 and "accounting" not in result
