"""Which accounting source `hpcpredict refresh` reads: pyslurm's database API or ``sacct --json``.

``[accounting] source`` chooses: ``sacct`` always runs ``sacct --json``; ``pyslurm`` always uses
pyslurm (and is an error, naming why, when it cannot be used); ``auto`` (the default) uses
pyslurm only when it imports and was built for the site's Slurm release, else ``sacct --json``.
pyslurm builds only against the libslurm of the Slurm release its version names (its version is
``SLURM_MAJOR.SLURM_MINOR.PATCH``: 25.11.2 is for Slurm 25.11, 24.5.1 for Slurm 24.05), so a
mismatched pyslurm is never used. The choice and its reason are returned, so the caller reports
them once.

>>> slurm_release("slurm-wlm 22.05.8"), pyslurm_release("24.5.1")
((22, 5), (24, 5))
>>> choose_source("auto", slurm_version="slurm 25.11.1", pyslurm_version="25.11.2").name
'pyslurm'
>>> choose_source("auto", slurm_version="slurm-wlm 22.05.8", pyslurm_version="25.11.2").reason
'pyslurm 25.11.2 is built for Slurm 25.11, the site runs Slurm 22.05'
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from ...errors import ConfigError

logger = logging.getLogger(__name__)

SOURCES = ("auto", "sacct", "pyslurm")

_SLURM_VERSION = re.compile(r"\bslurm(?:-wlm)?\s+(\d+)\.(\d+)", re.IGNORECASE)
_PYSLURM_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.|$)")


@dataclass(frozen=True)
class SourceChoice:
    """The accounting source to read (``sacct`` or ``pyslurm``) and why it was chosen."""

    name: str
    reason: str


def slurm_release(version_text: str) -> tuple[int, int] | None:
    """``sacct --version`` / ``scontrol --version`` output ("slurm-wlm 22.05.8", "slurm 25.11.1")
    -> (major, minor); None when the text names no Slurm release."""
    found = _SLURM_VERSION.search(version_text or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def pyslurm_release(version: str) -> tuple[int, int] | None:
    """``pyslurm.__version__`` ("25.11.2", "24.5.1") -> the Slurm (major, minor) it was built for."""
    found = _PYSLURM_VERSION.match((version or "").strip())
    return (int(found.group(1)), int(found.group(2))) if found else None


def import_pyslurm():
    """(module, "") when pyslurm imports, else (None, why not).

    Importing pyslurm loads libslurm and reads slurm.conf (it calls ``slurm_init``), so a broken
    installation fails here with an OSError or a RuntimeError rather than an ImportError: any
    failure means pyslurm cannot be used, and its message is the reason reported.
    """
    try:
        import pyslurm
    except ModuleNotFoundError as error:
        if error.name == "pyslurm":
            return None, "pyslurm is not installed"
        return None, f"pyslurm does not import: {error}"
    except Exception as error:  # noqa: BLE001 - any import failure makes it unusable; the message says why
        return None, f"pyslurm does not import: {type(error).__name__}: {error}"
    return pyslurm, ""


def choose_source(setting: str, *, slurm_version: str | None, pyslurm_version: str | None,
                  pyslurm_error: str = "", slurm_error: str = "") -> SourceChoice:
    """Decide between ``sacct`` and ``pyslurm``.

    ``slurm_version`` is the text ``sacct --version`` printed (None when it could not run:
    ``slurm_error`` says why); ``pyslurm_version`` is ``pyslurm.__version__`` (None when pyslurm
    does not import: ``pyslurm_error`` says why). ``setting = "pyslurm"`` with a pyslurm that
    cannot be used raises :class:`ConfigError` with the reason.
    """
    if setting not in SOURCES:
        raise ConfigError(f"[accounting] source must be {'|'.join(SOURCES)}, got {setting!r}")
    if setting == "sacct":
        return SourceChoice("sacct", "[accounting] source = sacct")
    usable, why = _pyslurm_usable(slurm_version, pyslurm_version, pyslurm_error, slurm_error)
    if usable:
        return SourceChoice("pyslurm", why)
    if setting == "pyslurm":
        raise ConfigError(f"[accounting] source = pyslurm, but {why} (set source = \"auto\" or \"sacct\" "
                          f"to read sacct --json)")
    return SourceChoice("sacct", why)


def _pyslurm_usable(slurm_version, pyslurm_version, pyslurm_error, slurm_error) -> tuple[bool, str]:
    if pyslurm_version is None:
        return False, pyslurm_error or "pyslurm is not installed"
    built_for = pyslurm_release(pyslurm_version)
    if built_for is None:
        return False, f"pyslurm's version {pyslurm_version!r} names no Slurm release"
    if slurm_version is None:
        return False, f"the site's Slurm release is unknown ({slurm_error or 'sacct --version did not run'})"
    site = slurm_release(slurm_version)
    if site is None:
        return False, f"the site's Slurm release is unknown (sacct --version said {slurm_version.strip()[:60]!r})"
    if built_for != site:
        return False, (f"pyslurm {pyslurm_version} is built for Slurm {built_for[0]}.{built_for[1]:02d}, "
                       f"the site runs Slurm {site[0]}.{site[1]:02d}")
    return True, f"pyslurm {pyslurm_version} matches the site's Slurm {site[0]}.{site[1]:02d}"
