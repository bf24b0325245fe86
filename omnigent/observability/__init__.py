"""What the agents do and what they cost: traces, metrics and the server's log lines.

- **Traces** (:mod:`._tracing`): ``invoke_agent``, ``chat`` and ``execute_tool`` spans
  of the OpenTelemetry GenAI conventions, and the W3C trace context *carrier* that
  parents spans across processes (:func:`carrier`, :func:`continued`). Off — and
  OpenTelemetry not even imported — until :func:`enable_tracing` or
  :func:`open_tracing` turns them on (the ``otel`` extra).
- **Metrics** (:mod:`._metrics`): one runtime's Prometheus counters (:class:`Metrics`),
  served at ``GET /metrics``.
- **Log lines** (:mod:`._logs`): the one-line-per-request and per-turn records, their
  JSON form, and what may never be in them.

``docs/observability.md`` is the user's guide.
"""

from ._logs import (
    REQUESTS_LOGGER,
    TURNS_LOGGER,
    JsonFormatter,
    LogFormat,
    configure_logging,
    log_fields,
)
from ._metrics import CONTENT_TYPE, Metrics
from ._tracing import (
    Carrier,
    Span,
    agent_span,
    carrier,
    chat_span,
    continued,
    disable_tracing,
    enable_tracing,
    open_tracing,
    tool_span,
    tracing_enabled,
)

__all__ = [
    "CONTENT_TYPE",
    "REQUESTS_LOGGER",
    "TURNS_LOGGER",
    "Carrier",
    "JsonFormatter",
    "LogFormat",
    "Metrics",
    "Span",
    "agent_span",
    "carrier",
    "chat_span",
    "configure_logging",
    "continued",
    "disable_tracing",
    "enable_tracing",
    "log_fields",
    "open_tracing",
    "tool_span",
    "tracing_enabled",
]
