"""The Prometheus side of :class:`~._metrics.Metrics`: its registry, counters and
histograms, and the text a scrape reads. Imported by the first count or scrape, so a
server that has done neither has not imported ``prometheus_client`` (its start,
``benchmarks/startup.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["Families"]

_GAUGES = {
    "active_sessions": "Sessions with live work (an actor) in this process.",
    "subscribers": "Live event-stream subscribers.",
    "elicitations": "Elicitations waiting for an answer.",
    "sub_agent_work": "Sub-agent dispatches not yet delivered to their parent.",
}
_TURN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
_STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)


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


class Families:
    """One runtime's counters and histograms, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        registry = self.registry
        self.turns = Counter(
            "omnigent_turns",
            "Turns ended, by terminal status and harness.",
            ["status", "harness"],
            registry=registry,
        )
        self.turn_seconds = Histogram(
            "omnigent_turn_duration_seconds",
            "How long turns took, from running to their terminal status.",
            ["harness"],
            buckets=_TURN_BUCKETS,
            registry=registry,
        )
        self.tokens = Counter(
            "omnigent_tokens",
            "Model tokens the harnesses reported, by kind (input, output) and model.",
            ["kind", "model"],
            registry=registry,
        )
        self.cost = Counter(
            "omnigent_cost_usd",
            "What the reported tokens cost at the configured prices, by model.",
            ["model"],
            registry=registry,
        )
        self.tools = Counter(
            "omnigent_tool_calls",
            "Tool calls, by tool and outcome (ok, error, denied, cancelled).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.events = Counter(
            "omnigent_events_written", "Events persisted to the store.", registry=registry
        )
        self.store_seconds = Histogram(
            "omnigent_store_write_seconds",
            "Latency of the store's event batch writes.",
            buckets=_STORE_BUCKETS,
            registry=registry,
        )

    def exposition(self, levels: Mapping[str, int]) -> bytes:
        """See :meth:`~._metrics.Metrics.exposition`."""
        now = CollectorRegistry(auto_describe=False)
        now.register(_LevelCollector(levels))
        return generate_latest(self.registry) + generate_latest(now)
