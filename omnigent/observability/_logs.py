"""The log lines omnigent writes for machines and people, and how they are formatted.

Two records are written at INFO for every piece of work, each one line:

- one per HTTP request (logger ``omnigent.http.requests``): method, path (never the
  query string), status, duration, and the session id when the path names one;
- one per turn end (logger ``omnigent.turns``): session, response, harness, terminal
  status, duration, tokens and cost, and the error code of a failed turn.

Each carries its values in ``record.fields`` (a dict), so :class:`JsonFormatter` puts
them in the JSON object as they are, and the text form says them in words. **Nothing
secret is in a line**: no header, no query string, no body, no message content, no
tool arguments — ids, names, numbers and error codes only (a failed turn's message
is not logged here; the turn's own log line for a crash holds the traceback, at
ERROR). The tests check it with a key and a prompt that must not appear.

:func:`configure_logging` is what the command line calls: stderr, a level from
``-v``/``-q``, text or JSON.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any, Literal

__all__ = [
    "REQUESTS_LOGGER",
    "TURNS_LOGGER",
    "JsonFormatter",
    "LogFormat",
    "configure_logging",
    "log_fields",
]

REQUESTS_LOGGER = "omnigent.http.requests"
TURNS_LOGGER = "omnigent.turns"

LogFormat = Literal["text", "json"]

_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_fields(**fields: Any) -> dict[str, Any]:
    """``extra=`` for a record whose values a JSON line shows as fields (None left out)."""
    return {"fields": {k: v for k, v in fields.items() if v is not None}}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (ISO 8601, UTC), ``level``, ``logger``,
    ``message``, the record's ``fields``, and ``traceback`` when it has one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                out.setdefault(str(key), value)
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["traceback"] = record.exc_text
        return json.dumps(out, default=str, ensure_ascii=False)


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def level_of(verbosity: int) -> int:
    """``-q`` (−1 and below) ERROR, default WARNING, ``-v`` INFO, ``-vv`` DEBUG."""
    if verbosity < 0:
        return logging.ERROR
    return (logging.WARNING, logging.INFO)[verbosity] if verbosity < 2 else logging.DEBUG


@contextlib.contextmanager
def configure_logging(verbosity: int, log_format: LogFormat = "text") -> Iterator[None]:
    """Log to stderr at the level ``verbosity`` says (:func:`level_of`), as text or JSON.

    The root logger is restored on exit, so calling a command in-process (as the tests
    do) leaves logging as it found it.
    """
    level = level_of(verbosity)
    root = logging.getLogger()
    handler = _StderrHandler(level)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(_TEXT_FORMAT))
    previous = root.level
    root.addHandler(handler)
    root.setLevel(min(level, previous or level))
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
