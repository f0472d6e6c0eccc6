"""The JSON call both the local socket and the remote listener answer: one object in, one out.

::

    {"method": "Predict", "request": {<the RPC's request message in proto3 JSON>}}
    -> {"ok": true, "response": {<its reply message, snake_case names, every field>}}
    -> {"ok": false, "error": "job.user: required", "code": "INVALID_ARGUMENT"}

The local socket (:mod:`.local_socket`) reads it as a line, the remote listener
(:mod:`.remote`) as the body of a frame whose credential munged vouched for; both hand the
message to the same service with the caller's uid. What they share is here: the RPCs and their
request messages (:data:`REQUESTS`, read from the proto's service, so an RPC added there is
served by both), the envelope (:func:`read_envelope`), the item counts checked before a message
is built (:func:`too_many_items`, against the ``[limits]`` section's bounds on a request),
parsing (:func:`parse_request`), the call and its reply object (:func:`call`) and the reply's
bytes (:func:`encode`, :data:`BUSY_REPLY`).
What is each listener's own stays with it: who the caller is, which calls it may make before
anything of its request is parsed, how a refusal is counted.

A request that cannot be served raises :class:`Refused`, whose ``reply`` is the answer::

    >>> try:
    ...     read_envelope(b'{"method": "Shutdown"}', REQUESTS)
    ... except Refused as refused:
    ...     encode(refused.reply)[:38]
    b'{"ok":false,"error":"method: must be o'
"""
from __future__ import annotations

import json
import logging
from typing import Iterable

from google.protobuf import json_format

from ..service import error_message, status_name
from ...proto.v1 import hpcpredict_pb2 as pb

logger = logging.getLogger(__name__)

_SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
#: RPC name -> its request message class: every RPC of the Predictor service, in the proto's order.
REQUESTS = {method.name: getattr(pb, method.input_type.name) for method in _SERVICE.methods}
BUSY_REPLY = {"ok": False, "error": "busy"}
#: Explicit communication messages an unprivileged caller's request may list: parsing one costs
#: ~5 us, and no user tool sends them ([limits] max_messages still applies to everyone).
USER_MAX_MESSAGES = 1024
#: The most dimensions a process grid may have (as jobspec checks after parsing).
_MAX_GRID = 8


class Refused(Exception):
    """A request answered without a call: ``reply`` says why; ``reason`` is ``"limits"`` when
    it has more items than ``[limits]`` allow, else ``"request"``."""

    def __init__(self, reply: dict, reason: str = "request"):
        super().__init__(reply["error"])
        self.reply = reply
        self.reason = reason


def encode(reply: dict) -> bytes:
    """A reply object as the line both listeners send."""
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def read_envelope(data: bytes, listed: Iterable[str]) -> tuple[str, dict]:
    """The RPC a request names and its request (a JSON object, not yet parsed); Refused when
    ``data`` is not a JSON object naming an RPC (``listed``: the RPCs its reply names) with an
    object as its request."""
    try:
        envelope = json.loads(data)
    except RecursionError:
        raise Refused({"ok": False, "error": "request is not JSON we accept: nested too deeply"}) from None
    except (UnicodeDecodeError, ValueError) as error:
        raise Refused({"ok": False, "error": f"request is not JSON: {error}"}) from None
    if not isinstance(envelope, dict):
        raise Refused({"ok": False, "error": "request must be a JSON object"})
    method = envelope.get("method")
    if not isinstance(method, str) or method not in REQUESTS:   # a list or an object is unhashable
        raise Refused({"ok": False, "error": f"method: must be one of {', '.join(listed)}, got {method!r}"})
    body = envelope.get("request", {})
    if not isinstance(body, dict):
        raise Refused({"ok": False, "error": "request: must be a JSON object"})
    return method, body


def parse_request(method: str, body: dict, bounds, privileged: bool):
    """The request message of ``method`` from its JSON ``body``, its item counts checked first
    (:func:`too_many_items` against ``bounds``, the ``[limits]`` section); Refused when it has
    too many items or does not parse."""
    too_many = too_many_items(body if method == "Predict" else body.get("request"), bounds, privileged)
    if too_many:
        raise Refused({"ok": False, "error": too_many, "code": "INVALID_ARGUMENT"}, "limits")
    try:
        return json_format.ParseDict(body, REQUESTS[method]())
    except json_format.ParseError as error:
        raise Refused({"ok": False, "error": f"request: {error}", "code": "INVALID_ARGUMENT"}) from None
    except RecursionError:
        raise Refused({"ok": False, "error": "request: nested too deeply", "code": "INVALID_ARGUMENT"}) from None


def call(service, method: str, request, caller_uid: int | None, origin: str, detail: str = "") -> dict:
    """The service's answer to ``request`` from ``caller_uid`` as a reply object; its refusals
    (and a bug, logged there) as ``ok: false`` with the status name gRPC would use, logged as
    ``<origin> <method><detail> refused``."""
    try:
        response = service.call(method, request, caller_uid)
    except Exception as error:   # the service's errors, and a bug (logged there): keep serving
        code = status_name(error)
        logger.info("%s %s%s refused (%s): %s", origin, method, detail, code, error)
        return {"ok": False, "error": error_message(method, error), "code": code}
    return {"ok": True, "response": json_format.MessageToDict(
        response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)}


def too_many_items(request, bounds, privileged: bool) -> str:
    """Why the JobRequest ``request`` (a parsed JSON object) has more items than ``bounds`` (the
    ``[limits]`` section: a request's size, not a job's time limits) allow ("" = it does not):
    len() of each list and map, before any of them is turned into a message (that costs
    microseconds per item). The same rules as jobspec's, checked earlier."""
    if not isinstance(request, dict):
        return ""
    for name, limit, what in (("argv", bounds.max_inputs, "arguments"), ("inputs", bounds.max_inputs, "inputs"),
                              ("environment", bounds.max_environment, "variables")):
        items = request.get(name)
        if isinstance(items, (list, dict)) and len(items) > limit:
            return f"{name}: {len(items)} {what} exceed the limit {limit}"
    comm = request.get("comm")
    if isinstance(comm, dict):
        grid, messages = comm.get("grid"), comm.get("messages")
        if isinstance(grid, list) and len(grid) > _MAX_GRID:
            return f"comm.grid: at most {_MAX_GRID} dimensions"
        limit = bounds.max_messages if privileged else min(bounds.max_messages, USER_MAX_MESSAGES)
        if isinstance(messages, list) and len(messages) > limit:
            return f"comm.messages: {len(messages)} messages exceed the limit {limit}"
    return ""
