"""Keeps every test (and every daemon or CLI it starts) off the machine's own configuration:
a site file in /etc/hpcpredict or a user file under ~/.config would otherwise change what the
tests run against. Tests that exercise the search list set HPCPREDICT_CONFIG_PATH themselves."""
import os

os.environ["HPCPREDICT_CONFIG_PATH"] = ""
