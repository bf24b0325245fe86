"""One log line per HTTP request: method, path, status, duration, and its session.

:class:`RequestLog` wraps the ASGI app (outermost, so it sees every answer — the
fence's refusals, the error envelopes, the streams) and writes one INFO record on
``omnigent.http.requests`` when a request's answer has been sent to its end (a stream:
when it ends). The line holds the method, the path — never the query string, which
may carry a token — cut to 200 characters with anything unprintable escaped, the
status (``0``: the client left before any answer), the duration and, when the path
names one, the session id. No header and no body is ever logged.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from ...observability import REQUESTS_LOGGER, log_fields

__all__ = ["RequestLog"]

log = logging.getLogger(REQUESTS_LOGGER)

_MAX_PATH = 200
_SESSION = re.compile(r"^/(?:v1/sessions|approve)/(conv_[A-Za-z0-9_-]{1,100})(?:/|$)")


def _printable(path: str) -> str:
    cut = path if len(path) <= _MAX_PATH else path[:_MAX_PATH] + "…"
    return cut if cut.isprintable() else cut.encode("unicode_escape").decode("ascii")


class RequestLog:
    """ASGI middleware: the request log line (module docstring)."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self._app(scope, receive, send)
            return
        started = time.monotonic()
        status = 0

        async def sending(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            seconds = time.monotonic() - started
            path = _printable(scope.get("path", ""))
            method = scope.get("method", "?")
            found = _SESSION.match(scope.get("path", ""))
            session_id = found.group(1) if found else None
            log.info(
                "%s %s %d %.1fms%s",
                method,
                path,
                status,
                seconds * 1000,
                f" session={session_id}" if session_id else "",
                extra=log_fields(
                    method=method,
                    path=path,
                    status=status,
                    duration_ms=round(seconds * 1000, 3),
                    session_id=session_id,
                ),
            )
