"""A runtime's Prometheus metrics: counted where things happen, read at ``GET /metrics``.

:class:`Metrics` holds one runtime's counters and histograms in a registry of its own
(several runtimes in one process — tests, a library user's — never mix their
counts). The parts that do the work are given it and count as they go: a turn as it
ends (:meth:`Metrics.turn_ended`), a tool call (:meth:`Metrics.tool_called`), the
event writer per batch it stores (:meth:`Metrics.events_stored`). What is a level
rather than a count — live sessions, subscribers — is read when scraped, from the
runtime's ``statistics()``, and given to :meth:`Metrics.exposition`.

Every name starts ``omnigent_``; the text is rendered by ``prometheus_client``
(``docs/observability.md`` lists each metric). Labels whose values come from clients
(models, tools) are bounded: past :data:`MAX_LABEL_VALUES` distinct ones, the rest
count under ``other``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..model import Usage

if TYPE_CHECKING:
    from ._prometheus import Families

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format's media type."""


MAX_LABEL_VALUES = 100
"""How many distinct models (and tools) get series of their own; the rest count as
:data:`OTHER`. Model and tool names come from clients and runners (a spec's model, a
client's tool, an MCP server's), so without a bound a client could grow the registry,
and every scrape, without end."""
OTHER = "other"


class _LabelValues:
    """The values one label has taken, at most :data:`MAX_LABEL_VALUES` of them."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def admit(self, value: str) -> str:
        """``value`` if it has (or may now have) a series of its own, else ``"other"``."""
        if value in self._seen:
            return value
        if len(self._seen) >= MAX_LABEL_VALUES:
            return OTHER
        self._seen.add(value)
        return value


class Metrics:
    """One runtime's metrics (module docstring). Built by ``open_runtime``.

    Its Prometheus families (:mod:`._prometheus`) are made by the first count or
    scrape, and ``prometheus_client`` imported then: a server's start needs neither.
    """

    def __init__(self) -> None:
        self._models = _LabelValues()
        self._tool_names = _LabelValues()
        self._made: Families | None = None

    def _families(self) -> Families:
        if self._made is None:
            from ._prometheus import Families

            self._made = Families()
        return self._made

    # -- counting ----------------------------------------------------------------------

    def turn_ended(self, status: str, harness: str, seconds: float) -> None:
        families = self._families()
        families.turns.labels(status, harness).inc()
        families.turn_seconds.labels(harness).observe(seconds)

    def usage_recorded(self, model: str | None, usage: Usage) -> None:
        name = self._models.admit(model or "unknown")
        families = self._families()
        if usage.input_tokens:
            families.tokens.labels("input", name).inc(usage.input_tokens)
        if usage.output_tokens:
            families.tokens.labels("output", name).inc(usage.output_tokens)
        if usage.cost_usd:
            families.cost.labels(name).inc(usage.cost_usd)

    def tool_called(self, tool: str, outcome: str) -> None:
        self._families().tools.labels(self._tool_names.admit(tool), outcome).inc()

    def events_stored(self, count: int, seconds: float) -> None:
        families = self._families()
        families.events.inc(count)
        families.store_seconds.observe(seconds)

    # -- reading -----------------------------------------------------------------------

    def exposition(self, levels: Mapping[str, int]) -> bytes:
        """The Prometheus text of every metric, with ``levels`` (a runtime's
        ``statistics()``: ``active_sessions``, ``subscribers``, …) as gauges."""
        return self._families().exposition(levels)
