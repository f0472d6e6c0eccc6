"""MUNGE credentials through libmunge (Debian's ``libmunge2``), for the remote listener.

Every Slurm site runs ``munged`` with one site-wide key on every host: a credential a process
makes with its local munged says, to any munged holding the same key, which uid and gid made
it, within its time-to-live (300 s by default), once (munged refuses a credential it has
decoded before). The remote listener (:mod:`.listeners.remote`) takes a caller's identity from it, as
slurmctld does for ``srun`` from a login node.

A credential carries a payload, sealed with it: the client puts a digest of its request
there (:func:`.remote_wire.request_digest`), so a credential is good for that one request only.
Decoding also says when the credential expires (its encode time plus its time-to-live), so the
listener can remember it until then (munged's own replay cache is lost when munged restarts).

libmunge is called through ctypes, with one context per call: libmunge's contexts are not
to be shared between threads, and a call opens its own connection to munged anyway.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import time
from dataclasses import dataclass

from .errors import HpcPredictError

# munge.h: munge_opt_t and munge_err_t (stable since MUNGE 0.5)
_OPT_TTL = 4
_OPT_ENCODE_TIME = 6
_OPT_SOCKET = 8
EMUNGE_SUCCESS = 0
EMUNGE_SOCKET = 6
EMUNGE_CRED_INVALID = 14
EMUNGE_CRED_EXPIRED = 15
EMUNGE_CRED_REWOUND = 16
EMUNGE_CRED_REPLAYED = 17
#: What a credential of ours carries: a digest, never longer; the credential itself is a
#: few hundred base64 characters.
MAX_CREDENTIAL_CHARS = 4096
#: munged's default time-to-live, if a decoded credential's own cannot be read
DEFAULT_TTL_S = 300


class MungeError(HpcPredictError):
    """munged refused to make or accept a credential; ``code`` is libmunge's munge_err_t."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Credential:
    """What munged vouches for: who made the credential, and the payload sealed in it."""

    uid: int
    gid: int
    payload: bytes
    expires: float = 0.0    # wall clock: its encode time plus its time-to-live


_lib = None


def _libmunge():
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("munge") or "libmunge.so.2"
        try:
            lib = ctypes.CDLL(name)
        except OSError as error:
            raise MungeError(f"libmunge is not installed on this host ({error}): install MUNGE "
                             f"(Debian: apt install munge libmunge2), as every Slurm host has it", 0) from error
        lib.munge_ctx_create.restype = ctypes.c_void_p
        lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
        lib.munge_ctx_strerror.restype = ctypes.c_char_p
        lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
        lib.munge_strerror.restype = ctypes.c_char_p
        lib.munge_strerror.argtypes = [ctypes.c_int]
        lib.munge_encode.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        lib.munge_decode.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint32),
                                     ctypes.POINTER(ctypes.c_uint32)]
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.free.argtypes = [ctypes.c_void_p]
        setattr(lib, "free", libc.free)   # libc's free beside libmunge's functions (a CDLL types only its own)
        _lib = lib
    return _lib


class _Context:
    """One libmunge context, aimed at the munged of ``socket_path`` ("" = libmunge's default)."""

    def __init__(self, socket_path: str):
        self.lib = _libmunge()
        self.ctx = self.lib.munge_ctx_create()
        if not self.ctx:
            raise MungeError("libmunge: cannot create a context (out of memory)", 5)
        if socket_path:
            # variadic: the option's argument passed with its C type
            self.lib.munge_ctx_set(ctypes.c_void_p(self.ctx), ctypes.c_int(_OPT_SOCKET),
                                   ctypes.c_char_p(socket_path.encode()))

    def error(self, code: int) -> str:
        text = self.lib.munge_ctx_strerror(self.ctx) or self.lib.munge_strerror(code) or b"error"
        return text.decode(errors="replace")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.lib.munge_ctx_destroy(self.ctx)


def encode(payload: bytes, socket_path: str = "") -> str:
    """A credential of this process's uid/gid sealing ``payload``, made by the local munged."""
    with _Context(socket_path) as context:
        cred = ctypes.c_char_p()
        code = context.lib.munge_encode(ctypes.byref(cred), context.ctx, payload, len(payload))
        if code != EMUNGE_SUCCESS:
            raise MungeError(f"munged{' at ' + socket_path if socket_path else ''} could not make a "
                             f"credential: {context.error(code)}", code)
        try:
            value = cred.value
            assert value is not None, "munge_encode succeeded: it set the credential"
            return value.decode("ascii")
        finally:
            context.lib.free(ctypes.cast(cred, ctypes.c_void_p))


def decode(credential: str, socket_path: str = "") -> Credential:
    """Who made ``credential`` and its payload, as the local munged validates it; raises
    MungeError for a credential that is malformed, of another key, expired, or replayed."""
    if len(credential) > MAX_CREDENTIAL_CHARS or not credential.isascii() or "\0" in credential:
        raise MungeError("credential: not a MUNGE credential", 8)
    with _Context(socket_path) as context:
        buf, length = ctypes.c_void_p(), ctypes.c_int()
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        code = context.lib.munge_decode(credential.encode("ascii"), context.ctx, ctypes.byref(buf),
                                        ctypes.byref(length), ctypes.byref(uid), ctypes.byref(gid))
        try:
            payload = ctypes.string_at(buf.value, length.value) if buf.value else b""
        finally:
            if buf.value:
                context.lib.free(buf)   # allocated even for expired or replayed credentials
        if code != EMUNGE_SUCCESS:
            raise MungeError(context.error(code), code)
        ttl, encoded = ctypes.c_int(), ctypes.c_long()
        got_ttl = context.lib.munge_ctx_get(ctypes.c_void_p(context.ctx), ctypes.c_int(_OPT_TTL), ctypes.byref(ttl))
        got_time = context.lib.munge_ctx_get(ctypes.c_void_p(context.ctx), ctypes.c_int(_OPT_ENCODE_TIME),
                                             ctypes.byref(encoded))
        if got_ttl != EMUNGE_SUCCESS or got_time != EMUNGE_SUCCESS or encoded.value <= 0:
            expires = time.time() + DEFAULT_TTL_S     # the most munged would accept it for from now
        else:
            expires = float(encoded.value + max(ttl.value, 0))
        return Credential(uid=uid.value, gid=gid.value, payload=payload, expires=expires)

