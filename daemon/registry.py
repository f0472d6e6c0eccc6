"""Versioned model artifacts on disk: checksummed, published atomically, never unpickled.

Layout under the models directory::

    <kind>/<key>/<version>/artifact.json   # kind, key, version, created, metadata, sha256 per file
    <kind>/<key>/<version>/model/...       # the model's own plain files (JSON, .npz, .skops)
    <kind>/<key>/CURRENT                   # the version being served (replaced atomically)

``key`` is the application or cluster the model is for; ``_site`` when site-wide. Publishing
copies into a hidden temporary folder, fsyncs, renames it to its version and only then
replaces ``CURRENT``: a crash at any moment leaves the previous version serving. Loading
verifies every checksum before the kind's loader reads a byte, and loaders never unpickle.
"""
from __future__ import annotations

import datetime as _dt
import grp
import hashlib
import json
import logging
import os
import pwd
import re
import shutil
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ModelArtifactError, ModelNotFound
from .model_kinds import SITE_KEY, get_model_kind, model_kind_names

logger = logging.getLogger(__name__)

MODEL_DIR = "model"  # the loader sees only this folder, never the registry's own files
MANIFEST = "artifact.json"  # not "manifest.json": a model may have its own
CURRENT = "CURRENT"
#: A staging folder or CURRENT pointer older than this is a killed publish's leftover (registry
#: cleans them at the next publish or rollback of the same model)
LEFTOVER_AGE = _dt.timedelta(hours=1)

_SAFE_KEY = re.compile(r"[A-Za-z0-9._+-]{1,128}")


@dataclass(frozen=True)
class Artifact:
    kind: str
    key: str
    version: str
    created: str
    path: Path
    metadata: dict = field(default_factory=dict)

    @property
    def model_path(self) -> Path:
        return self.path / MODEL_DIR

    @property
    def name(self) -> str:
        return self.kind if self.key == SITE_KEY else f"{self.kind}:{self.key}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_FILE_MODE, _DIR_MODE = 0o640, 0o750   # the daemon's user and group read; nobody else


def _copy_model_folder(source: Path, target: Path) -> None:
    """Copy the regular files and folders under ``source`` into ``target`` (created), with our
    modes whatever the umask. Symlinks, devices and FIFOs are refused, never followed: a
    symlink in a published model would let whoever controls its target change what the daemon
    serves (or make it read any file). ``os.fwalk`` and ``O_NOFOLLOW`` keep a swap during the
    copy from redirecting it."""
    try:
        top = os.lstat(source)
    except OSError as error:
        raise ModelArtifactError(f"{source}: cannot read: {error.strerror}") from error
    if stat.S_ISLNK(top.st_mode) or not stat.S_ISDIR(top.st_mode):
        raise ModelArtifactError(f"{source}: not a model folder (a symlink or not a directory)")
    os.mkdir(target, _DIR_MODE)
    os.chmod(target, _DIR_MODE)
    for folder, dirs, files, dir_fd in os.fwalk(source, follow_symlinks=False):
        relative = Path(folder).relative_to(source)
        for name in dirs + files:
            info = os.lstat(name, dir_fd=dir_fd)
            where = relative / name
            if stat.S_ISLNK(info.st_mode):
                raise ModelArtifactError(f"{source}: refusing to publish a symlink: {where}")
            if stat.S_ISDIR(info.st_mode):
                os.mkdir(target / where, _DIR_MODE)
                os.chmod(target / where, _DIR_MODE)
            elif not stat.S_ISREG(info.st_mode):
                raise ModelArtifactError(f"{source}: refusing to publish {where}: not a regular file")
        for name in files:
            reader = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            try:
                writer = os.open(target / relative / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                 _FILE_MODE)
                try:
                    os.fchmod(writer, _FILE_MODE)
                    while block := os.read(reader, 1 << 20):
                        view = memoryview(block)
                        while view:
                            view = view[os.write(writer, view):]
                finally:
                    os.close(writer)
            finally:
                os.close(reader)


def _owner_of(spec: str, root: Path) -> tuple[int, int]:
    """(uid, gid) who must read published models: ``user[:group]`` from the config, else the
    owner and group of the models directory (or of its nearest existing parent)."""
    if spec:
        user, _, group = spec.partition(":")
        try:
            entry = pwd.getpwnam(user)
            gid = grp.getgrnam(group).gr_gid if group else entry.pw_gid
        except KeyError as error:
            raise ModelArtifactError(f"[models] owner {spec!r}: no such user or group") from error
        return entry.pw_uid, gid
    probe = root
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    info = probe.stat()
    return info.st_uid, info.st_gid


def _can_read(info: os.stat_result, uid: int, gids: set[int], need: int) -> bool:
    """Would ``uid`` (member of ``gids``) have ``need`` (4 read, 5 read+search) on a file with ``info``?"""
    if uid == 0:
        return True
    if info.st_uid == uid:
        return (info.st_mode >> 6) & need == need
    if info.st_gid in gids:
        return (info.st_mode >> 3) & need == need
    return info.st_mode & need == need


def _groups_of(uid: int, gid: int) -> set[int]:
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return {gid}
    return {gid, *(g.gr_gid for g in grp.getgrall() if name in g.gr_mem)}


class ModelRegistry:
    def __init__(self, root: str | os.PathLike, *, bundled: str | os.PathLike | None = None, owner: str = "",
                 keep_versions: int = 0):
        self.root = Path(root)
        self.bundled = Path(bundled) if bundled else None
        self.owner = owner   # "user[:group]" the daemon runs as; "" = the models directory's owner
        self.keep_versions = keep_versions   # a publish removes older versions beyond this many; 0 = keep all

    def _hand_over(self, paths: list[Path], uid: int, gid: int) -> None:
        """Make ``paths`` (the new version's files and folders, and the folders above them we
        made) readable by the daemon's user, or refuse before CURRENT moves.

        Root gives them to that user and group. Anyone else cannot chown: their files must
        then be readable through the group (chgrp to a group the publisher is in) or owner."""
        if os.geteuid() == 0:
            for path in paths:
                os.chown(path, uid, gid, follow_symlinks=False)
            return
        if gid in os.getgroups() or gid == os.getegid():
            for path in paths:
                if os.lstat(path).st_uid == os.geteuid():
                    os.chown(path, -1, gid, follow_symlinks=False)
        gids = _groups_of(uid, gid)
        for path in paths:
            info = os.lstat(path)
            if not _can_read(info, uid, gids, 5 if stat.S_ISDIR(info.st_mode) else 4):
                who = pwd.getpwuid(uid).pw_name if uid in {e.pw_uid for e in pwd.getpwall()} else str(uid)
                raise ModelArtifactError(
                    f"refusing to publish: the daemon's user {who} could not read {path} "
                    f"(owner uid {info.st_uid}, gid {info.st_gid}, mode {stat.S_IMODE(info.st_mode):04o}); "
                    f"publish as root or as {who}, or set [models] owner")

    # -- publishing
    def publish(self, kind: str, source: str | os.PathLike, *, key: str = SITE_KEY,
                metadata: dict | None = None, validate: bool = True) -> Artifact:
        """Copy the model folder ``source`` in as a new version and make it current.

        With ``validate`` the kind's loader must accept the copy before CURRENT moves, so a
        broken model can never become the serving one.
        """
        model_kind = get_model_kind(kind)
        if not _SAFE_KEY.fullmatch(key):
            raise ModelArtifactError(f"model key {key!r} must match {_SAFE_KEY.pattern}")
        source = Path(source)
        if not source.is_dir():
            raise ModelArtifactError(self._not_a_folder(source, kind, key))
        if (source / MANIFEST).exists():   # a published version folder (an old one, another site's):
            earlier = self.open(source)     # its model, verified, becomes a new version
            if earlier.kind != kind:
                raise ModelArtifactError(f"{source} is a {earlier.kind} model, not {kind}")
            metadata = {**earlier.metadata, **(metadata or {}), "republished_from": earlier.version}
            source = earlier.model_path
        home = self.root / kind / key
        uid, gid = _owner_of(self.owner, self.root)   # before we create anything ourselves
        made: list[Path] = []   # the folders we create, from the top down (the registry's parents too)
        for folder in (home, *home.parents):
            if folder.exists() or folder.is_symlink():
                break
            made.insert(0, folder)
        for folder in made:
            folder.mkdir(mode=_DIR_MODE, exist_ok=True)
            os.chmod(folder, _DIR_MODE)
        for folder in (self.root / kind, home):
            if folder.is_symlink() or folder.resolve() != self.root.resolve() / folder.relative_to(self.root):
                raise ModelArtifactError(f"{folder}: refusing to publish through a symlink")
        now = _dt.datetime.now(_dt.timezone.utc)
        self._remove_leftovers(home, now)
        version = now.strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:6]
        staging = home / f".tmp-{version}"
        os.mkdir(staging, _DIR_MODE)
        os.chmod(staging, _DIR_MODE)
        try:
            _copy_model_folder(source, staging / MODEL_DIR)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        files = {}
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
            files[path.relative_to(staging).as_posix()] = _sha256(path)
        manifest = {"format": 1, "kind": kind, "key": key, "version": version,
                    "created": now.isoformat(timespec="seconds"), "metadata": metadata or {}, "files": files}
        with open(os.open(staging / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE), "w",
                  encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), _FILE_MODE)
            json.dump(manifest, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            if validate:
                try:
                    model_kind.load(staging / MODEL_DIR)
                except Exception as error:   # the staging copy's path means nothing to the admin: the source's
                    said = str(error).replace(str(staging / MODEL_DIR), str(source))
                    raise ModelArtifactError(f"refusing to publish {kind} model from {source}: {said} (a model "
                                             f"folder is what `hpcpredict train` or `train-runtime` wrote, or a "
                                             f"published version's folder)") from error
            self._hand_over([*made, staging, *staging.rglob("*")], uid, gid)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        final = home / version
        os.rename(staging, final)
        _fsync_dir(home)
        self._point_current(home, version, uid, gid)
        logger.info("published %s model %s version %s", kind, key, version)
        if self.keep_versions:
            self.prune(kind, key, self.keep_versions)
        return self._artifact(final, manifest)

    def _not_a_folder(self, source: Path, kind: str, key: str) -> str:
        """Why ``source`` (not a directory) cannot be published, and what to do instead. A
        version folder of this registry that is gone was pruned: only a copy kept elsewhere, or
        a version still kept (rollback), can serve again."""
        if source.exists():
            return f"{source}: not a model folder (not a directory)"
        home = self.root / kind / key
        try:
            pruned = source.resolve().parent == home.resolve()
        except OSError:
            pruned = False
        if not pruned:
            return f"{source}: no such model folder"
        kept = self.versions(kind, key)
        return (f"{source}: no such version: it is not among the {kind} model {key} versions kept ({len(kept)}: "
                f"[models] keep_versions keeps the newest and removes older ones). `hpcpredict rollback {kind} "
                f"VERSION` serves a kept one again (`ls {home}`); a removed one only from a copy made before "
                f"(`cp -a {home}/VERSION /root/`, then `hpcpredict publish {kind} /root/VERSION`)")

    def _remove_leftovers(self, home: Path, now: _dt.datetime) -> list[str]:
        """Remove what a killed publish or rollback left in ``home``: ``.tmp-VERSION`` staging
        folders and ``.CURRENT.*`` pointers older than LEFTOVER_AGE (a publish takes seconds, so
        an older one is nobody's: one in progress is never touched). The names removed."""
        removed = []
        for path in home.iterdir():
            if path.name.startswith(".tmp-"):
                try:
                    made = _dt.datetime.strptime(path.name[5:].split("-", 1)[0], "%Y%m%dT%H%M%S%fZ")
                except ValueError:
                    continue        # not a staging name of ours: left alone
                old = now - made.replace(tzinfo=_dt.timezone.utc) > LEFTOVER_AGE
            elif path.name.startswith(f".{CURRENT}."):
                old = now.timestamp() - path.lstat().st_mtime > LEFTOVER_AGE.total_seconds()
            else:
                continue
            if old:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                removed.append(path.name)
        if removed:
            logger.info("%s: removed %d leftover(s) of killed publishes: %s", home, len(removed), ", ".join(removed))
        return removed

    def _point_current(self, home: Path, version: str, uid, gid) -> None:
        """CURRENT names ``version``, atomically: written beside it, synced, handed over, renamed."""
        pointer = home / f".{CURRENT}.{uuid.uuid4().hex[:8]}"
        with open(os.open(pointer, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE), "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), _FILE_MODE)
            handle.write(version + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._hand_over([pointer], uid, gid)
        os.replace(pointer, home / CURRENT)
        _fsync_dir(home)

    def make_current(self, kind: str, version: str, key: str = SITE_KEY) -> Artifact:
        """Serve the published ``version`` again (a rollback): verified and loaded before CURRENT moves."""
        home = self.root / kind / key
        if version not in self.versions(kind, key):
            known = ", ".join(self.versions(kind, key)[-5:]) or "none"
            raise ModelArtifactError(f"no {kind} model {key} version {version!r} (newest published: {known})")
        self._remove_leftovers(home, _dt.datetime.now(_dt.timezone.utc))
        artifact = self.open(home / version)
        try:
            get_model_kind(kind).load(artifact.model_path)
        except Exception as error:
            raise ModelArtifactError(f"refusing to serve {kind} version {version}: {error}") from error
        self._point_current(home, version, *_owner_of(self.owner, self.root))
        logger.info("%s model %s: serving version %s again", kind, key, version)
        return artifact

    def prune(self, kind: str, key: str = SITE_KEY, keep: int = 1) -> list[str]:
        """Remove all but the ``keep`` newest versions, never the one CURRENT names nor the newest
        of each model format; the removed ones."""
        home = self.root / kind / key
        try:
            serving = (home / CURRENT).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            serving = ""
        versions = self.versions(kind, key)   # names start with their UTC time: sorted = oldest first
        kept = set(versions[max(len(versions) - keep, 0):]) | {serving}
        # The newest version of every model format is kept too: after a downgrade, the older
        # release finds one it can read (load_older) instead of only the newer release's.
        newest_of_format = {self._model_format(home / v): v for v in versions}
        kept |= {v for fmt, v in newest_of_format.items() if fmt is not None}
        removed = [v for v in versions if v not in kept]
        for version in removed:
            shutil.rmtree(home / version)
        if removed:
            logger.info("%s model %s: removed %d old version(s), kept %d", kind, key, len(removed), keep)
        return removed

    @staticmethod
    def _model_format(folder: Path):
        """The format version a model's own manifest names (the walltime model's), None without one."""
        try:
            written = json.loads((folder / MODEL_DIR / "manifest.json").read_text(encoding="utf-8")).get("format_version")
        except (OSError, ValueError, AttributeError):
            return None
        return written if isinstance(written, (int, str)) else None

    # -- reading
    def _artifact(self, folder: Path, manifest: dict) -> Artifact:
        return Artifact(kind=manifest["kind"], key=manifest["key"], version=manifest["version"],
                        created=manifest.get("created", ""), path=folder, metadata=manifest.get("metadata", {}))

    def open(self, folder: Path) -> Artifact:
        """Read and verify one version folder (manifest + every checksum)."""
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            files = manifest["files"]
            kind, key, version = manifest["kind"], manifest["key"], manifest["version"]
        except FileNotFoundError as error:
            raise ModelArtifactError(f"{folder}: no {MANIFEST}: not a model artifact") from error
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
            raise ModelArtifactError(f"{folder}/{MANIFEST}: malformed manifest: {error}") from error
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise ModelArtifactError(f"{folder}/{MANIFEST}: malformed file list")
        for name, expected in files.items():
            path = (folder / name).resolve()
            if folder.resolve() not in path.parents:
                raise ModelArtifactError(f"{folder}: manifest names a file outside the artifact: {name}")
            if not path.is_file():
                raise ModelArtifactError(f"{folder}: missing file {name}")
            if _sha256(path) != expected:
                raise ModelArtifactError(f"{folder}: checksum mismatch for {name} (file changed or corrupt)")
        return self._artifact(folder, {"kind": kind, "key": key, "version": version,
                                       "created": manifest.get("created", ""),
                                       "metadata": manifest.get("metadata", {})})

    def current(self, kind: str, key: str = SITE_KEY) -> Artifact:
        for root in (self.root, self.bundled):
            if root is None:
                continue
            home = root / kind / key
            try:
                version = (home / CURRENT).read_text(encoding="utf-8").strip()
            except FileNotFoundError:
                continue
            folder = home / version
            # CURRENT names a version folder of this model, never a path elsewhere (../, /etc)
            # nor a symlink to one.
            if not _SAFE_KEY.fullmatch(version) or version.startswith(".") or folder.is_symlink():
                raise ModelArtifactError(f"{home / CURRENT}: names {version[:80]!r}, not a version of this model")
            return self.open(folder)
        raise ModelNotFound(f"no {kind} model published for {key}")

    def unreadable_root(self, *, expected: bool = False) -> str:
        """Why the models directory cannot be listed; "" when it can, or when it does not exist
        and was not ``expected`` to (a fresh install serves the bundled models until something
        is published)."""
        try:
            os.listdir(self.root)
        except FileNotFoundError:
            return f"models directory {self.root} is missing" if expected else ""
        except OSError as error:
            return f"models directory {self.root}: {error.strerror}"
        return ""

    def entries(self) -> list[tuple[str, str]]:
        """(kind, key) pairs that have a current version, published ones shadowing bundled ones."""
        found: dict[tuple[str, str], None] = {}
        for root in (self.root, self.bundled):
            if root is None or not root.is_dir():
                continue
            for current in sorted(root.glob(f"*/*/{CURRENT}")):
                kind, key = current.parent.parent.name, current.parent.name
                if kind in model_kind_names():
                    found.setdefault((kind, key), None)
        return list(found)

    def versions(self, kind: str, key: str = SITE_KEY) -> list[str]:
        home = self.root / kind / key
        return sorted(p.name for p in home.iterdir() if p.is_dir() and not p.name.startswith(".")) if home.is_dir() else []

    def load(self, kind: str, key: str = SITE_KEY) -> tuple[Artifact, Any]:
        artifact = self.current(kind, key)
        try:
            model = get_model_kind(kind).load(artifact.model_path)
        except ModelArtifactError:
            raise
        except Exception as error:
            raise ModelArtifactError(f"{artifact.path}: {kind} loader refused it: {error}") from error
        return artifact, model

    def load_older(self, kind: str, key: str = SITE_KEY) -> tuple[Artifact, Any] | None:
        """The newest version of ``kind``/``key`` that loads, other than the one CURRENT names
        (refused: a newer release's format after a downgrade, a damaged file), else the bundled
        one; None when nothing loads. CURRENT is not moved: the site's choice stays on disk for
        the release that can read it."""
        home = self.root / kind / key
        try:
            serving = (home / CURRENT).read_text(encoding="utf-8").strip()
        except OSError:
            serving = ""
        folders = [home / version for version in reversed(self.versions(kind, key)) if version != serving]
        if self.bundled is not None:
            try:
                folders.append(self.bundled / kind / key / (self.bundled / kind / key / CURRENT).read_text(
                    encoding="utf-8").strip())
            except OSError:
                pass
        for folder in folders:
            if folder.is_symlink():
                continue
            try:
                artifact = self.open(folder)
                return artifact, get_model_kind(kind).load(artifact.model_path)
            except Exception as error:   # the next older one may load
                logger.info("model %s/%s: version %s does not load either: %s", kind, key, folder.name, error)
        return None

    def load_all(self) -> tuple[dict[tuple[str, str], tuple[Artifact, Any]], list[str]]:
        """Every current model; the second value lists the ones refused (one line each)."""
        loaded, errors = {}, []
        for kind, key in self.entries():
            try:
                loaded[(kind, key)] = self.load(kind, key)
            except Exception as error:  # one bad artifact must never stop the others loading
                errors.append(f"{kind}/{key}: {error}")
                logger.error("model %s/%s refused: %s", kind, key, error)
        return loaded, errors
