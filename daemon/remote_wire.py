"""The remote listener's wire format, shared by the listener (:mod:`.listeners.remote`) and the CLI
(:mod:`.client`): the credential comes first, so nothing of a request is read or parsed
before the daemon knows who sends it.

A request and its reply are each one frame::

    HPCPREDICT/2 <length> <credential>\\n<length bytes of JSON>

The header line is at most :data:`HEADER_BYTES` (a MUNGE credential is a few hundred base64
characters). In a request, the credential is the caller's, made by its host's munged, its
payload :func:`request_digest` of the JSON body; the listener decodes it with the daemon's
munged before it reads the body, then checks the body against that digest. In a reply, the
credential is the daemon's (made by the daemon's uid), its payload :func:`reply_digest` of the
request's header line and of the reply's body: the CLI decodes it with its own munged and
believes the reply only if the daemon's user made it for this request. The caller sends its
header first and its body only after the daemon's signed go-ahead (``{"ok": true, "continue":
true}``), so a job script goes to the daemon and to no one who took its port. A reply the listener
sends before any credential was checked (its connection caps, a header it cannot read) carries
``-`` instead, and the CLI believes nothing of it but the word ``busy``.

>>> header = frame(b'{"method":"Predict"}', "MUNGE:abc:")
>>> header
b'HPCPREDICT/2 20 MUNGE:abc:\\n{"method":"Predict"}'
>>> parse_header(header.split(b"\\n")[0], max_length=100)
(20, 'MUNGE:abc:')
"""
from __future__ import annotations

import hashlib

MAGIC = b"HPCPREDICT/2 "
#: The most bytes a header line may have, its newline included: the magic, a length and the
#: largest credential we decode (munge.MAX_CREDENTIAL_CHARS). All a caller may send unauthenticated.
HEADER_BYTES = 4096 + 64
UNSIGNED = "-"


class FrameError(ValueError):
    """A header that is not ours (the message says why, in the sender's terms)."""


def request_digest(body: bytes) -> bytes:
    """The payload that binds a caller's credential to one request body."""
    return b"hpcpredict.v2 request sha256 " + hashlib.sha256(body).hexdigest().encode()


def reply_digest(request_header: bytes, body: bytes) -> bytes:
    """The payload that binds the daemon's credential to one reply of one request (its header
    line, which holds the caller's credential, itself bound to the request's body)."""
    return (b"hpcpredict.v2 reply sha256 " + hashlib.sha256(request_header).hexdigest().encode() + b" "
            + hashlib.sha256(body).hexdigest().encode())


def frame(body: bytes, credential: str) -> bytes:
    """One frame: its header line (without a credential: ``UNSIGNED``), then ``body``."""
    return MAGIC + b"%d %s\n" % (len(body), (credential or UNSIGNED).encode("ascii")) + body


def parse_header(line: bytes, *, max_length: int) -> tuple[int, str]:
    """A header line (without its newline) -> (body length, credential); FrameError if it is
    not one, or announces a body longer than ``max_length``."""
    if not line.startswith(MAGIC):
        raise FrameError("not an HPCPREDICT/2 request: this listener reads a MUNGE credential before "
                         "anything else (is `hpcpredict` on this host older than the daemon?)")
    fields = line[len(MAGIC):].split(b" ")
    if len(fields) != 2 or not fields[0].isdigit() or len(fields[0]) > 12 or not fields[1]:
        raise FrameError("header: expected 'HPCPREDICT/2 <length> <credential>'")
    length = int(fields[0])
    if length > max_length:
        raise FrameError(f"request of {length} bytes is longer than {max_length} bytes")
    try:
        credential = fields[1].decode("ascii")
    except UnicodeDecodeError:
        raise FrameError("header: the credential is not ASCII") from None
    return length, credential
