"""Keeps every test (and every daemon or CLI it starts) off the machine's own configuration:
a site file in /etc/hpcpredict or a user file under ~/.config would otherwise change what the
tests run against (on a host with a site install, daemons the tests built took its
/run/hpcpredict sockets and refused them: issue 39, finding 8).

* the environment of the session, inherited by every subprocess (DaemonProcess passes it on):
  ``HPCPREDICT_CONFIG_PATH=""``, the search list emptied, so no file is read unless one is named;
* configs built in-process with an environment of their own (``load_config(None, environ=...)``)
  do not see that variable: for them the site file is moved to a path that cannot exist, and
  the tests' environments name ``HPCPREDICT_CONFIG_PATH`` too.

Tests that exercise the search list set HPCPREDICT_CONFIG_PATH themselves.
tests/site/test_site_host.py runs the daemon tests on a host with a site install to prove it."""
import os

from hpcpredict.daemon import config as _config

os.environ["HPCPREDICT_CONFIG_PATH"] = ""
_config.SITE_CONFIG = "/nonexistent/hpcpredict-tests/hpcpredict.toml"
