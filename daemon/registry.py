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
import hashlib
import json
import logging
import os
import re
import shutil
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


class ModelRegistry:
    def __init__(self, root: str | os.PathLike, *, bundled: str | os.PathLike | None = None):
        self.root = Path(root)
        self.bundled = Path(bundled) if bundled else None

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
            raise ModelArtifactError(f"{source}: not a model folder")
        home = self.root / kind / key
        home.mkdir(parents=True, exist_ok=True)
        now = _dt.datetime.now(_dt.timezone.utc)
        version = now.strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:6]
        staging = home / f".tmp-{version}"
        shutil.copytree(source, staging / MODEL_DIR)
        files = {}
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
            files[path.relative_to(staging).as_posix()] = _sha256(path)
        manifest = {"format": 1, "kind": kind, "key": key, "version": version,
                    "created": now.isoformat(timespec="seconds"), "metadata": metadata or {}, "files": files}
        with open(staging / MANIFEST, "w", encoding="utf-8") as handle:
            json.dump(manifest, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        if validate:
            try:
                model_kind.load(staging / MODEL_DIR)
            except Exception as error:
                shutil.rmtree(staging, ignore_errors=True)
                raise ModelArtifactError(f"refusing to publish {kind} model from {source}: {error}") from error
        final = home / version
        os.rename(staging, final)
        _fsync_dir(home)
        pointer = home / f".{CURRENT}.{version}"
        pointer.write_text(version + "\n", encoding="utf-8")
        with open(pointer, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(pointer, home / CURRENT)
        _fsync_dir(home)
        logger.info("published %s model %s version %s", kind, key, version)
        return self._artifact(final, manifest)

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
            return self.open(home / version)
        raise ModelNotFound(f"no {kind} model published for {key}")

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
