"""A cluster member claims and releases leases in groups (issue 32).

:class:`~omnigent._grouped.Grouped` sends calls that wait while
one is on its way together; the lease releases of trees let go go through it. Against
in-memory doubles that record each batch; ``tests/test_pg_store.py`` holds the
statements themselves (``claim_all``, ``release`` of several roots) and
``tests/test_cluster_runtime.py`` a burst of turns on a real cluster.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import trio
import trio.testing

from omnigent._grouped import Grouped
from omnigent.core.cluster.shared._trees import HeldTrees
from omnigent.errors import StoreUnavailable


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


async def _behind_one(nursery: trio.Nursery, lead: Any, *followers: Any) -> None:
    """``lead`` started — its batch sent and held up — then ``followers`` started and
    waiting behind it (each a task's function, no arguments)."""
    nursery.start_soon(lead)
    await trio.testing.wait_all_tasks_blocked()
    for follower in followers:
        nursery.start_soon(follower)
    await trio.testing.wait_all_tasks_blocked()


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


class _Sender:
    """A batch's ``send``: records each batch; the first waits for ``go``."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.batches: list[set[str]] = []
        self.go = trio.Event()
        self.fail = fail

    async def __call__(self, keys: Any) -> dict[str, str]:
        self.batches.append(set(keys))
        if len(self.batches) == 1:
            await self.go.wait()
        if self.fail is not None:
            raise self.fail
        return {key: key.upper() for key in keys}


async def test_calls_waiting_go_in_one_batch_and_each_gets_its_answer() -> None:
    send = _Sender()
    grouped: Grouped[str, str] = Grouped(send)
    answers: dict[str, str] = {}

    async def call(key: str) -> None:
        answers[key] = await grouped(key)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await _behind_one(nursery, *(partial(call, key) for key in "abcd"))
            send.go.set()
        assert send.batches == [{"a"}, {"b", "c", "d"}]
        assert answers == {"a": "A", "b": "B", "c": "C", "d": "D"}
        assert await grouped("e") == "E"  # none under way: sent at once, alone
        assert send.batches[-1] == {"e"}


async def test_a_failed_batch_fails_every_call_of_it() -> None:
    send = _Sender(fail=StoreUnavailable("db"))
    grouped: Grouped[str, str] = Grouped(send)
    failed: list[str] = []

    async def call(key: str) -> None:
        try:
            await grouped(key)
        except StoreUnavailable:
            failed.append(key)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await _behind_one(nursery, *(partial(call, key) for key in "abc"))
            send.go.set()
    assert sorted(failed) == ["a", "b", "c"]


async def test_a_call_given_up_before_its_batch_is_sent_leaves_it() -> None:
    """Its key is in no batch sent later: a release given up is not sent after its
    root was claimed again."""
    send = _Sender()
    grouped: Grouped[str, str] = Grouped(send)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(grouped, "first")  # held up in send
            await trio.testing.wait_all_tasks_blocked()
            cancel = trio.CancelScope()

            async def given_up() -> None:
                with cancel:
                    await grouped("given-up")

            nursery.start_soon(given_up)
            nursery.start_soon(grouped, "other")
            await trio.testing.wait_all_tasks_blocked()
            cancel.cancel()
            await trio.testing.wait_all_tasks_blocked()
            send.go.set()
    assert send.batches == [{"first"}, {"other"}]


async def test_a_call_whose_batch_was_sent_waits_for_its_answer_through_a_cancel() -> None:
    """A claim that was sent reaches its caller (a lease is never held by nobody's
    tenure); the cancel lands after. ``send`` finishes through the cancel, as the
    store's writes do."""
    batches: list[set[str]] = []
    first, second = trio.Event(), trio.Event()

    async def send(keys: Any) -> dict[str, str]:
        batches.append(set(keys))
        with trio.CancelScope(shield=True):
            await (first if len(batches) == 1 else second).wait()
        return {key: key.upper() for key in keys}

    grouped: Grouped[str, str] = Grouped(send)
    got: list[str] = []
    scopes = {"a": trio.CancelScope(), "b": trio.CancelScope()}

    async def call(key: str) -> None:
        with scopes[key]:
            got.append(await grouped(key))
            await trio.lowlevel.checkpoint()  # where the cancel lands
            got.append("not cancelled")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await _behind_one(nursery, partial(grouped, "zero"), *(partial(call, k) for k in "ab"))
            first.set()
            await trio.testing.wait_all_tasks_blocked()
            sending = [set(keys) for keys in batches[1:]]  # sent by one, the other waits
            for scope in scopes.values():
                scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            before = list(got)
            second.set()
    assert sending == [{"a", "b"}]
    assert before == []
    assert sorted(got) == ["A", "B"]


async def test_a_batch_whose_sender_was_cancelled_is_sent_by_the_others() -> None:
    """``send`` should finish through a cancel; if it does not, the batch's other calls
    send their keys again, without the sender's."""
    batches: list[set[str]] = []
    first, stuck = trio.Event(), trio.Event()

    async def send(keys: Any) -> dict[str, str]:
        batches.append(set(keys))
        if len(batches) == 1:
            await first.wait()
        elif len(batches) == 2:
            await stuck.wait()  # never set: its sender is cancelled here
        return {key: key.upper() for key in keys}

    grouped: Grouped[str, str] = Grouped(send)
    answers: dict[str, str] = {}
    scopes = [trio.CancelScope(), trio.CancelScope()]

    async def call(key: str, scope: trio.CancelScope) -> None:
        with scope:
            answers[key] = await grouped(key)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await _behind_one(
                nursery,
                partial(grouped, "zero"),
                partial(call, "a", scopes[0]),
                partial(call, "b", scopes[1]),
            )
            first.set()
            await trio.testing.wait_all_tasks_blocked()
            assert batches[1:] == [{"a", "b"}]  # one of them sending, stuck
            for scope in scopes:
                scope.cancel()
    assert len(batches) == 3 and len(batches[2]) == 1
    assert answers == {key: key.upper() for key in batches[2]}


async def test_a_claimed_head_is_taken_once_and_goes_with_its_tree() -> None:
    """The newest stored event id a claim read is the bus's counter once: after the
    bus let the counter go, events may have followed it, so it is never given again;
    nor after the tree is let go."""
    store = _Releases()
    store.go.set()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            trees = _trees(store, nursery)
            tree = trees.hold("root", 0.0)
            trees.register_sessions(tree, ["child"], [("root", 7), ("child", 3)])
            tenure = trees.take("root", "root")
            assert trees.claimed_head("root") == 7
            assert trees.claimed_head("root") is None
            assert trees.claimed_head("elsewhere") is None
            tenure.release()
            await trees.settled("root")
            assert trees.claimed_head("child") is None  # let go: its heads with it


async def test_an_unshielded_call_leaves_a_batch_being_sent_when_cancelled() -> None:
    """Reads are grouped unshielded: a call whose batch another call is sending leaves
    at once when cancelled, its answer unread; the batch is still answered."""
    batches: list[set[str]] = []
    first, second = trio.Event(), trio.Event()

    async def send(keys: Any) -> dict[str, str]:
        batches.append(set(keys))
        with trio.CancelScope(shield=True):  # its sender finishes it (see the test below)
            await (first if len(batches) == 1 else second).wait()
        return {key: key.upper() for key in keys}

    grouped: Grouped[str, str] = Grouped(send, shielded=False)
    got: dict[str, str] = {}
    cancelled: list[str] = []
    scopes = {"a": trio.CancelScope(), "b": trio.CancelScope()}

    async def call(key: str) -> None:
        with scopes[key]:
            got[key] = await grouped(key)
        if scopes[key].cancelled_caught:
            cancelled.append(key)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await _behind_one(nursery, partial(grouped, "zero"), *(partial(call, k) for k in "ab"))
            first.set()
            await trio.testing.wait_all_tasks_blocked()
            for scope in scopes.values():
                scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            left = list(cancelled)  # the one that was waiting on the other's batch
            second.set()
    assert batches[1:] == [{"a", "b"}]
    assert len(left) == 1
    assert list(got) == [key for key in "ab" if key not in left]  # the sender's answer
