"""`hpcpredict predict` says what sbatch will do: a word that is no sbatch option is named (stderr
and --json `warnings`), and the partitions/default accounts the daemon read fill what a request
leaves empty. The real Slurm side (22.05.8's own output, the sbatch line beside predict's) is
tests/slurm/test_predict_as_sbatch.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from hpcpredict.daemon.config import PolicyConfig
from hpcpredict.daemon.errors import CommandError
from hpcpredict.daemon.policy.slurm_defaults import SlurmDefaultsCache, commands_beside

SCRIPT = "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --qwerty\nsrun ./a.out\n"


def predict(daemon, script, *args):
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "--socket", daemon.hook_socket,
                           "predict", str(script), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HPCPREDICT_CONFIG_PATH": ""})


def test_words_that_are_no_sbatch_option_are_named(daemon, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT)
    done = predict(daemon, script, "-t", "1:00:00", "--mem=4G", "-o", "out.txt", "--tme=2:00:00")
    assert done.returncode == 0, done.stderr
    assert "warning: --qwerty is not an sbatch option: ignored (predicted without it)" in done.stderr
    assert "warning: --tme=2:00:00 is not an sbatch option" in done.stderr
    assert "--mem" not in done.stderr and "-o" not in done.stderr       # sbatch's own, not read: silent
    assert "Predicted runtime:" in done.stdout
    done = predict(daemon, script, "--json", "--tme=2:00:00")
    answer = json.loads(done.stdout)
    assert answer["warnings"] == ["--qwerty is not an sbatch option: ignored (predicted without it)",
                                  "--tme=2:00:00 is not an sbatch option: ignored (predicted without it)"]
    assert "runtime_s" in answer and "suggested_time_limit_s" in answer       # the Estimate's keys kept
    clean = tmp_path / "clean.sh"
    clean.write_text("#!/bin/bash\n#SBATCH -N 2\nsrun ./a.out\n")
    assert json.loads(predict(daemon, clean, "--json").stdout)["warnings"] == []


def test_the_commands_read_beside_the_controllers():
    assert commands_beside(["scontrol", "-M", "c1", "show", "config"]) == (
        ["scontrol", "-M", "c1", "-o", "show", "partition"],
        ["sacctmgr", "-M", "c1", "-nP", "show", "user", "format=User,DefaultAccount"])
    assert commands_beside(["cat", "/tmp/show_config.txt"]) is None


def test_a_failed_read_keeps_what_was_read():
    """sacctmgr failing (slurmdbd down) keeps the accounts read before; the partitions are re-read."""
    outputs = {"scontrol": ["PartitionName=a Default=YES MaxTime=01:00:00\n", "PartitionName=b Default=YES\n"],
               "sacctmgr": ["ann|phys\n", CommandError(["sacctmgr"], 1, stderr="slurmdbd down")]}

    def run(command, timeout):
        value = outputs[command[0]].pop(0)
        if isinstance(value, Exception):
            raise value
        return value

    cache = SlurmDefaultsCache(PolicyConfig(), run=run)
    cache.refresh()
    assert cache.current().complete(user="ann", account="", partition="") == ("phys", "a", 3600, 0)
    cache.refresh()
    assert cache.current().complete(user="ann", account="", partition="") == ("phys", "b", 0, 0)
