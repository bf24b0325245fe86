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

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..model import Usage

__all__ = ["CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format's media type."""

_GAUGES = {
    "active_sessions": "Sessions with live work (an actor) in this process.",
    "subscribers": "Live event-stream subscribers.",
    "elicitations": "Elicitations waiting for an answer.",
    "sub_agent_work": "Sub-agent dispatches not yet delivered to their parent.",
}
_TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
_STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)


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


class _LevelCollector(Collector):
    def __init__(self, levels: Mapping[str, int]) -> None:
        self._levels = levels

    def collect(self) -> Iterable[Metric]:
        levels = self._levels
        for name, help_text in _GAUGES.items():
            if name in levels:
                family = GaugeMetricFamily(f"omnigent_{name}", help_text)
                family.add_metric([], levels[name])
                yield family


class Metrics:
    """One runtime's metrics (module docstring). Built by ``open_runtime``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._models = _LabelValues()
        self._tool_names = _LabelValues()
        registry = self.registry
        self._turns = Counter(
            "omnigent_turns",
            "Turns ended, by terminal status and harness.",
            ["status", "harness"],
            registry=registry,
        )
        self._turn_seconds = Histogram(
            "omnigent_turn_duration_seconds",
            "How long turns took, from running to their terminal status.",
            ["harness"],
            buckets=_TURN_BUCKETS,
            registry=registry,
        )
        self._tokens = Counter(
            "omnigent_tokens",
            "Model tokens the harnesses reported, by kind (input, output) and model.",
            ["kind", "model"],
            registry=registry,
        )
        self._cost = Counter(
            "omnigent_cost_usd",
            "What the reported tokens cost at the configured prices, by model.",
            ["model"],
            registry=registry,
        )
        self._tools = Counter(
            "omnigent_tool_calls",
            "Tool calls, by tool and outcome (ok, error, denied, cancelled).",
            ["tool", "outcome"],
            registry=registry,
        )
        self._events = Counter(
            "omnigent_events_written", "Events persisted to the store.", registry=registry
        )
        self._store_seconds = Histogram(
            "omnigent_store_write_seconds",
            "Latency of the store's event batch writes.",
            buckets=_STORE_BUCKETS,
            registry=registry,
        )

    # -- counting ----------------------------------------------------------------------

    def turn_ended(self, status: str, harness: str, seconds: float) -> None:
        self._turns.labels(status, harness).inc()
        self._turn_seconds.labels(harness).observe(seconds)

    def usage_recorded(self, model: str | None, usage: Usage) -> None:
        name = self._models.admit(model or "unknown")
        if usage.input_tokens:
            self._tokens.labels("input", name).inc(usage.input_tokens)
        if usage.output_tokens:
            self._tokens.labels("output", name).inc(usage.output_tokens)
        if usage.cost_usd:
            self._cost.labels(name).inc(usage.cost_usd)

    def tool_called(self, tool: str, outcome: str) -> None:
        self._tools.labels(self._tool_names.admit(tool), outcome).inc()

    def events_stored(self, count: int, seconds: float) -> None:
        self._events.inc(count)
        self._store_seconds.observe(seconds)

    # -- reading -----------------------------------------------------------------------

    def exposition(self, levels: Mapping[str, int]) -> bytes:
        """The Prometheus text of every metric, with ``levels`` (a runtime's
        ``statistics()``: ``active_sessions``, ``subscribers``, …) as gauges."""
        now = CollectorRegistry(auto_describe=False)
        now.register(_LevelCollector(levels))
        return generate_latest(self.registry) + generate_latest(now)
