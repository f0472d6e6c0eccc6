"""Where the data directory is when nothing names it and HOME is unset (a daemon started by an
init script): the home directory from the password database, never a shared /tmp."""
from __future__ import annotations

import os
import pwd
import subprocess
import sys

import pytest

from hpcpredict.daemon.config import load_config

PROBE = ("from hpcpredict.daemon.config import load_config\n"
         "from hpcpredict.daemon.errors import ConfigError\n"
         "try:\n    print(load_config(None, environ={'HPCPREDICT_CONFIG_PATH': ''}).data_dir)\n"
         "except ConfigError as error:\n    print('error:', error)\n")


def test_without_home_the_password_database_home():
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": ""})
    assert config.data_dir == os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".local", "share", "hpcpredict")


def test_a_user_without_any_home_is_told_to_name_one():
    if os.geteuid() != 0:
        pytest.skip("runs the probe as the user nobody: needs root")
    nobody = pwd.getpwnam("nobody")
    assert not os.path.isdir(nobody.pw_dir)           # /nonexistent
    done = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups",
                           sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, cwd="/",
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.startswith("error: no data directory") and "/tmp" not in done.stdout, done.stdout + done.stderr
