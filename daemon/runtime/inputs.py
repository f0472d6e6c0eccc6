"""Application key and inputs of a job, read from its batch script (pure, bounded, never raises).

What is read, in increasing precedence (a later source overrides an earlier key):

* ``export K=V`` lines (several assignments per line allowed) → ``K``;
* the launch line — the first ``srun`` / ``mpirun`` / ``mpiexec`` line, or the first command
  line when there is no launcher — its executable's basename is the application key (for an
  interpreter such as ``python3 run.py`` the script's basename), and its arguments:
  ``--key=value``, ``--key value``, ``-k value`` → ``key`` / ``k``; a lone ``--flag`` → True;
  ``-var NAME VALUE`` (LAMMPS) → ``NAME``;
  positional arguments → ``arg1``, ``arg2``...; ``$VAR`` / ``${VAR}`` are expanded from the
  exports and ``environment``;
* ``#HPCPREDICT key=value`` directives (``app=NAME`` sets the application key);
* with a ``deck_reader`` only: scalar ``key = value`` lines of input decks named on the launch
  line (``-in FILE``, ``--input=FILE``, ``< FILE`` or a positional file name).

Numbers are floats, ``yes/no/true/false/on/off`` booleans, the rest strings. Whatever cannot be
understood is skipped and named in ``warnings``. Everything is bounded (script bytes, lines,
line length, arguments, deck size) and no regular expression can backtrack.

>>> job = extract_inputs('''#!/bin/bash
... #SBATCH -N 2
... export OMP_NUM_THREADS=4
... #HPCPREDICT mesh=fine
... srun --mpi=pmix ./solver --size=400 --verbose -t 10 in.deck 2>err.log
... ''')
>>> job.application, job.launcher
('solver', 'srun')
>>> sorted(job.inputs.items())
[('OMP_NUM_THREADS', 4.0), ('arg1', 'in.deck'), ('mesh', 'fine'), ('size', 400.0), ('t', 10.0), ('verbose', True)]
"""
from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass
from typing import Callable, Mapping

from .values import MAX_VALUE_CHARS, Value, coerce_value, normalise_key, valid_key

logger = logging.getLogger(__name__)

LAUNCHERS = ("srun", "mpirun", "mpiexec")
DIRECTIVE = "#HPCPREDICT"
MAX_LINES = 20_000
MAX_LINE_CHARS = 4_096
# What reading one script may cost, in work units of 0.5-1 µs each (benchmarks/README.md, "Hostile
# scripts"): a line read costs one, plus one per 64 characters; a line through shlex (pure Python)
# ten, plus one per character, as does a character through $VAR expansion; a character split by
# str.split 1/16. Past it the job is answered without the script's inputs, and told so: 64 KiB of
# heredoc lines full of quotes and `$(( ))` (the Slurm hook's cut) cost 40-55 ms before, inside
# slurmctld's job write lock. A script of a few hundred lines costs a few hundred units.
# Counted, not timed: deterministic.
MAX_PARSE_WORK = 4_000
MAX_DIRECTIVE_LINES = 1_000
MAX_EXPORT_LINES = 1_000
MAX_ARGUMENTS = 512
MAX_INPUTS = 1024
MAX_DECKS = 4
MAX_DECK_BYTES = 256 * 1024
MAX_WARNINGS = 50

# Launcher options that take a separate value (`srun -n 4`, `mpirun --map-by core`); options
# not listed are flags unless written `--opt=value`; `--mca KEY VALUE` takes two.
_LAUNCHER_VALUE_OPTIONS = frozenset("""
-n -N -c -p -t -J -o -e -i -w -x -m -A -q -d -D -C -G -L -W -T -B -r
--ntasks --nodes --cpus-per-task --partition --time --job-name --output --error --input
--nodelist --exclude --distribution --account --qos --dependency --chdir --constraint --gpus
--licenses --wait --threads --extra-node-info --relative --mem --mem-per-cpu --cpu-bind
--ntasks-per-node --mpi --export --het-group --reservation --gres --switches --cores-per-socket
-np --np --host -H --hostfile -hostfile -machinefile --machinefile --map-by -map-by --bind-to
-bind-to --rank-by -rank-by -wdir --wdir -ppn --npernode -npernode -f -hosts --prefix -env
-genvlist -envlist --rankfile -rf
""".split())
_LAUNCHER_TWO_VALUE_OPTIONS = frozenset({"--mca", "-mca", "-genv", "-env", "--gmca", "-gmca"})
# Words that start a setup line rather than the application's (skipped when no launcher).
_SETUP_COMMANDS = frozenset("""
export module ml source . cd set unset ulimit echo printf mkdir cp mv rm ln cat date hostname
sleep wait trap umask exit true false if then else elif fi for while do done case esac
declare local readonly env time exec command nice pwd test [ [[ spack conda srun_setup touch
""".split())
_PREFIX_WORDS = frozenset({"exec", "time", "command", "nice"})
_INTERPRETERS = frozenset({"python", "python2", "python3", "Rscript", "julia", "perl", "ruby",
                           "bash", "sh", "tclsh", "octave", "matlab"})
_SHELL_OPERATORS = frozenset({"|", "||", "&&", ";", "&", ";;", "(", ")", ">", ">>", "2>",
                              "&>", "<<", "<<<", "|&"})
_NAME_VALUE_OPTIONS = frozenset({"-var", "--var"})
_DECK_OPTIONS = frozenset({"in", "i", "input", "inp", "deck", "input_file", "infile", "f", "file"})


@dataclass(frozen=True)
class JobInputs:
    application: str
    launcher: str
    inputs: dict[str, Value]
    warnings: tuple[str, ...]


class _Warnings(list):
    def add(self, message: str) -> None:
        if len(self) < MAX_WARNINGS:
            self.append(message[:200])


class ParseBudget:
    """Work units left for one script (MAX_PARSE_WORK); ``spent`` is what was used."""

    def __init__(self, units: int) -> None:
        self.units, self.spent = units, 0

    def spend(self, units: int) -> bool:
        """Charge ``units``; False once the budget is gone (the caller stops reading)."""
        self.spent += units
        return self.spent <= self.units


class _OutOfBudget(Exception):
    pass


def _decode(script: str | bytes, max_bytes: int, warnings: _Warnings) -> str:
    if isinstance(script, bytes):
        if len(script) > max_bytes:
            warnings.add(f"script longer than {max_bytes} bytes: rest ignored")
            script = script[:max_bytes]
        try:
            return script.decode("utf-8")
        except UnicodeDecodeError:
            warnings.add("script is not valid UTF-8: decoded with replacement characters")
            return script.decode("utf-8", errors="replace")
    if len(script) > max_bytes:
        warnings.add(f"script longer than {max_bytes} characters: rest ignored")
        script = script[:max_bytes]
    return script


def _logical_lines(text: str, warnings: _Warnings, budget: ParseBudget, only_directives: list[bool]):
    """Lines with backslash continuations joined, each cut to MAX_LINE_CHARS (1-based numbers).

    Lines are cut out one at a time (``str.splitlines`` of a 1 MiB script costs more than
    reading its first lines). Once the caller sets ``only_directives[0]`` (the launch line is
    read: only directives can still matter) the scan jumps from directive to directive with
    ``str.find``, 1 unit per KiB passed over."""
    pending: list[str] = []
    pending_len = 0
    start = number = pos = 0
    size = len(text)
    while pos < size:
        if only_directives[0] and not pending:
            hit = text.find(DIRECTIVE, pos)
            skip_to = size if hit < 0 else max(pos, text.rfind("\n", pos, hit) + 1)
            if not budget.spend((skip_to - pos) >> 10):
                raise _OutOfBudget
            number += text.count("\n", pos, skip_to)
            pos = skip_to
            if pos >= size:
                break
        end = text.find("\n", pos)
        end = size if end < 0 else end
        line = text[pos:end]
        if line.endswith("\r"):
            line = line[:-1]
        pos = end + 1
        number += 1
        if number > MAX_LINES:
            warnings.add(f"more than {MAX_LINES} lines: rest ignored")
            break
        if not pending:
            start = number
        if line.endswith("\\") and not line.lstrip().startswith("#"):
            if pending_len < MAX_LINE_CHARS:
                pending.append(line[:-1])
                pending_len += len(line)
            continue
        pending.append(line)
        joined = " ".join(pending)
        pending, pending_len = [], 0
        if len(joined) > MAX_LINE_CHARS:
            warnings.add(f"line {start}: longer than {MAX_LINE_CHARS} characters, cut")
            joined = joined[:MAX_LINE_CHARS]
        yield start, joined
    if pending:
        yield start, " ".join(pending)[:MAX_LINE_CHARS]


_SHELL_SPECIAL = frozenset("'\"\\#;|&<>()")


def _split(line: str, number: int, warnings: _Warnings, budget: ParseBudget) -> list[str]:
    """Shell words of one line, shell operators as their own words; unbalanced quotes tolerated.

    Plain lines (no quote, escape, comment or operator character) take the fast path
    ``str.split``; only the others go through ``shlex`` (pure Python, ~1 µs per character),
    and at most MAX_LINE_CHARS of each.
    """
    if _SHELL_SPECIAL.isdisjoint(line):
        if not budget.spend(1 + len(line) // 16):
            raise _OutOfBudget
        words = line.split(None, MAX_ARGUMENTS + 1)
        if len(words) > MAX_ARGUMENTS:
            warnings.add(f"line {number}: more than {MAX_ARGUMENTS} words, rest ignored")
            words = words[:MAX_ARGUMENTS]
        return words
    if not budget.spend(10 + len(line)):     # a shlex object costs ~10 characters' worth
        raise _OutOfBudget
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = []
    try:
        for word in lexer:
            words.append(word)
            if len(words) > MAX_ARGUMENTS:
                warnings.add(f"line {number}: more than {MAX_ARGUMENTS} words, rest ignored")
                break
    except ValueError as error:  # "No closing quotation", "No escaped character"
        warnings.add(f"line {number}: {error}; split on whitespace instead")
        words = [w.strip("'\"") for w in line.split("#", 1)[0].split()[:MAX_ARGUMENTS]]
        words = [w for w in words if w]
    return words


def _expand(word: str, variables: Mapping[str, str], budget: ParseBudget) -> str:
    """Replace ``$NAME`` and ``${NAME}`` once (no recursion); unknown names stay as written."""
    if "$" not in word:
        return word
    if not budget.spend(len(word)):
        raise _OutOfBudget
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        char = word[i]
        if char != "$" or i + 1 >= n:
            out.append(char)
            i += 1
            continue
        braced = word[i + 1] == "{"
        j = i + 2 if braced else i + 1
        k = j
        while k < n and (word[k].isalnum() or word[k] == "_"):
            k += 1
        name = word[j:k]
        if braced and (k >= n or word[k] != "}"):
            out.append(char)
            i += 1
            continue
        end = k + 1 if braced else k
        if name and name in variables:
            out.append(variables[name])
        else:
            out.append(word[i:end] if name else char)
            end = end if name else i + 1
        i = end
    return "".join(out)[:MAX_LINE_CHARS]


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1][:MAX_VALUE_CHARS]


def _parse_assignments(words: list[str], number: int, warnings: _Warnings, into: dict) -> None:
    for word in words:
        name, sep, value = word.partition("=")
        if not sep:
            continue
        if valid_key(name):
            into[name] = value[:MAX_VALUE_CHARS]
        else:
            warnings.add(f"line {number}: cannot read assignment {word[:40]!r}")


def _skip_launcher_options(words: list[str], start: int) -> int:
    """Index of the executable after a launcher's own options."""
    i = start
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word == "-":
            return i
        if "=" in word:
            i += 1
        elif word in _LAUNCHER_TWO_VALUE_OPTIONS:
            i += 3
        elif word in _LAUNCHER_VALUE_OPTIONS:
            i += 2
        elif word.startswith("-") and not word.startswith("--") and len(word) > 2 and word[1] in "nNcptJ":
            i += 1  # glued short option: `-n4`
        else:
            i += 1
    return i


def _is_option(word: str) -> bool:
    if not word.startswith("-") or len(word) < 2:
        return False
    return not isinstance(coerce_value(word), float)  # `-5` is a negative number, not an option


def _parse_arguments(args: list[str], number: int, warnings: _Warnings,
                     into: dict[str, Value], deck_names: list[str]) -> None:
    positional = 0
    i = 0
    while i < len(args):
        word = args[i]
        if word == "<":  # `app < input.deck`: stdin is the deck
            if i + 1 < len(args):
                deck_names.append(args[i + 1])
            break
        if word in _SHELL_OPERATORS or word.startswith(("|", ">", "&", ";", "<")):
            break
        if word in ("1", "2") and i + 1 < len(args) and args[i + 1].startswith(">"):
            break  # `2>err.log`: a redirection, not an argument
        if word == "--":
            i += 1
            continue
        if word in _NAME_VALUE_OPTIONS and i + 2 < len(args) and valid_key(args[i + 1]) \
                and not _is_option(args[i + 2]):
            into[args[i + 1]] = coerce_value(args[i + 2])  # LAMMPS `-var x 10`
            i += 3
            continue
        if _is_option(word):
            name, sep, raw = word.partition("=")
            key = normalise_key(name)
            if not valid_key(key):
                warnings.add(f"line {number}: cannot read option {word[:40]!r}")
                i += 1
                continue
            if not sep:
                nxt = args[i + 1] if i + 1 < len(args) else None
                if nxt is not None and not _is_option(nxt) and nxt not in _SHELL_OPERATORS and nxt != "<":
                    raw, sep = nxt, "="
                    i += 1
            into[key] = coerce_value(raw) if sep else True
            if sep and key.lower() in _DECK_OPTIONS and isinstance(into[key], str):
                deck_names.append(raw)
        else:
            positional += 1
            value = coerce_value(word)
            into[f"arg{positional}"] = value
            if isinstance(value, str) and "." in value:
                deck_names.append(word)
        i += 1


def _parse_deck(data: bytes, name: str, warnings: _Warnings, into: dict[str, Value]) -> None:
    text = data[:MAX_DECK_BYTES].decode("utf-8", errors="replace")
    skipped = 0
    for number, line in enumerate(text.splitlines()[:MAX_LINES], 1):
        line = line[:MAX_LINE_CHARS]
        for marker in ("#", "!", "//"):
            line = line.split(marker, 1)[0]
        key, sep, raw = line.partition("=")
        key = key.strip()
        raw = raw.strip().rstrip(",;").strip().strip("'\"")
        if not sep or not key:
            continue
        if not valid_key(key) or not raw or " " in raw:
            skipped += 1
            continue
        into[key] = coerce_value(raw)
    if skipped:
        warnings.add(f"deck {_basename(name)}: skipped {skipped} non-scalar assignment(s)")


def _application_of(words: list[str], index: int) -> tuple[str, int]:
    """Application key and the index where its arguments start."""
    if index >= len(words):
        return "", index
    executable = _basename(words[index])
    if executable in _INTERPRETERS:
        i = index + 1
        while i < len(words) and words[i].startswith("-"):  # `python3 -u run.py`
            i += 1
        if i < len(words) and words[i] not in _SHELL_OPERATORS:
            return _basename(words[i]), i + 1
    return executable, index + 1


def extract_inputs(script: str | bytes, environment: Mapping[str, str] | None = None, *,
                   deck_reader: Callable[[str], bytes | None] | None = None,
                   max_script_bytes: int = 1 << 20, budget: ParseBudget | None = None) -> JobInputs:
    """Read the application key and its inputs from a job script (see the module docstring).

    Reading costs at most ``budget`` (default MAX_PARSE_WORK units): a script that needs more
    yields no application and no inputs, only a warning saying so (half a script's inputs would
    be a different job's).

    >>> extract_inputs("#HPCPREDICT k='v'\\n" * 2000 + "srun ./a\\n").warnings
    ('script too costly to read (over 4000 work units): answered without its inputs',)
    """
    warnings = _Warnings()
    try:
        text = _decode(script, max_script_bytes, warnings)
    except Exception as error:  # any other type handed in by a caller: report, never raise
        return JobInputs("", "", {}, (f"cannot read script: {error}",))
    budget = ParseBudget(MAX_PARSE_WORK) if budget is None else budget
    try:
        return _read(text, environment, deck_reader, warnings, budget)
    except _OutOfBudget:
        return JobInputs("", "", {}, (f"script too costly to read (over {budget.units} work units): "
                                      f"answered without its inputs",))


def _read(text: str, environment: Mapping[str, str] | None, deck_reader: Callable[[str], bytes | None] | None,
          warnings: _Warnings, budget: ParseBudget) -> JobInputs:
    variables: dict[str, str] = {}
    if environment:
        variables.update((k, str(v)[:MAX_VALUE_CHARS]) for k, v in list(environment.items())[:4096])
    exported: dict[str, str] = {}
    directives: dict[str, Value] = {}
    arguments: dict[str, Value] = {}
    deck_names: list[str] = []
    application = launcher = ""
    override = ""
    first_command: tuple[int, list[str]] | None = None
    launch_found = False
    directive_lines = export_lines = 0
    only_directives = [False]
    for number, line in _logical_lines(text, warnings, budget, only_directives):
        if not budget.spend(1 + len(line) // 64):
            raise _OutOfBudget
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(DIRECTIVE):
            directive_lines += 1
            if directive_lines > MAX_DIRECTIVE_LINES:
                if directive_lines == MAX_DIRECTIVE_LINES + 1:
                    warnings.add(f"line {number}: more than {MAX_DIRECTIVE_LINES} directives, rest ignored")
                continue
            for word in _split(stripped[len(DIRECTIVE):], number, warnings, budget):
                key, sep, raw = word.partition("=")
                if not sep or not valid_key(key):
                    warnings.add(f"line {number}: cannot read directive {word[:40]!r}")
                elif key == "app":
                    override = _basename(raw)
                else:
                    directives[key] = coerce_value(raw)
            continue
        if stripped.startswith("#") or launch_found:
            continue
        head = stripped.split(None, 1)[0]
        if head in _SETUP_COMMANDS and head not in _PREFIX_WORDS and head != "export":
            continue  # `module load ...`, `cd ...`: no need to tokenise
        if head == "export":
            export_lines += 1
            if export_lines > MAX_EXPORT_LINES:
                if export_lines == MAX_EXPORT_LINES + 1:
                    warnings.add(f"line {number}: more than {MAX_EXPORT_LINES} export lines, rest ignored")
                continue
        if first_command is not None and head != "export" and not ("srun" in stripped or "mpirun" in stripped or "mpiexec" in stripped):
            continue  # the first command is known: only a launcher line can still matter
        words = _split(stripped, number, warnings, budget)
        if not words:
            continue
        if words[0] == "export":
            assignments: dict[str, str] = {}
            _parse_assignments(words[1:], number, warnings, assignments)
            exported.update(assignments)
            variables.update(assignments)
            continue
        start = 0
        while start < len(words) and ("=" in words[start] and valid_key(words[start].split("=", 1)[0])
                                      or words[start] in _PREFIX_WORDS):
            start += 1  # `OMP_NUM_THREADS=4 srun ...`, `exec srun ...`
        if start >= len(words):
            continue
        head = _basename(words[start])
        if head in LAUNCHERS:
            launcher = head
            words = [_expand(w, variables, budget) for w in words]
            index = _skip_launcher_options(words, start + 1)
            application, args_start = _application_of(words, index)
            _parse_arguments(words[args_start:], number, warnings, arguments, deck_names)
            launch_found = only_directives[0] = True
        elif first_command is None and head not in _SETUP_COMMANDS and not head.startswith(("$", "{", "}")):
            first_command = (number, [_expand(w, variables, budget) for w in words[start:]])
    if not launch_found and first_command is not None:
        number, words = first_command
        application, args_start = _application_of(words, 0)
        _parse_arguments(words[args_start:], number, warnings, arguments, deck_names)

    deck_values: dict[str, Value] = {}
    if deck_reader is not None:
        for name in list(dict.fromkeys(deck_names))[:MAX_DECKS]:
            if name.startswith("-"):
                continue
            try:
                data = deck_reader(name)
            except Exception as error:  # the reader is the caller's; its failure is a warning
                warnings.add(f"deck {_basename(name)}: cannot read ({error})")
                continue
            if data is None:
                continue
            if not budget.spend(min(len(data), MAX_DECK_BYTES) // 16):
                raise _OutOfBudget
            _parse_deck(bytes(data), name, warnings, deck_values)

    inputs: dict[str, Value] = {k: coerce_value(v) for k, v in exported.items()}
    inputs.update(deck_values)
    inputs.update(arguments)
    inputs.update(directives)
    if len(inputs) > MAX_INPUTS:
        warnings.add(f"more than {MAX_INPUTS} inputs: rest ignored")
        inputs = dict(list(inputs.items())[:MAX_INPUTS])
    if override:
        application = override
    return JobInputs(application, launcher, inputs, tuple(warnings))
