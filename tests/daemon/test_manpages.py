"""The man pages are written from the parsers (daemon/cli/manpages.py, argparse-manpage): every
command, sub-command and option `--help` has is in them, so they cannot drift from it."""
from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from hpcpredict.daemon.cli.manpages import parsers, write_pages


def options_and_commands(parser: argparse.ArgumentParser, prefix: str = ""):
    """(sub-command path, option) of ``parser`` and of every sub-command's parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix}{name}", ""
                yield from options_and_commands(sub, f"{prefix}{name} ")
        elif action.option_strings and action.help != argparse.SUPPRESS and \
                not isinstance(action, argparse._HelpAction):      # argparse-manpage leaves --help out
            yield prefix.strip(), max(action.option_strings, key=len)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("man")
    done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.manpages", str(folder)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {path.stem: path.read_text() for path in folder.glob("*.1")}


def roff(text: str) -> str:
    return text.replace("-", "\\-")


@pytest.mark.parametrize("command", ["hpcpredict", "hpcpredictd"])
def test_every_sub_command_and_option_is_in_the_page(pages, command):
    page = pages[command]
    assert page.startswith(f'.TH {command.upper()} "1"'), page[:200]
    wanted = list(options_and_commands(parsers()[command]))
    assert len(wanted) > (100 if command == "hpcpredict" else 3)
    missing = [(path, option) for path, option in wanted
               if (option and roff(option) not in page) or (not option and roff(path.split()[-1]) not in page)]
    assert not missing, missing[:10]


def test_a_page_reads_as_a_manual(pages, tmp_path):
    """man(1) formats it: the NAME line and a sub-command's own option."""
    path = tmp_path / "hpcpredict.1"
    path.write_text(pages["hpcpredict"])
    shown = subprocess.run(["man", "-l", str(path)], capture_output=True, text=True, timeout=60,
                           env={"MANWIDTH": "120", "PATH": "/usr/bin:/bin", "MAN_KEEP_FORMATTING": ""}).stdout
    assert "hpcpredict - Runtime, walltime and communication-time prediction for Slurm jobs" in shown, shown[:500]
    assert "hpcpredict predict" in shown and "print the Estimate as JSON" in shown


def test_write_pages_writes_both(tmp_path):
    written = write_pages(tmp_path / "man1")
    assert sorted(p.name for p in written) == ["hpcpredict.1", "hpcpredictd.1"]
