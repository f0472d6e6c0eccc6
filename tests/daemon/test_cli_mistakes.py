"""An admin's or a user's mistake is one clear line, never a traceback (issue #40, finding 7).

Real CLI processes on a real store (the HPC2N subset: 17 users), a real daemon where a command
reloads one."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.daemonproc import DaemonProcess

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "hpc2n-subset.swf"


def cli(data_dir, *args, cwd=None, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(data_dir),
                               **env})


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hpcpredict: "), done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    data = tmp_path_factory.mktemp("mistakes")
    for step in (("ingest", str(TRACE), "--no-reload"), ("train", "--no-reload")):
        done = cli(data, *step)
        assert done.returncode == 0, done.stderr
    return data


@pytest.mark.parametrize("name, said", [
    ("report.xyz", "the extension names the format, one of"),
    ("no-extension", "the extension names the format, one of"),
    ("missing-folder/report.png", "no folder missing-folder"),
])
def test_report_plot_to_a_path_it_cannot_write(trained, tmp_path, name, said):
    line = one_line_error(cli(trained, "report", "--plot", name, cwd=tmp_path))
    assert f"--plot {name}: {said}" in line
    assert not list(tmp_path.iterdir())


def test_report_plot_says_how_many_of_how_many_it_shows(trained, tmp_path):
    done = cli(trained, "report", "--plot", "report.svg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "plot written to report.svg (the 15 users with the most processor-hours requested, of 17)" in done.stdout
    assert "the 15 users with the most processor-hours requested, of 17" in (tmp_path / "report.svg").read_text()
    done = cli(trained, "report", "--user", "1", "--plot", "one.png", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "plot written to one.png (all 1 user)" in done.stdout


def test_publish_of_a_folder_that_is_no_model(trained, tmp_path):
    (tmp_path / "notes.txt").write_text("not a model\n")
    line = one_line_error(cli(trained, "publish", "walltime", str(tmp_path), "--no-reload"))
    assert f"refusing to publish walltime model from {tmp_path}" in line and ".tmp-" not in line
    assert "a model folder is what `hpcpredict train` or `train-runtime` wrote" in line
    assert "no such model folder" in one_line_error(cli(trained, "publish", "walltime", str(tmp_path / "gone"),
                                                         "--no-reload"))


def test_republishing_a_pruned_version_says_what_to_do(trained):
    home = trained / "models" / "walltime" / "_site"
    [kept] = [p.name for p in home.iterdir() if p.is_dir()]
    pruned = home / "20251120T030001123456Z-1a2b3c"        # ADMIN.md's example, long removed
    line = one_line_error(cli(trained, "publish", "walltime", str(pruned), "--no-reload"))
    assert "no such version: it is not among the walltime model _site versions kept (1:" in line
    assert "hpcpredict rollback walltime VERSION" in line and "cp -a" in line
    done = cli(trained, "publish", "walltime", str(home / kept), "--no-reload")    # a kept one: published again
    assert done.returncode == 0, done.stderr


def test_publish_and_rollback_say_which_version_the_daemon_serves(trained, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(trained, data)
    with DaemonProcess(data) as daemon:
        home = data / "models" / "walltime" / "_site"
        before = {p.name for p in home.iterdir() if p.is_dir()}
        serving = (home / "CURRENT").read_text().strip()
        done = cli(data, "--socket", daemon.hook_socket, "publish", "walltime", str(home / serving))
        assert done.returncode == 0, done.stderr
        [newer] = {p.name for p in home.iterdir() if p.is_dir()} - before
        assert f"daemon reloaded: it serves walltime model _site version {newer}" in done.stderr
        done = cli(data, "--socket", daemon.hook_socket, "rollback", "walltime")
        assert done.returncode == 0, done.stderr
        assert f"daemon reloaded: it serves walltime model _site version {serving}" in done.stderr
        assert "new history" not in done.stderr


@pytest.mark.parametrize("command", [["status"], ["reload"]])
def test_admin_command_on_a_host_that_reaches_the_daemon_remotely(tmp_path, command):
    """A login node: [client] remote set, no local socket. What is wrong is the host."""
    config = tmp_path / "login.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n[client]\nremote = "controller.example:946"\n')
    line = one_line_error(cli(tmp_path / "data", "--config", str(config), *command,
                              HPCPREDICT_CONFIG_PATH=str(config), HPCPREDICT_DATA_DIR=""))
    assert f"{command[0]} is an admin command: it runs on the daemon's host (the controller), not here" in line
    assert "[client] remote = controller.example:946" in line and "hook.sock" not in line
