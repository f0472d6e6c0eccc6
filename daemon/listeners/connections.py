"""The mechanics the daemon's small socket servers share: one thread, one ``selectors`` loop.

The local socket (:mod:`.local_socket`), the remote listener (:mod:`.remote`) and the metrics
endpoint (:mod:`.metrics`) each serve many short connections from one thread, so a slow client
holds no thread. What they share is here: the listener, the wake-up pair other threads use to
interrupt the wait, accepts (paused, not spun on, while descriptors run out), which events a
connection waits for, reading into its buffer, sending what is unsent, closing, and closing
everything when the loop ends. What each one decides stays with it: who may connect and how
many (``_admit``), what a connection's bytes mean (``_on_event``), what a turn does besides
(``_turn``) and what a loop error costs (``_loop_failed``).

A server subclasses :class:`SelectorServer`, binds with :func:`listening_socket`, hands the
listener to :meth:`SelectorServer._serve` and stops with :meth:`SelectorServer._stop_loop`.
"""
from __future__ import annotations

import errno
import logging
import os
import selectors
import socket
import threading
import time

logger = logging.getLogger(__name__)

LISTENER = "listener"   # selector data of the listener
WAKE = "wake"           # ... and of the wake-up pair's reading end
READ_BYTES = 65536
# accept() failures that mean "no descriptors or memory now", not "the listener is broken"
ACCEPT_PAUSE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class Connection:
    """One client: bytes received and not yet used, the reply not yet sent, the moment it is
    cut off, and what the selector waits for on it (0: it is not registered)."""

    __slots__ = ("sock", "received", "unsent", "deadline", "events", "closed")

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock = sock
        self.received = bytearray()
        self.unsent = bytearray()
        self.deadline = deadline
        self.events = 0
        self.closed = False


def listening_socket(family: int, address, backlog: int, *, mode: int | None = None) -> socket.socket:
    """A non-blocking stream socket listening on ``address``: a Unix path (given ``mode`` before
    it listens) or a TCP address (SO_REUSEADDR: a restart does not wait for TIME_WAIT)."""
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        if family == socket.AF_UNIX:
            listener.bind(address)
            if mode is not None:
                os.chmod(address, mode)
        else:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
        listener.listen(backlog)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener


def send_best_effort(sock: socket.socket, data: bytes, *, half_close: bool = False) -> None:
    """Send ``data`` once (then, if asked, end our side: TCP delivers it before the close)."""
    try:
        sock.send(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass    # a client that went away or does not read gets no explanation


def refuse(sock: socket.socket, reply: bytes, *, half_close: bool = False) -> None:
    """Answer ``reply`` and close. What arrived of the request is read first: closing a socket
    with unread data resets the connection, and the client would see the reset (ECONNRESET)
    instead of the answer."""
    try:
        sock.recv(READ_BYTES)
    except OSError:
        pass
    send_best_effort(sock, reply, half_close=half_close)
    sock.close()


class SelectorServer:
    """The loop and the connection mechanics; a subclass supplies what is its own (above)."""

    name = "server"             # in log messages
    thread_name = "server"      # the loop's thread

    def __init__(self) -> None:
        # made by _serve(), used only by the loop it starts (and _stop_loop(), after a start)
        self._selector: selectors.BaseSelector
        self._wake_reader: socket.socket
        self._wake_writer: socket.socket
        self._listener: socket.socket | None = None    # None once it stops accepting
        self._thread: threading.Thread | None = None
        self._connections: dict[int, Connection] = {}   # by descriptor
        self._accept_paused_until = 0.0
        self._stop_at: float | None = None     # set by _stop_loop(): answer what is in flight until then

    # ------------------------------------------------------------------ to supply
    def _turn(self) -> bool:
        """One turn of the loop; True once stopped."""
        raise NotImplementedError

    def _accept(self, now: float) -> None:
        """The listener is readable: :meth:`_accept_connections` with this server's count."""
        raise NotImplementedError

    def _admit(self, sock: socket.socket, peer, now: float) -> None:
        """A connection accepted: refuse it, or make it a Connection in ``_connections`` and watch it."""
        raise NotImplementedError

    def _on_event(self, connection: Connection, mask: int) -> None:
        raise NotImplementedError

    def _forget(self, connection: Connection) -> None:
        """What this server counts of ``connection``, undone as it closes."""

    def _loop_failed(self, error: Exception, failures: int) -> bool:
        """A turn raised ``error`` (``failures`` turns in a row): False ends the loop."""
        logger.exception("%s loop failed", self.name)
        return False

    # ------------------------------------------------------------------ lifecycle
    def _serve(self, listener: socket.socket) -> None:
        """Run the loop over ``listener`` from a daemon thread."""
        self._listener = listener
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ, LISTENER)
        self._selector.register(self._wake_reader, selectors.EVENT_READ, WAKE)
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def _stop_loop(self, grace: float | None) -> bool:
        """Tell the loop to stop (``_stop_at``: now + ``grace``) and wait for it; False if it was not running."""
        thread, self._thread = self._thread, None
        if thread is None:
            return False
        self._stop_at = time.monotonic() + (grace or 0.0)
        self._wake()
        thread.join(timeout=(grace or 0.0) + 5.0)
        if thread.is_alive():
            logger.error("%s did not stop within its grace", self.name)
        return True

    def _wake(self) -> None:
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass    # already awake (the pair's buffer is full), or closed at stop

    def _drain_wakes(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _run(self) -> None:
        failures = 0
        try:
            while True:
                try:
                    if self._turn():
                        return
                    failures = 0
                except Exception as error:   # a bug or a broken resource: the server's policy decides
                    failures += 1
                    if not self._loop_failed(error, failures):
                        return
                    time.sleep(min(0.002 * 2 ** failures, 0.5))   # not a hot loop of failures
        finally:
            try:
                self._close_all()
            except Exception:
                logger.exception("%s: closing its connections failed", self.name)

    def _close_all(self) -> None:
        for connection in list(self._connections.values()):
            self._close(connection)
        self._unlisten()
        self._wake_reader.close()
        self._wake_writer.close()
        self._selector.close()

    # ------------------------------------------------------------------ the loop's parts
    def _dispatch(self, events, now: float) -> None:
        """Handle what ``select`` returned."""
        for key, mask in events:
            data = key.data
            if data is LISTENER:
                self._accept(now)
            elif data is WAKE:
                self._drain_wakes()
            elif not data.closed:   # (closed earlier in this turn)
                self._on_event(data, mask)

    def _accept_connections(self, now: float, count: int) -> int:
        """Accept up to ``count`` waiting connections, each handed to :meth:`_admit`; how many
        were taken (fewer than ``count``: the backlog is empty, or accept failed)."""
        listener = self._listener
        assert listener is not None, "only its own event calls this, and only while it listens"
        for taken in range(count):
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return taken
            except OSError as error:
                self._accept_failed(error, now)
                return taken
            self._admit(sock, peer, now)
        return count

    def _accept_failed(self, error: OSError, now: float) -> None:
        """Out of descriptors or memory: stop accepting for a second (the kernel keeps the
        backlog). Any other failure is raised."""
        if error.errno not in ACCEPT_PAUSE_ERRNOS:
            raise error
        logger.warning("%s cannot accept (%s); pausing accepts for 1 s", self.name, error)
        self._pause_accepts(now + 1.0)

    def _pause_accepts(self, until: float) -> None:
        assert self._listener is not None, "only accepting pauses"
        self._selector.unregister(self._listener)
        self._accept_paused_until = until

    def _resume_accepts(self, now: float) -> None:
        if self._accept_paused_until and now >= self._accept_paused_until and self._listener is not None:
            self._accept_paused_until = 0.0
            self._selector.register(self._listener, selectors.EVENT_READ, LISTENER)

    def _unlisten(self) -> None:
        """Stop accepting for good."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        if not self._accept_paused_until:
            self._selector.unregister(listener)
        listener.close()

    # ------------------------------------------------------------------ connections
    def _watch(self, connection: Connection, events: int) -> None:
        """Wait for ``events`` on the connection (0: for nothing)."""
        if events == connection.events:
            return
        if not events:
            self._selector.unregister(connection.sock)
        elif not connection.events:
            self._selector.register(connection.sock, events, connection)
        else:
            self._selector.modify(connection.sock, events, connection)
        connection.events = events

    def _receive(self, connection: Connection, size: int = READ_BYTES) -> bool:
        """Add what arrived to ``connection.received``; False when nothing did (and the
        connection is closed if its client closed or failed)."""
        try:
            data = connection.sock.recv(size)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            data = b""
        if not data:
            self._close(connection)
            return False
        connection.received += data
        return True

    def _send_unsent(self, connection: Connection) -> bool:
        """Send what the socket takes of ``connection.unsent``; True when all of it is out. A
        send that fails (the client went away) closes the connection."""
        try:
            sent = connection.sock.send(connection.unsent)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._close(connection)
            return False
        del connection.unsent[:sent]
        return not connection.unsent

    def _close(self, connection: Connection) -> None:
        if connection.closed:
            return
        connection.closed = True
        self._connections.pop(connection.sock.fileno(), None)
        self._watch(connection, 0)
        self._forget(connection)
        connection.sock.close()
