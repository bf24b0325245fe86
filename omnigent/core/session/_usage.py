"""A turn's model usage: priced as it is reported, held to the session's budget.

:class:`TurnUsage` is what a turn's :meth:`~._turn.Turn.record_usage` and
:meth:`~._turn.Turn.check_budget` act on. It knows what the session had used before
the turn (its stored sum), the spec's ``limits``, and the configuration's prices; it
adds each model call's usage, priced by the call's model, and says whether the next
call may be made.

**The budget rule.** A call may be made unless, with it, the session would be past a
limit. What the next call will use is not known before it is made, but it is at least
what the conversation already holds: a call re-sends the whole conversation, so the
next one reads at least the last one's input and output (its ``context_tokens``), at
the input price. So the next call is refused when ``spent + context >= limit`` (no
room left for even one token of answer), and a turn's first call when the session has
reached a limit already.
"""

from __future__ import annotations

import attrs

from ...errors import BudgetExceeded
from ...model import ModelPrice, Prices, Usage
from ...spec import LimitsSpec

__all__ = ["TurnUsage"]


@attrs.define
class TurnUsage:
    """One turn's usage and budget (module docstring).

    Args:
        before: what the session had used before this turn (its stored sum; only a
            spec with ``limits`` needs it).
        limits: the spec's ``limits``.
        prices: the configuration's ``prices`` table.
        model: the turn's model (a call that names none is priced as this one).
    """

    before: Usage = attrs.field(factory=Usage)
    limits: LimitsSpec = attrs.field(factory=LimitsSpec)
    prices: Prices = attrs.field(factory=Prices)
    model: str | None = None
    turn: Usage = attrs.field(factory=Usage)

    def record(self, usage: Usage, model: str | None = None) -> Usage:
        """Add one call's usage (priced at its model's price); returns it priced."""
        priced = usage.priced(self._price(model))
        self.turn = self.turn + priced
        return priced

    def _price(self, model: str | None) -> ModelPrice | None:
        return self.prices.for_model(model or self.model)

    @property
    def spent(self) -> Usage:
        """The session's usage with this turn's so far."""
        return self.before + self.turn

    def check(self) -> None:
        """Raise if the next model call would cross a limit (module docstring).

        Raises:
            BudgetExceeded: naming the limit, what was used and what the next call
                needs at least.
        """
        limits = self.limits
        if not limits.bounded:
            return
        spent = self.spent
        context = self.turn.context_tokens if self.turn.model_calls else 0
        if limits.max_tokens is not None and spent.total_tokens + context >= limits.max_tokens:
            raise BudgetExceeded(
                f"the session's token budget is used up: {spent.total_tokens} of "
                f"limits.max_tokens {limits.max_tokens} used, and the next model call "
                f"reads at least {context} more"
            )
        if limits.max_cost_usd is not None:
            used = spent.cost_usd or 0.0
            price = self._price(None)
            next_cost = price.cost(context, 0) if price is not None else 0.0
            if used + next_cost >= limits.max_cost_usd:
                raise BudgetExceeded(
                    f"the session's cost budget is used up: ${used:.6f} of "
                    f"limits.max_cost_usd ${limits.max_cost_usd} spent, and the next model "
                    f"call costs at least ${next_cost:.6f}"
                )
