"""Batch scripts built to cost the daemon's script reader as much as possible within the Slurm
hook's cut (64 KiB, slurm_plugin/job_submit.lua): heredocs full of ``${A}$(( ))`` and
backquotes, thousands of directives, long quoted exports, launcher-looking lines. Shared by
tests/robustness/test_script_budget.py (counts work) and benchmarks/areas/hostile_scripts.py
(times it, before/after)."""
from __future__ import annotations

HOOK_CUT = 64 * 1024


def _fill(line: str, head: str = "#!/bin/bash\n") -> bytes:
    """``head`` then ``line`` repeated up to the hook's cut."""
    count = (HOOK_CUT - len(head)) // len(line)
    return (head + line * count).encode()


HOSTILE_SCRIPTS: dict[str, bytes] = {
    "heredoc_expansions": _fill("${A}$(( 1 + 2 ))`echo x` ${B} $((3*4)) `date` \"$X\" 'y'\n",
                                head="#!/bin/bash\ncat <<EOF\n"),
    "directives_short": _fill("#HPCPREDICT a='${A}' b=\"`x`\"\n"),
    "directives_quoted": _fill("#HPCPREDICT " + " ".join(f"k{i}='v {i}'" for i in range(300)) + "\n"),
    "exports_quoted": _fill("export " + " ".join(f"V{i}=\"${{A}}$((1))\"" for i in range(200)) + "\n"),
    "launcher_lines": _fill("srun_x \"${A}$(( ))\" `b` ; srun\n"),
}

PLAIN_SCRIPT = b"#!/bin/bash\n#SBATCH -N 2\n#HPCPREDICT mesh=fine\nmodule load lammps\nexport OMP_NUM_THREADS=4\n" \
               b"srun ./solver --size=400 -t 10 in.deck\n"


def variant(script: bytes, index: int) -> bytes:
    """The same cost under another digest (the daemon caches parses by digest): the last line
    replaced by a comment naming ``index``."""
    return script[:script.rstrip(b"\n").rfind(b"\n") + 1] + b"# %d\n" % index
