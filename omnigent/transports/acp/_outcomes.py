"""How ACP answers: omnigent errors as JSON-RPC errors, a turn's end as a stop reason.

Pure functions (no I/O): :func:`rpc_error` maps an :class:`~omnigent.OmnigentError` to
the JSON-RPC error a client gets (a ``5xx`` cause is logged, never sent);
:func:`stop_reason` maps the terminal event of a prompt's turn to its ``stopReason``,
or to the error a failed turn answers with.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from ...errors import InvalidInput, NotFound, OmnigentError
from ...model import (
    TERMINAL_STATUSES,
    Event,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    SessionStatusChanged,
)
from ...rpc import INTERNAL_ERROR, RESOURCE_NOT_FOUND, RpcError

__all__ = ["REFUSED", "is_terminal", "iso", "rpc_error", "stop_reason"]

log = logging.getLogger("omnigent.transports.acp")

# A refusal that is neither bad params nor a missing resource (forbidden, conflict,
# closing): JSON-RPC leaves -32000..-32099 to servers; ``data.code`` has the slug.
REFUSED = -32001

# Failure codes that are ACP stop reasons rather than errors (see omnigent.errors).
_STOP_CODES = {
    "max_tokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "refusal": "refusal",
    "content_filter": "refusal",
    "max_steps": "max_turn_requests",
}


def rpc_error(exc: OmnigentError) -> RpcError:
    """The JSON-RPC error for an omnigent error (5xx causes are logged, never sent)."""
    data: dict[str, Any] = {"code": exc.code}
    if isinstance(exc, InvalidInput) and exc.details:
        data["details"] = [{"loc": d.loc, "msg": d.msg} for d in exc.details]
    if exc.status in (400, 422):
        return RpcError.invalid_params(exc.message, data)
    if isinstance(exc, NotFound):
        return RpcError(RESOURCE_NOT_FOUND, exc.message, data)
    if exc.status == 500:
        log.error("internal error answered over ACP", exc_info=exc)
        return RpcError(INTERNAL_ERROR, "Internal error", {"code": "internal_error"})
    return RpcError(REFUSED, exc.message, data)


def is_terminal(event: Event | None) -> bool:
    """Whether ``event`` ends a turn (its ``response.*`` end, or a terminal status)."""
    if isinstance(event, ResponseCompleted | ResponseFailed | ResponseCancelled):
        return True
    return isinstance(event, SessionStatusChanged) and event.status in TERMINAL_STATUSES


def stop_reason(terminal: Event | None) -> dict[str, Any]:
    """The ``session/prompt`` answer for the last event of its turn stream.

    Raises:
        RpcError: ``-32603`` with the turn's message for a failed turn; ``REFUSED``
        when the stream ended without the turn's end (the session was deleted).
    """
    if isinstance(terminal, ResponseCompleted):
        return {"stopReason": "end_turn"}
    if isinstance(terminal, ResponseCancelled | SessionStatusChanged):
        return {"stopReason": "cancelled"}  # a stop dropped the message, or cancelled it
    if isinstance(terminal, ResponseFailed):
        reason = _STOP_CODES.get(terminal.error.code)
        if reason is not None:
            return {"stopReason": reason}
        raise RpcError(INTERNAL_ERROR, terminal.error.message, {"code": terminal.error.code})
    raise RpcError(
        REFUSED, "the session ended before answering (was it deleted?)", {"code": "gone"}
    )


def iso(timestamp: float) -> str:
    """Unix seconds as ACP's ISO 8601 timestamps (``2026-12-01T08:52:58.843000Z``)."""
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z")
