"""The admin socket: SO_PEERCRED decides who may call admin RPCs.

gRPC Python cannot tell a servicer who is on the other end of a Unix socket. So admin calls
go through this small relay: it accepts on the admin socket, reads the caller's uid with
``SO_PEERCRED``, and connects to the daemon's gRPC socket from a client socket *bound to a
path that names the uid* inside a directory only the daemon can write
(``<private>/peer-uid-<uid>-<n>``). The servicer reads that path back from
``context.peer()``; nobody else can create such a path, so it cannot be forged. Any other
peer (the public socket) is never an admin.
"""
from __future__ import annotations

import itertools
import logging
import os
import pwd
import re
import selectors
import socket
import struct
import threading

logger = logging.getLogger(__name__)

_PEER = re.compile(r"^unix:(?P<dir>.+)/peer-uid-(?P<uid>\d+)-\d+$")


def peer_uid(peer: str, private_dir: str) -> int | None:
    """The uid a relayed peer string stands for, or None for any other peer."""
    match = _PEER.match(peer or "")
    if not match or os.path.realpath(match["dir"]) != os.path.realpath(private_dir):
        return None
    return int(match["uid"])


def admin_uids(names) -> frozenset[int]:
    uids = {0, os.getuid()}  # root and the daemon's own user
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            logger.debug("admin user %s does not exist here", name)
    return frozenset(uids)


class AdminRelay:
    """Relays admin-socket connections to the gRPC socket, tagging each with the caller's uid."""

    def __init__(self, listen_path: str, target_path: str, private_dir: str, *, mode: int = 0o666):
        self.listen_path, self.target_path, self.private_dir = listen_path, target_path, private_dir
        os.makedirs(private_dir, mode=0o700, exist_ok=True)
        os.chmod(private_dir, 0o700)
        if os.path.exists(listen_path):
            os.unlink(listen_path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(listen_path)
        os.chmod(listen_path, mode)
        self._listener.listen(64)
        self._counter = itertools.count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="admin-relay", daemon=True)

    def start(self) -> "AdminRelay":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        try:
            os.unlink(self.listen_path)
        except FileNotFoundError:
            pass

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), name="admin-relay-conn", daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        upstream = None
        bound = ""
        try:
            creds = client.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", creds)
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            bound = os.path.join(self.private_dir, f"peer-uid-{uid}-{next(self._counter)}")
            upstream.bind(bound)
            upstream.connect(self.target_path)
            os.unlink(bound)  # the kernel keeps the name on the connection; the file is not needed
            bound = ""
            self._pump(client, upstream)
        except OSError as error:
            logger.warning("admin relay connection failed: %s", error)
        finally:
            if bound:
                try:
                    os.unlink(bound)
                except FileNotFoundError:
                    pass
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        with selectors.DefaultSelector() as selector:
            selector.register(a, selectors.EVENT_READ)
            selector.register(b, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    peers[key.fileobj].sendall(data)
