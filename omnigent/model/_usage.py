"""Token usage and its cost: what a model reported, per call, per turn, per session.

:class:`Usage` is one frozen value for all three: a model call's usage as a harness
reads it from its endpoint (OpenAI-compatible ``usage``, Anthropic's, Codex's, pi's,
the Agents SDK's), a turn's (the sum of its calls, carried on the turn's terminal
``response.*`` event as ``response.usage``), and a session's or a session tree's (the
sum of its turns, on the snapshot). Values add with ``+``.

``cost_usd`` is the cost of the tokens that have a price (the configuration's
``prices`` table, see :class:`Prices`); it is ``None`` when no price applied. Its sum
with a priced usage is the priced one's cost: a session's cost is what its priced
calls cost.

``context_tokens`` is the last call's input plus output: the tokens the conversation
fills in the model's context now (what ACP's ``usage_update`` calls ``used``). For a
sum it is the later value's. How large that context is — the model's window, ACP's
``size`` — is the configuration's ``context_windows`` table (:class:`ContextWindows`):
no catalog ships with omnigent, so a model nobody configured has no known window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from ..errors import ConfigError

__all__ = ["ContextWindows", "ModelPrice", "Prices", "Usage"]

_T = TypeVar("_T")


def _count(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a token count must be an integer >= 0, got {value!r}")
    return value


@attrs.frozen
class Usage:
    """Tokens used (and, when priced, their cost in US dollars); see the module docstring.

    Attributes:
        input_tokens: tokens sent to the model (cached ones included).
        output_tokens: tokens the model wrote (reasoning included).
        total_tokens: ``input_tokens + output_tokens``.
        cached_input_tokens: of ``input_tokens``, those read from the provider's cache.
        model_calls: how many model calls this counts.
        context_tokens: the last call's input plus output tokens.
        cost_usd: what the priced calls cost, or ``None`` if none had a price.
    """

    input_tokens: int = attrs.field(default=0, converter=_count)
    output_tokens: int = attrs.field(default=0, converter=_count)
    total_tokens: int = attrs.field(default=0, converter=_count)
    cached_input_tokens: int = attrs.field(default=0, converter=_count)
    model_calls: int = attrs.field(default=0, converter=_count)
    context_tokens: int = attrs.field(default=0, converter=_count)
    cost_usd: float | None = None

    @classmethod
    def of_call(cls, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> Usage:
        """One model call's usage (unpriced)."""
        return cls(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
            cached_input_tokens=min(cached_input_tokens, input_tokens),
            model_calls=1,
            context_tokens=input_tokens + output_tokens,
        )

    @property
    def empty(self) -> bool:
        """Nothing was counted."""
        return self.model_calls == 0 and self.total_tokens == 0 and self.cost_usd is None

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = (
            None
            if self.cost_usd is None and other.cost_usd is None
            else (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        )
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            model_calls=self.model_calls + other.model_calls,
            context_tokens=other.context_tokens or self.context_tokens,
            cost_usd=cost,
        )

    def priced(self, price: ModelPrice | None) -> Usage:
        """This usage with its cost at ``price`` added (itself when ``price`` is None)."""
        if price is None:
            return self
        cost = price.cost(self.input_tokens, self.output_tokens)
        return attrs.evolve(self, cost_usd=(self.cost_usd or 0.0) + cost)

    def to_dict(self) -> dict[str, Any]:
        """The wire form: every count, and ``cost_usd`` when there is one."""
        out: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "model_calls": self.model_calls,
            "context_tokens": self.context_tokens,
        }
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 9)
        return out


def _price(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a price must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"a price must be a finite number >= 0, got {value!r}")
    return float(value)


@attrs.frozen
class ModelPrice:
    """What a model's tokens cost, in US dollars per million tokens."""

    input_per_mtok: float = attrs.field(converter=_price)
    output_per_mtok: float = attrs.field(converter=_price)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@attrs.frozen
class Prices:
    """The configuration's ``prices`` table: a model's name → its :class:`ModelPrice`.

    A model is found by its exact name, else by its name after the last ``/`` (a
    gateway's ``openai/gpt-4o-mini`` is priced as ``gpt-4o-mini``).
    """

    models: Mapping[str, ModelPrice] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, raw: Any) -> Prices:
        """The table as written in the configuration file.

        Raises:
            ConfigError: not ``{model: {input_per_mtok, output_per_mtok}}``, at the
                path of the field (``prices.gpt-4o.input_per_mtok``).
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ConfigError.at("prices", "must be a mapping of model name to its prices")
        models: dict[str, ModelPrice] = {}
        for name, entry in raw.items():
            if not isinstance(name, str) or not name:
                raise ConfigError.at("prices", f"a model name must be a string, got {name!r}")
            if not isinstance(entry, Mapping):
                raise ConfigError.at(f"prices.{name}", "must be a mapping")
            unknown = sorted(set(entry) - {"input_per_mtok", "output_per_mtok"})
            if unknown:
                raise ConfigError.at(f"prices.{name}.{unknown[0]}", "unknown field")
            for key in ("input_per_mtok", "output_per_mtok"):
                if key not in entry:
                    raise ConfigError.at(f"prices.{name}.{key}", "required field missing")
                try:
                    _price(entry[key])
                except (TypeError, ValueError) as exc:
                    raise ConfigError.at(f"prices.{name}.{key}", str(exc)) from None
            models[name] = ModelPrice(entry["input_per_mtok"], entry["output_per_mtok"])
        return cls(models)

    def for_model(self, model: str | None) -> ModelPrice | None:
        """The price of ``model``, or None when the table has none."""
        return _lookup(self.models, model)


def _lookup(table: Mapping[str, _T], model: str | None) -> _T | None:
    """``model``'s entry by its exact name, else by its name after the last ``/``."""
    if model is None:
        return None
    found = table.get(model)
    if found is None and "/" in model:
        found = table.get(model.rsplit("/", 1)[1])
    return found


@attrs.frozen
class ContextWindows:
    """The configuration's ``context_windows`` table: a model's name → its context
    window in tokens (found as :class:`Prices` finds a price)."""

    models: Mapping[str, int] = attrs.field(factory=dict)

    @classmethod
    def from_config(cls, raw: Any) -> ContextWindows:
        """The table as written in the configuration file.

        Raises:
            ConfigError: not ``{model: tokens}`` with a whole number of tokens >= 1,
                at the path of the field (``context_windows.gpt-4o``).
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ConfigError.at(
                "context_windows", "must be a mapping of model name to its window in tokens"
            )
        models: dict[str, int] = {}
        for name, tokens in raw.items():
            if not isinstance(name, str) or not name:
                raise ConfigError.at(
                    "context_windows", f"a model name must be a string, got {name!r}"
                )
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
                raise ConfigError.at(
                    f"context_windows.{name}",
                    f"must be a whole number of tokens >= 1, got {tokens!r}",
                )
            models[name] = tokens
        return cls(models)

    def for_model(self, model: str | None) -> int | None:
        """The window of ``model`` in tokens, or None when the table has none."""
        return _lookup(self.models, model)
