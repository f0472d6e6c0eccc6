"""The CLI's side of the wire: one JSON line to the daemon's local socket, with a deadline.

The local socket (:mod:`.listeners.local_socket`) is where the kernel tells the daemon who calls, so the
CLI asks there for everything: a user's ``predict`` and an admin's ``status`` alike; the
daemon decides what the caller may do. Errors name the real cause: no daemon, a socket the
caller may not open, a call the daemon refused. On a host without the daemon,
:class:`RemoteClient` asks the controller's remote listener, signing each request with MUNGE
and believing only answers the daemon's user signed (:mod:`.remote_wire`).
"""
from __future__ import annotations

import json
import os
import pwd
import socket
import time

from google.protobuf import json_format

from . import munge
from .config import SITE_CONFIG, host_port
from .errors import DaemonUnavailable, HpcPredictError, PermissionDenied
from .remote_wire import HEADER_BYTES, FrameError, frame, parse_header, reply_digest, request_digest
from ..proto.v1 import hpcpredict_pb2 as pb

_SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
_REPLIES = {method.name: getattr(pb, method.output_type.name) for method in _SERVICE.methods}


#: Where contrib/systemd and ADMIN.md put the local socket.
SITE_SOCKET = "/run/hpcpredict/hook.sock"


def resolve_socket(cli_socket: str | None, config) -> str:
    """--socket, else $HPCPREDICT_SOCKET, else the config's local socket, else (when that does
    not exist) the site's socket of contrib/systemd, so users need no configuration."""
    path = cli_socket or os.environ.get("HPCPREDICT_SOCKET")
    if path:
        return path
    path = config.daemon.hook_socket
    if (not path or not os.path.exists(path)) and os.path.exists(SITE_SOCKET):
        return SITE_SOCKET
    if not path:
        raise DaemonUnavailable("the daemon's local socket is off ([daemon] hook_socket is empty): "
                                "pass --socket PATH")
    return path


def user_client(cli_socket: str | None, config, *, timeout: float = 10.0) -> "DaemonClient":
    """The client for a user's call: the local socket when one is named or exists on this host,
    else the controller's remote listener of ``[client] remote`` (a login or compute node)."""
    if not cli_socket and not os.environ.get("HPCPREDICT_SOCKET") and config.client.remote:
        path = config.daemon.hook_socket
        if not (path and os.path.exists(path)) and not os.path.exists(SITE_SOCKET):
            return RemoteClient(config.client.remote, munge_socket=config.daemon.munge_socket,
                                daemon_user=config.client.daemon_user, timeout=timeout)
    return DaemonClient(resolve_socket(cli_socket, config), timeout=timeout)


class DaemonClient:
    def __init__(self, socket_path: str, *, timeout: float = 10.0):
        self.socket_path = socket_path
        self.timeout = timeout

    def close(self) -> None:
        pass   # one connection per call: nothing held between calls

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, method: str, request):
        """Send ``request`` for RPC ``method``; the reply message, or an HpcPredictError."""
        line = json.dumps({"method": method, "request": json_format.MessageToDict(
            request, preserving_proto_field_name=True)}, separators=(",", ":")).encode() + b"\n"
        reply = self._exchange(line)
        if not isinstance(reply, dict):
            raise HpcPredictError(f"{method}: the daemon at {self.socket_path} answered something that is not a reply")
        if not reply.get("ok"):
            code, error = reply.get("code", ""), reply.get("error", "refused")
            if code == "PERMISSION_DENIED":
                raise PermissionDenied(f"{method}: permission denied: {error}")
            if error == "busy":
                raise DaemonUnavailable(f"{method}: the daemon is busy; try again")
            raise HpcPredictError(f"{method}: {code + ': ' if code else ''}{error}")
        try:
            return json_format.ParseDict(reply.get("response", {}), _REPLIES[method](), ignore_unknown_fields=True)
        except json_format.ParseError as error:
            raise HpcPredictError(f"{method}: reply does not decode: {error}") from error

    def _exchange(self, line: bytes):
        deadline = time.monotonic() + self.timeout
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(self.timeout)
            try:
                conn.connect(self.socket_path)
            except (FileNotFoundError, ConnectionRefusedError) as error:
                raise DaemonUnavailable(
                    f"no daemon at {self.socket_path}. On a login or compute node, `hpcpredict predict` asks the "
                    f"controller's daemon once [client] remote is set in {SITE_CONFIG} (ask your admins; ADMIN.md, "
                    f"\"Users on login nodes\"), or HPCPREDICT_CLIENT_REMOTE=HOST:PORT; admin commands run on the "
                    f"daemon's host. On the daemon's host: start `hpcpredictd`, or pass --socket") from error
            except PermissionError as error:
                raise DaemonUnavailable(
                    f"permission denied opening {self.socket_path} as user {_me()}: the daemon runs, but the "
                    f"socket or a directory above it does not let you in (ADMIN.md: RuntimeDirectoryMode=0755, "
                    f"[daemon] hook_socket_mode = 0o666)") from error
            except socket.timeout as error:
                raise DaemonUnavailable(
                    f"no answer from the daemon at {self.socket_path} within {self.timeout:g} s") from error
            except OSError as error:
                raise DaemonUnavailable(f"daemon at {self.socket_path}: {error}") from error
        except BaseException:
            conn.close()
            raise
        data = self._reply_to(conn, line, deadline)
        try:
            return json.loads(data)
        except ValueError as error:
            raise HpcPredictError(f"the daemon at {self.socket_path} answered something that is not JSON") from error

    def _reply_to(self, conn: socket.socket, line: bytes, deadline: float) -> bytes:
        """Send ``line`` on the connected ``conn`` and read one reply line by ``deadline``; closes ``conn``."""
        data = b""
        try:
            conn.sendall(line)
            while not data.endswith(b"\n"):
                conn.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
        except socket.timeout as error:
            raise DaemonUnavailable(f"no answer from the daemon at {self.socket_path} within {self.timeout:g} s") from error
        except OSError as error:
            raise DaemonUnavailable(f"daemon at {self.socket_path}: {error}") from error
        finally:
            conn.close()
        if not data:
            raise DaemonUnavailable(f"the daemon at {self.socket_path} closed the connection without an answer")
        return data

    def predict(self, request: pb.JobRequest) -> pb.Estimate:
        return self.call("Predict", request)


def _me() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def admin_client(socket_path: str, *, timeout: float = 60.0) -> DaemonClient:
    """A client for admin calls: the same local socket, with a deadline long enough for a reload."""
    return DaemonClient(socket_path, timeout=timeout)


def reload_models(socket_path: str) -> pb.ReloadReply:
    """ReloadModels over the local socket (an admin call); raises HpcPredictError."""
    with admin_client(socket_path) as client:
        return client.call("ReloadModels", pb.ReloadRequest())


class RemoteClient(DaemonClient):
    """The CLI's side of the remote listener (wire format: :mod:`.remote_wire`): each request
    signed with a credential from this host's munged, sent to ``address`` ("host:port"); a
    reply is believed only with a credential the daemon's user (``daemon_user``, a name or a
    uid) made for this request and this reply, as this host's munged decodes it."""

    #: the most a reply may be: an Estimate is a few KiB
    MAX_REPLY_BYTES = 4 << 20

    def __init__(self, address: str, *, munge_socket: str = "", daemon_user: str = "hpcpredict",
                 timeout: float = 10.0):
        super().__init__(address, timeout=timeout)
        self.address = host_port(address)
        self.munge_socket = munge_socket
        self.daemon_user = daemon_user

    def _daemon_uid(self) -> int:
        if self.daemon_user.isdigit():
            return int(self.daemon_user)
        try:
            return pwd.getpwnam(self.daemon_user).pw_uid
        except KeyError:
            raise HpcPredictError(f"[client] daemon_user {self.daemon_user!r} is not a user of this host: the reply "
                                  f"of the daemon at {self.socket_path} cannot be checked (set it to the daemon's "
                                  f"user, or its uid; ADMIN.md, \"Users on login nodes\")") from None

    def _exchange(self, line: bytes):
        body = line
        daemon_uid = self._daemon_uid()
        try:
            credential = munge.encode(request_digest(body), self.munge_socket)
        except munge.MungeError as error:
            raise DaemonUnavailable(f"{error}: the remote daemon at {self.socket_path} learns who you are from "
                                    f"MUNGE, so this host's munged must run with the site's key") from error
        request = frame(body, credential)
        header = request[:request.index(b"\n")]
        try:
            conn = socket.create_connection(self.address, timeout=self.timeout)
        except socket.timeout as error:
            raise DaemonUnavailable(f"no answer from the daemon at {self.socket_path} within {self.timeout:g} s "
                                    f"(a firewall between this host and the controller? ADMIN.md, "
                                    f"\"Users on login nodes\")") from error
        except OSError as error:
            raise DaemonUnavailable(f"cannot reach the daemon at {self.socket_path}: {error.strerror or error} "
                                    f"(is [daemon] remote_listen set on the controller, and the port open to "
                                    f"this host? ADMIN.md, \"Users on login nodes\")") from error
        deadline = time.monotonic() + self.timeout
        received = bytearray()
        try:
            # the header first; the body (the job script) only once the daemon said go ahead
            answer = self._verified(self._next_frame(conn, header + b"\n", received, deadline), header, daemon_uid)
            if answer == {"ok": True, "continue": True}:
                answer = self._verified(self._next_frame(conn, body, received, deadline), header, daemon_uid)
        finally:
            conn.close()
        return answer

    def _verified(self, reply_frame: tuple[str, bytes], header: bytes, daemon_uid: int):
        """The reply object of a frame, if the daemon's user signed it for this request; else raises."""
        signature, reply = reply_frame
        try:
            answer = json.loads(reply)
        except ValueError:
            answer = None
        if signature == "-":
            # refused before any credential was checked: only "busy" is taken (it asks nothing of the user)
            if answer == {"ok": False, "error": "busy"}:
                raise DaemonUnavailable(f"Predict: the daemon at {self.socket_path} is busy; try again")
            raise self._not_the_daemon("its answer carries no credential; if the daemon's munged is down, "
                                       "`hpcpredict status` on the controller lists the fault munge", answer)
        try:
            vouched = munge.decode(signature, self.munge_socket)
        except munge.MungeError as error:
            if error.code == munge.EMUNGE_SOCKET:
                raise DaemonUnavailable(f"{error}: this host's munged checks who answers") from error
            if error.code == munge.EMUNGE_CRED_INVALID:
                raise self._not_the_daemon(f"its credential: {error}: every host needs the site's munge.key, and "
                                           f"this host's munged may have another one", answer) from error
            raise self._not_the_daemon(f"its credential: {error}", answer) from error
        if vouched.uid != daemon_uid:
            raise self._not_the_daemon(f"its credential is of uid {vouched.uid}, not of the daemon's user "
                                       f"{self.daemon_user} (uid {daemon_uid})", answer)
        if vouched.payload != reply_digest(header, reply):
            raise self._not_the_daemon("its credential was made for another request or reply", answer)
        if answer is None:
            raise HpcPredictError(f"the daemon at {self.socket_path} answered something that is not JSON")
        return answer

    def _not_the_daemon(self, why: str, answer) -> HpcPredictError:
        return HpcPredictError(
            f"refusing the answer from {self.socket_path}: it does not come from the daemon ({why}). Someone "
            f"else may hold that port on the controller: nothing of it is shown. Tell your admins "
            f"(ADMIN.md, \"Users on login nodes\")")

    def _next_frame(self, conn: socket.socket, data: bytes, received: bytearray, deadline: float) -> tuple[str, bytes]:
        """Send ``data``, then read the next reply frame by ``deadline`` -> (credential, body);
        what follows it stays in ``received``."""
        try:
            try:
                conn.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass    # refused before it read everything: the reply is still there to read
            while True:
                end = received.find(b"\n")
                if end >= 0:
                    try:
                        length, credential = parse_header(bytes(received[:end]), max_length=self.MAX_REPLY_BYTES)
                    except FrameError:
                        raise self._not_the_daemon("its answer is not an HPCPREDICT/2 reply", None) from None
                    if len(received) - end - 1 >= length:
                        reply = bytes(received[end + 1:end + 1 + length])
                        del received[:end + 1 + length]
                        return credential, reply
                elif len(received) > HEADER_BYTES:
                    raise self._not_the_daemon("its answer is not an HPCPREDICT/2 reply", None)
                conn.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = conn.recv(1 << 16)
                if not chunk:
                    break
                received += chunk
        except socket.timeout as error:
            raise DaemonUnavailable(f"no answer from the daemon at {self.socket_path} within {self.timeout:g} s") from error
        except OSError as error:
            raise DaemonUnavailable(f"daemon at {self.socket_path}: {error}") from error
        if not received:
            raise DaemonUnavailable(f"the daemon at {self.socket_path} closed the connection without an answer")
        raise self._not_the_daemon("its answer ended before its end", None)
