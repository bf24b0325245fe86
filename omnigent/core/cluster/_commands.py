"""Requests between servers: how a forwarded call and its answer travel as JSON.

A call forwarded to a session's owner (:meth:`~._shared.SharedOwnership.forward`)
is a command row ``{kind, session_id, payload}``; the owner answers with a ``reply``
row whose payload is one of::

    {"ok": VALUE}                           the call returned VALUE
    {"moved": true}                         this server does not own the tree (any more)
    {"error": {"code", "message", ...}}     the call raised an OmnigentError

An error comes back to the caller as the same :class:`~omnigent.errors.OmnigentError`
class (found by its ``code``), so callers and transports see exactly what a local
call would have raised. Anything else the owner hits is logged there and answered
as an internal error, never with its details.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ... import errors
from ...errors import ErrorDetail, InternalError, InvalidInput, OmnigentError
from ._ownership import Moved

__all__ = ["decode_reply", "encode_error", "encode_moved", "encode_value"]

log = logging.getLogger(__name__)


def encode_value(value: Any) -> str:
    return json.dumps({"ok": value})


def encode_moved() -> str:
    return json.dumps({"moved": True})


def encode_error(exc: OmnigentError) -> str:
    body: dict[str, Any] = {"code": exc.code, "message": exc.message, "status": exc.status}
    if isinstance(exc, InvalidInput):
        body["details"] = [{"loc": d.loc, "msg": d.msg} for d in exc.details]
    return json.dumps({"error": body})


def decode_reply(text: str) -> Any:
    """The value a reply carries.

    Raises:
        Moved: the owner does not own the tree. OmnigentError: what the owner raised.
    """
    try:
        reply = json.loads(text)
    except ValueError:
        log.exception("an unreadable reply from another server: %.200r", text)
        raise InternalError("another server answered unreadably") from None
    if "ok" in reply:
        return reply["ok"]
    if reply.get("moved"):
        raise Moved()
    raise _error(reply.get("error") or {})


def _error(body: dict[str, Any]) -> OmnigentError:
    """Rebuild the owner's error as its own class (by ``code``), with its message."""
    code = str(body.get("code", "internal_error"))
    message = str(body.get("message", "another server failed"))
    cls = _classes().get(code, InternalError)
    exc: OmnigentError = cls.__new__(cls)
    OmnigentError.__init__(exc, message)
    if isinstance(exc, InvalidInput):
        details = body.get("details") or []
        exc.details = tuple(ErrorDetail(str(d["loc"]), str(d["msg"])) for d in details)
    return exc


def _classes() -> dict[str, type[OmnigentError]]:
    found: dict[str, type[OmnigentError]] = {}
    pending: list[type[OmnigentError]] = [OmnigentError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    # Only the public tree: a code is a contract, a private subclass is not.
    return {code: cls for code, cls in found.items() if getattr(errors, cls.__name__, None)}
