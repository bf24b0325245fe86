"""Shared fixtures and small helpers for the test suite.

The harness double and the turn helpers the tests use are public:
:mod:`omnigent.testing` (``RecordingHarness``, ``scripted_agent``, ``run_turn``,
``collect_turn``, ``probe``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.model import Event, SessionStatusChanged
from omnigent.testing import RecordingHarness, scripted_agent

from .pg_cluster import PgCluster, find_bindir


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
def recorder() -> RecordingHarness:
    return RecordingHarness()


@pytest.fixture
async def rec_session(rt: omnigent.Runtime, recorder: RecordingHarness) -> str:
    """A session whose harness is ``recorder``."""
    rt.register_harness("recorder", recorder.factory)
    agent = await rt.create_agent(scripted_agent("rec", harness="recorder"))
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
