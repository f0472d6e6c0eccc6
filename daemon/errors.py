"""One exception hierarchy for the whole product.

Every error a user or admin can cause is a subclass of :class:`HpcPredictError`; the CLI
prints its message as one line and the daemon maps it to a gRPC status. Raise with
``raise ... from error`` so the cause stays attached.
"""
from __future__ import annotations


class HpcPredictError(Exception):
    """Base of every error this product raises on purpose."""


class ConfigError(HpcPredictError):
    """The TOML config (or an environment override) is wrong."""


class ParseError(HpcPredictError):
    """Text from a tool or a user could not be parsed.

    ``source`` names the file or stream, ``line`` the 1-based line number (0 when unknown),
    ``part`` the offending fragment.
    """

    def __init__(self, message: str, *, source: str = "", line: int = 0, part: str = ""):
        self.source, self.line, self.part = source, line, part
        where = source
        if line:
            where = f"{where}:{line}" if where else f"line {line}"
        text = f"{where}: {message}" if where else message
        if part:
            text = f"{text}: {part!r}"
        super().__init__(text)


class InvalidRequest(HpcPredictError):
    """A request field is out of range or malformed; ``field`` names it."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


class InvalidTopology(HpcPredictError):
    """A topology description parses but means something impossible (node under two leaves...)."""


class UnknownNode(InvalidTopology):
    """A node name is not in the placement model."""


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
