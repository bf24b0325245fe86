"""What a forked session starts with: a copy of its source's history, cut at one item.

:meth:`Runtime.fork_session` makes a new session of the same agent (and version) whose
history is a copy of the source's up to a given item. The copy is pure data —
:func:`fork_items` — and the new session shares nothing live with its source: its own
id, its own event log (empty: the copy is history, not events), no pending message,
inbox, elicitation, background task or native agent conversation.

Each copied item gets a new id (item ids are unique across sessions); tool calls keep
their ``call_id``. A tool call whose output is not in the copy (the cut falls between
them, or the source was mid-call) gets one saying so, so the history a harness sends a
model answers every call.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..._ids import new_id
from ...errors import InvalidInput
from ...model import FunctionCallItem, FunctionCallOutputItem, Item

__all__ = ["UNANSWERED_AT_FORK", "fork_items"]

UNANSWERED_AT_FORK = "Error: this call had no result when the session was forked from {source}"


def fork_items(items: Sequence[Item], up_to: str | None, *, source: str) -> list[Item]:
    """The history of a fork of ``source``: ``items`` up to and including ``up_to``.

    Args:
        items: the source's taken history, oldest first.
        up_to: the id of the last item to copy (``None``: all of them).
        source: the source session's id (named in the output of an unanswered call).

    Raises:
        InvalidInput: at ``up_to_item_id``, when ``up_to`` is not in ``items``.
    """
    if up_to is not None:
        ids = [item.id for item in items]
        if up_to not in ids:
            raise InvalidInput.at("up_to_item_id", f"{up_to!r} is not an item of {source}")
        items = items[: ids.index(up_to) + 1]
    copied: list[Item] = [attrs.evolve(item, id=new_id("item")) for item in items]
    answered = {i.call_id for i in copied if isinstance(i, FunctionCallOutputItem)}
    out: list[Item] = []
    for item in copied:
        if isinstance(item, FunctionCallItem):
            item = attrs.evolve(item, status="completed")
        out.append(item)
        if isinstance(item, FunctionCallItem) and item.call_id not in answered:
            message = UNANSWERED_AT_FORK.format(source=source)
            out.append(FunctionCallOutputItem(call_id=item.call_id, output=message))
    return out
