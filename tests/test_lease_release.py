"""A cluster member releases the leases of trees it lets go in groups (issue 32).

When the last tenure on a tree is given back, its lease row is deleted; releases that
arrive while one is being sent wait and go together in the next statement (a group
commit), each still under its root's lock. Against an in-memory store double that
records each statement's roots; ``tests/test_pg_store.py`` holds the statement itself.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from omnigent.core.cluster.shared._trees import HeldTrees


class _Releases:
    """The store's ``release``: records each call's roots; the first waits for ``go``."""

    def __init__(self) -> None:
        self.calls: list[set[str]] = []
        self.go = trio.Event()

    async def release(self, *root_ids: str) -> None:
        self.calls.append(set(root_ids))
        if len(self.calls) == 1:
            await self.go.wait()


def _trees(store: _Releases, nursery: trio.Nursery) -> HeldTrees:
    forgotten: list[set[str]] = []
    return HeldTrees(store, nursery, released=forgotten.append, lost=forgotten.append)  # type: ignore[arg-type]


async def test_let_gos_waiting_for_a_release_go_in_one_statement() -> None:
    store = _Releases()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            trees = _trees(store, nursery)
            tenures: list[Any] = []
            for n in range(5):
                trees.hold(f"r{n}", 0.0)
                tenures.append(trees.take(f"s{n}", f"r{n}"))
            tenures[0].release()  # sent at once; held up in the store
            await trio.testing.wait_all_tasks_blocked()
            for tenure in tenures[1:]:
                tenure.release()
            await trio.testing.wait_all_tasks_blocked()
            assert store.calls == [{"r0"}]
            store.go.set()
            for n in range(5):
                await trees.settled(f"r{n}")
            assert store.calls == [{"r0"}, {"r1", "r2", "r3", "r4"}]
            assert trees.roots() == set()


async def test_a_release_given_up_leaves_its_batch() -> None:
    """Cancelled while waiting, a release is not sent by a later batch: its root may be
    claimed again by then, and that lease must stay."""
    store = _Releases()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            trees = _trees(store, nursery)
            nursery.start_soon(trees._release_lease, "first")  # held up in the store
            await trio.testing.wait_all_tasks_blocked()
            cancel = trio.CancelScope()

            async def given_up() -> None:
                with cancel:
                    await trees._release_lease("given-up")

            nursery.start_soon(given_up)
            nursery.start_soon(trees._release_lease, "other")
            await trio.testing.wait_all_tasks_blocked()
            cancel.cancel()
            await trio.testing.wait_all_tasks_blocked()
            store.go.set()
    assert store.calls == [{"first"}, {"other"}]
