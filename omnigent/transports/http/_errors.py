"""The HTTP error envelope, and the handlers that put every failure into it.

Every error body is ``{"error": {"code": SLUG, "message": TEXT}}``; a ``422`` adds
``"details": [{"loc", "msg"}]``. Deliberate errors (:class:`~omnigent.OmnigentError`)
answer with their own ``status`` and ``code``; Quart's own routing errors (unknown
route ``404``, ``405``, ``413``) use the same envelope; anything else is a bug, answered
``500`` with a fixed sentence while the cause goes to the log, never to the client.
That includes what is not an ``Exception`` at all (a ``SystemExit`` raised by code a
route called): the app class in :mod:`._app` catches it at the edge of the request, so
no answer is ever an empty ``500``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import attrs
from quart import Quart, Response, has_request_context, jsonify, request, websocket
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

from ...errors import ErrorDetail, InternalError, InvalidInput, OmnigentError
from ...model import unstructure

__all__ = [
    "INTERNAL_MESSAGE",
    "ErrorEnvelope",
    "envelope",
    "error_response",
    "install_error_handlers",
    "internal_error_response",
]

log = logging.getLogger("omnigent.transports.http")

INTERNAL_MESSAGE = "internal error; the cause was logged"


@attrs.frozen
class ErrorObject:
    """What went wrong: a ``code`` slug for programs, a ``message`` for people.

    ``details`` (a ``422`` only) names each field that failed, by path.
    """

    code: str
    message: str
    details: tuple[ErrorDetail, ...] | None = None


@attrs.frozen
class ErrorEnvelope:
    """Every error body."""

    error: ErrorObject


def envelope(
    code: str, message: str, details: Sequence[ErrorDetail] | None = None
) -> dict[str, Any]:
    """The wire form of an error; ``details`` only when given (422)."""
    error = ErrorObject(code, message, None if details is None else tuple(details))
    out: dict[str, Any] = unstructure(ErrorEnvelope(error))
    return out


def error_response(
    status: int, code: str, message: str, details: Sequence[ErrorDetail] | None = None
) -> Response:
    response: Response = jsonify(envelope(code, message, details))
    response.status_code = status
    return response


def _from_omnigent(error: OmnigentError) -> Response:
    if isinstance(error, InternalError) or (error.status >= 500 and not error.message):
        log.error("internal error: %s", error, exc_info=error)
        return error_response(500, InternalError.code, INTERNAL_MESSAGE)
    if error.status >= 500:
        # Every 5xx's cause is in the log (its message is already the client's).
        log.warning("HTTP %s %s: %s", error.status, error.code, error.message, exc_info=error)
    details = error.details if isinstance(error, InvalidInput) else None
    return error_response(error.status, error.code, error.message, details)


def _from_http(error: HTTPException) -> Response:
    status = error.code or 500
    name = (error.name or "error").lower().replace(" ", "_")
    if status >= 500:
        # Quart turns an exception no handler took into an InternalServerError: its
        # slug is the documented ``internal_error``, like every other 500.
        log.error("HTTP %s: %s", status, error, exc_info=error)
        return error_response(
            status, InternalError.code if status == 500 else name, INTERNAL_MESSAGE
        )
    if isinstance(error, NotFound):  # routing: our own lookups raise OmnigentError
        # A WebSocket upgrade to an unknown path has no request context, only its own.
        method, path = (
            (request.method, request.path) if has_request_context() else ("GET", websocket.path)
        )
        return error_response(404, name, f"no route for {method} {path}")
    response = error_response(status, name, error.description or error.name)
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        # RFC 9110: a 405 says which methods the resource has.
        response.headers["Allow"] = ", ".join(sorted(error.valid_methods))
    return response


def _from_unexpected(error: Exception) -> Response:
    # The cause may hold secrets (paths, keys, SQL): it goes to the log only.
    log.error("unhandled error in an HTTP route", exc_info=error)
    return error_response(500, InternalError.code, INTERNAL_MESSAGE)


def internal_error_response() -> Response:
    """The ``500`` envelope, built without an app context (for errors that escaped it)."""
    body = json.dumps(envelope(InternalError.code, INTERNAL_MESSAGE))
    return Response(body, status=500, content_type="application/json")


def install_error_handlers(app: Quart) -> None:
    """Route every failure of ``app`` through the envelope."""
    app.register_error_handler(OmnigentError, _from_omnigent)
    app.register_error_handler(HTTPException, _from_http)
    app.register_error_handler(Exception, _from_unexpected)
