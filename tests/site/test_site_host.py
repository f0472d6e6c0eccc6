"""The test suite on a host where hpcpredict is installed (issue 39, finding 8): the daemon tests
must pass whatever the host's /etc/hpcpredict/hpcpredict.toml and ~/.config say.

The host is made in a sandbox (tests/site/sandbox.py: a private mount and pid namespace whose
/etc, /run, /var/lib... are overlays, so the real host is never touched): what
contrib/install-site.sh and the systemd unit leave there — the ``hpcpredict`` user, its
/var/lib/hpcpredict (0750) and /run/hpcpredict (0755), the config file installed from
contrib/site/hpcpredict.toml.example — and a user file under ``$HOME/.config`` that no daemon
could start with. A check first proves the host bites (a config read from those files fails),
then the suite's own daemon tests and fixtures run there in a pytest of their own. Before the
fix, 14 of them failed and 23 errored on such a host (``refusing to use /run/hpcpredict``).

Needs root (namespaces, useradd inside the overlay)."""
from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from . import sandbox

REPO = Path(__file__).resolve().parents[2]
# The tests that build daemons and configs (in-process and as subprocesses), and the shared fixtures.
SUITE = ("tests/daemon/test_policy_mode.py", "tests/daemon/test_service.py", "tests/daemon/test_outcome_ownership.py",
         "tests/daemon/test_runtime_features_relay.py", "tests/daemon/test_policy_scope.py",
         "tests/daemon/test_local_socket.py", "tests/daemon/test_foundation_units.py", "tests/daemon/test_lookups.py",
         "tests/daemon/test_models_in_daemon.py", "tests/robustness/test_bounds.py", "tests/walltime/test_advice.py")

SITE_HOST = r"""
set -eu
useradd --system --user-group --no-create-home --shell /usr/sbin/nologin hpcpredict
install -d -m 755 /etc/hpcpredict
install -d -o hpcpredict -g hpcpredict -m 0755 /run/hpcpredict
install -d -o hpcpredict -g hpcpredict -m 0750 /var/lib/hpcpredict
sed -e 's#^data_dir = .*#data_dir = "/var/lib/hpcpredict"#' contrib/site/hpcpredict.toml.example \
  > /etc/hpcpredict/hpcpredict.toml
install -d -m 755 "$HOME/.config/hpcpredict"
printf '[daemon]\nworkers = 0\n' > "$HOME/.config/hpcpredict/hpcpredict.toml"
# the host bites: a config read from its files is refused
if env -u HPCPREDICT_CONFIG_PATH -u HPCPREDICT_CONFIG "$PYTHON" -c \
    'from hpcpredict.daemon.config import load_config; load_config()' 2>/dev/null; then
  echo "site host: a config read from the host's files was accepted" >&2; exit 5
fi
exec "$@"
"""


@pytest.fixture
def site_host_tools():
    if os.geteuid() != 0:
        pytest.skip("makes a host with a site install in a mount namespace: needs root")
    for program in ("unshare", "useradd", "mount"):
        if not shutil.which(program):
            pytest.skip(f"{program} missing")


def test_the_daemon_tests_pass_on_a_host_with_a_site_install(site_host_tools):
    # a short base: the inner tests' socket paths must stay under AF_UNIX's 107 characters
    base = Path(tempfile.mkdtemp(prefix="hpd-sh-", dir="/tmp"))
    before = os.path.lexists("/etc/hpcpredict/hpcpredict.toml"), os.path.lexists("/run/hpcpredict")
    env = dict(os.environ, PYTHON=sys.executable, HOME="/var/lib/hpcpredict-site-host-home")
    env.pop("HPCPREDICT_CONFIG_PATH", None)      # the suite's own conftest must set what it needs
    done = sandbox.run(["sh", "-c", SITE_HOST, "site-host", sys.executable, "-m", "pytest", "-q", "-p",
                        "no:cacheprovider", "--basetemp", str(base), *SUITE], env=env, timeout=1800)
    shutil.rmtree(base, ignore_errors=True)
    output = f"--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-3000:]}"
    assert done.returncode == 0, output
    assert re.search(r"\b\d+ passed", done.stdout) and not re.search(r"\b(failed|error)", done.stdout), output
    # the real host was left alone
    assert (os.path.lexists("/etc/hpcpredict/hpcpredict.toml"), os.path.lexists("/run/hpcpredict")) == before
