"""Shared fixtures and doubles for the test suite."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.base import HarnessEnv, TurnContext, TurnRequest
from omnigent.model import TERMINAL_STATUSES, Event, SessionStatusChanged

from .pg_cluster import PgCluster, find_bindir

TurnBody = Callable[[TurnRequest, TurnContext], Awaitable[None]]


def scripted(name: str = "bot", script: list[Any] | None = None, **config: Any) -> dict[str, Any]:
    """A scripted agent spec as a dict."""
    cfg: dict[str, Any] = {"harness": "scripted", **config}
    if script is not None:
        cfg["script"] = script
    return {"name": name, "executor": {"type": "omnigent", "config": cfg}}


class Recorder:
    """A harness double: records every request and runs ``body`` for each turn."""

    def __init__(self, body: TurnBody | None = None) -> None:
        self.requests: list[TurnRequest] = []
        self.body = body
        self.created = 0
        self.closed = 0

    def factory(self, env: HarnessEnv) -> Any:
        self.created += 1
        return _RecordingHarness(self)


class _RecordingHarness:
    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        self._recorder.requests.append(request)
        if self._recorder.body is not None:
            await self._recorder.body(request, ctx)
        else:
            async with ctx.open_message() as message:
                await message.write(f"echo {len(self._recorder.requests)}")

    async def aclose(self) -> None:
        self._recorder.closed += 1


async def collect_turn(events: AsyncIterator[Event]) -> list[Event]:
    """Events up to and including the next terminal ``session.status``."""
    seen: list[Event] = []
    async for event in events:
        seen.append(event)
        if isinstance(event, SessionStatusChanged) and event.status in TERMINAL_STATUSES:
            return seen
    raise AssertionError(f"the stream ended without a terminal status: {seen}")


async def run_turn(rt: omnigent.Runtime, session_id: str, content: Any = "hi") -> list[Event]:
    """Send a message and collect the events of the turn it starts."""
    async with rt.subscribe(session_id) as events:
        await rt.send_message(session_id, content)
        return await collect_turn(events)


async def wait_quiet(rt: omnigent.Runtime, timeout: float = 5) -> None:
    """Wait until no session has work (actors leave just after their last event)."""
    with trio.fail_after(timeout):
        while rt.statistics()["tasks"]:
            await trio.sleep(0.005)


def all_tasks() -> set[trio.lowlevel.Task]:
    """Every task in this Trio run."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    found, stack = set(), [root]
    while stack:
        task = stack.pop()
        found.add(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


def statuses(events: list[Event]) -> list[str]:
    return [e.status for e in events if isinstance(e, SessionStatusChanged)]


def types(events: list[Event]) -> list[str]:
    return [e.type for e in events]


@pytest.fixture(autouse=True)
def omnigent_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Keep every test's workspaces and default database out of the real home."""
    home = tmp_path_factory.mktemp("omnigent-home")
    monkeypatch.setenv("OMNIGENT_HOME", str(home))
    return home


@pytest.fixture
async def rt() -> AsyncIterator[omnigent.Runtime]:
    async with omnigent.open_runtime() as runtime:
        yield runtime


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def rec_session(rt: omnigent.Runtime, recorder: Recorder) -> str:
    """A session whose harness is ``recorder``."""
    rt.register_harness("recorder", recorder.factory)
    agent = await rt.create_agent(scripted("rec", harness="recorder"))
    return (await rt.create_session(agent.id)).id


# -- PostgreSQL ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """A private PostgreSQL cluster for the whole run (skipped where there is none).

    ``OMNIGENT_REQUIRE_POSTGRES=1`` (CI) turns a missing server or psycopg into a
    failure instead of a skip.
    """
    required = os.environ.get("OMNIGENT_REQUIRE_POSTGRES") == "1"
    bindir = find_bindir()
    try:
        import psycopg  # noqa: F401
    except ImportError:
        bindir = None
    if bindir is None:
        if required:
            pytest.fail("OMNIGENT_REQUIRE_POSTGRES=1 but no PostgreSQL server or psycopg")
        pytest.skip("no PostgreSQL server binaries (pg_config --bindir) or psycopg here")
    cluster = PgCluster(bindir)
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    """A fresh, empty database on the test cluster; dropped after the test."""
    name = pg_cluster.create_database()
    try:
        yield pg_cluster.url(name)
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database of each store: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'omnigent.db'}"
    return str(request.getfixturevalue("pg_url"))
