"""One exception hierarchy for the whole product.

Every error a user or admin can cause is a subclass of :class:`HpcPredictError`; the base and
the errors the topology parsers raise are defined in :mod:`hpcpredict.topology.errors` (the
lowest layer, which must not import the daemon) and re-exported here. The CLI
prints its message as one line and the daemon maps it to a gRPC status. Raise with
``raise ... from error`` so the cause stays attached.
"""
from __future__ import annotations

from ..topology.errors import (  # the base and the parsers' errors (the lowest layer)
    HpcPredictError,
    InvalidRequest,
    InvalidTopology,
    ParseError,
    UnknownNode,
)

__all__ = [
    "HpcPredictError", "ParseError", "InvalidRequest", "InvalidTopology", "UnknownNode", "ConfigError",
    "CommandError", "ModelArtifactError", "ModelNotFound", "StoreError", "DaemonUnavailable",
]


class ConfigError(HpcPredictError):
    """The TOML config (or an environment override) is wrong."""


class CommandError(HpcPredictError):
    """An external command failed; carries what ran and what it said."""

    def __init__(self, cmd, returncode: int | None, stdout: str = "", stderr: str = "", message: str = ""):
        self.cmd, self.returncode, self.stdout, self.stderr = cmd, returncode, stdout, stderr
        shown = " ".join(map(str, cmd)) if isinstance(cmd, (list, tuple)) else str(cmd)
        detail = message or (stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {returncode}")
        super().__init__(f"command failed: {shown}: {detail}")


class ModelArtifactError(HpcPredictError):
    """A model artifact is missing, corrupt, of the wrong kind, or fails its checksum."""


class ModelNotFound(HpcPredictError):
    """No model of that kind/key is published."""


class StoreError(HpcPredictError):
    """The store could not read or write (disk full, read-only, locked, corrupt)."""


class DaemonUnavailable(HpcPredictError):
    """The CLI could not reach the daemon."""


class PermissionDenied(HpcPredictError):
    """The caller may not make this call (an admin call from a user who is not an admin)."""
