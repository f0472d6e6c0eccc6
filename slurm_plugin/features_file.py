"""The job's runtime-features file: where it lives, making it (TaskProlog) and reading it (epilog).

A job reports runtime features by appending ``HPCPREDICT t=<s> key=value ...`` lines to the
file named by ``$HPCPREDICT_FEATURES_FILE`` (protocol: ``hpcpredict.daemon.runtime.report``).
The TaskProlog, as the job's user, creates that file and exports its name; EpilogSlurmctld, as
SlurmUser on the controller, reads it back and relays the raw text to the daemon, which parses
it with the project's one parser. The file is ``.hpcpredict-features-<job id>`` in the job's
working directory, or in ``features_dir`` when a site sets one (a shared directory the
controller can read, e.g. owned by SlurmUser with mode 1733).

The file is written by the user, so the epilog trusts nothing in it: :func:`take` opens it
without following a symbolic link and without blocking (a FIFO), accepts only a regular file
owned by the job's uid (a link to someone else's file, even a hard one, is refused), reads at
most ``max_bytes`` and ``max_lines``, and removes it only when the name still refers to the
file it read. Standard library only (the hook scripts run under the system Python).

Job ids are predictable, so in a shared directory another user can create a job's name before
the job runs (a "squat": in a sticky directory its owner cannot remove it). The TaskProlog then
creates ``.hpcpredict-features-<job id>.<uid>.<128 random bits>`` instead, a name nobody can
take in advance, and exports that; the epilog, finding the plain name missing or not the job
user's, looks for ``.hpcpredict-features-<job id>.<uid>.*`` files owned by the job's uid (it can
list a shared ``features_dir`` it owns; a 0711 working directory has no squatter to fear).

Example::

    >>> features_path({"features_dir": ""}, "42", "/home/alice/run")
    '/home/alice/run/.hpcpredict-features-42'
    >>> features_path({"features_dir": "/shared/hpcpredict"}, "42", "/x")
    '/shared/hpcpredict/.hpcpredict-features-42'
    >>> features_path({"features_dir": ""}, "42", "relative")
    ''
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from dataclasses import dataclass

FILE_PREFIX = ".hpcpredict-features-"
FEATURES_FILE_ENV = "HPCPREDICT_FEATURES_FILE"   # = hpcpredict.daemon.runtime.report.FEATURES_FILE_ENV
START_TIME_ENV = "HPCPREDICT_T0"                 # = hpcpredict.daemon.runtime.report.START_TIME_ENV


class FeaturesFileRefused(Exception):
    """The file exists but may not be read (a link, not a regular file, another owner)."""


@dataclass(frozen=True)
class FeaturesText:
    text: str            # the first max_lines whole lines of the first max_bytes bytes
    lines: int
    bytes_read: int
    truncated: bool      # the file had more than was read
    removed: bool


def features_path(settings: dict, job_id: str, work_dir: str) -> str:
    """The features file of job ``job_id`` whose working directory is ``work_dir``; "" when
    there is no usable place (no numeric job id, no absolute directory)."""
    directory = settings.get("features_dir") or work_dir
    if not job_id.isdigit() or not directory.startswith("/") or any(c in directory for c in "\n\r\0"):
        return ""
    return os.path.join(directory, FILE_PREFIX + job_id)


def printable(text: str, limit: int = 300) -> str:
    """``text`` (a user-chosen path) fit for a log line: control characters shown as ``?``, cut."""
    text = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return text + ("..." if len(text) >= limit else "")


def squat_proof_prefix(path: str, uid: int) -> str:
    """The start of the names the job's own file may take when ``path`` is squatted."""
    return f"{os.path.basename(path)}.{uid}."


def create(path: str) -> str:
    """Create the (empty) features file as the calling user, readable by SlurmUser (0644 whatever
    the umask); returns its name ("" when none can be made). Normally ``path``; when something
    else is there (a link, another user's file planted for this job id), a name beside it that
    carries our uid and 128 random bits, which nobody could have planted."""
    made = _create(path)
    if made is None:   # squatted
        alternative = os.path.join(os.path.dirname(path), squat_proof_prefix(path, os.getuid()) + secrets.token_hex(16))
        made = _create(alternative)
        return alternative if made else ""
    return path if made else ""


def _create(path: str) -> bool | None:
    """True: ``path`` is now our own regular file; None: something else is there; False: error."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        try:
            info = os.lstat(path)
        except OSError:
            return False
        return True if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() else None
    except OSError as error:
        return None if error.errno == errno.ELOOP else False
    try:
        os.fchmod(fd, 0o644)
    finally:
        os.close(fd)
    return True


def take(path: str, uid: int, *, max_bytes: int, max_lines: int, remove: bool = True) -> FeaturesText | None:
    """Read the features file of a job of ``uid`` safely; None when it does not exist.

    Raises :class:`FeaturesFileRefused` (reason only, never the content) when the name is a
    symbolic link, not a regular file, or not owned by ``uid``; ``OSError`` when it cannot be
    read. ``remove`` unlinks it afterwards when the name still refers to the file read (a file
    swapped in meanwhile is left alone); a failed removal is not an error. When ``path`` is
    missing or refused, the job's squat-proof name (:func:`create`) is read instead if there is one.
    """
    directory, name = os.path.split(path)
    # O_PATH: a directory SlurmUser may search but not list (0711) still works.
    dir_fd = os.open(directory or ".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            found = _take(dir_fd, name, uid, max_bytes, max_lines, remove)
        except FeaturesFileRefused:
            found = _take_squat_proof(directory, dir_fd, path, uid, max_bytes, max_lines, remove)
            if found is None:
                raise
            return found
        return found if found is not None else _take_squat_proof(directory, dir_fd, path, uid, max_bytes,
                                                                  max_lines, remove)
    finally:
        os.close(dir_fd)


def _take_squat_proof(directory: str, dir_fd: int, path: str, uid: int, max_bytes: int, max_lines: int,
                      remove: bool) -> FeaturesText | None:
    """The job's file under its squat-proof name: the newest owned by ``uid``; None when the
    directory has none or may not be listed. Other users' files of that form are skipped
    (looked at with lstat, never opened)."""
    prefix = squat_proof_prefix(path, uid)
    try:
        with os.scandir(directory or ".") as entries:
            candidates = [(entry.stat(follow_symlinks=False).st_mtime, entry.name) for entry in entries
                          if entry.name.startswith(prefix) and entry.stat(follow_symlinks=False).st_uid == uid]
    except OSError:   # a working directory SlurmUser may only search: no squatter there to work around
        return None
    for _, name in sorted(candidates, reverse=True):
        try:
            found = _take(dir_fd, name, uid, max_bytes, max_lines, remove)
        except (FeaturesFileRefused, OSError):
            continue
        if found is not None:
            return found
    return None


def _take(dir_fd: int, name: str, uid: int, max_bytes: int, max_lines: int, remove: bool) -> FeaturesText | None:
    """One file in ``dir_fd`` (see :func:`take`)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise FeaturesFileRefused("is a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FeaturesFileRefused("is not a regular file")
        if info.st_uid != uid:
            raise FeaturesFileRefused(f"is owned by uid {info.st_uid}, not the job's uid {uid}")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    truncated = len(data) > max_bytes
    if truncated:   # whole lines only: a cut line would be a wrong value
        data = data[:data.rfind(b"\n", 0, max_bytes) + 1]
    lines = data.splitlines(keepends=True)
    if len(lines) > max_lines:
        lines, truncated = lines[:max_lines], True
    removed = False
    if remove:
        try:
            now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
                os.unlink(name, dir_fd=dir_fd)
                removed = True
        except OSError:
            pass
    return FeaturesText(b"".join(lines).decode("utf-8", "replace"), len(lines), size, truncated, removed)


def discard_unused(path: str, uid: int) -> int:
    """Remove the job's features file when the job wrote nothing into it (TaskEpilog, as the job's
    user: in the user's own working directory SlurmUser may not remove it, so without this every
    job would leave one behind). Both the plain name and the job's squat-proof names are looked
    at; only an empty regular file owned by ``uid`` goes, and only while the name still refers to
    the file looked at (a file written to, or swapped in, is left for the epilog to read).
    Returns how many were removed."""
    directory, name = os.path.split(path)
    try:
        dir_fd = os.open(directory or ".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        names = [name]
        try:
            with os.scandir(directory or ".") as entries:
                prefix = squat_proof_prefix(path, uid)
                names += [entry.name for entry in entries if entry.name.startswith(prefix)]
        except OSError:     # a directory we may only search: the plain name only
            pass
        return sum(_discard_if_empty(dir_fd, each, uid) for each in names)
    finally:
        os.close(dir_fd)


def _discard_if_empty(dir_fd: int, name: str, uid: int) -> bool:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid or info.st_size != 0:
            return False
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino, now.st_size) != (info.st_dev, info.st_ino, 0):
            return False
        os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False
