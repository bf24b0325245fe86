"""Two owners, one agent name (issue 22, defect 2): the name goes to exactly one.

``create_agent`` checked the name's owner, awaited, then wrote — and the write ignored
the owner. Two concurrent creates of one name by alice and mallory both succeeded, and
alice's spec became version 2 of mallory's agent. The owner check is now part of the
store's write (one conditional write on either store): the loser gets ``Forbidden``
(HTTP 403). Each test fails on the code before the fix.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.errors import Forbidden
from omnigent.stores import AgentRow, open_store
from omnigent.testing import scripted_agent
from omnigent.transports.http._params import IDENTITY_HEADER

from .http_helpers import HTTPX_GENERATORS, open_server

pytestmark = HTTPX_GENERATORS

ROUNDS = 6  # names raced per test: each a fresh race between the two owners


async def race(
    create: Callable[[str, str], Awaitable[Any]], names: list[str]
) -> dict[str, dict[str, Any]]:
    """For each name, alice and mallory create it at the same moment.

    Returns, per name, each owner's result or exception.
    """
    outcomes: dict[str, dict[str, Any]] = {name: {} for name in names}

    async def one(name: str, owner: str) -> None:
        try:
            outcomes[name][owner] = await create(name, owner)
        except Forbidden as exc:
            outcomes[name][owner] = exc

    async with trio.open_nursery() as nursery:
        for name in names:
            for owner in ("alice", "mallory"):
                nursery.start_soon(one, name, owner)
    return outcomes


def winner_of(outcome: dict[str, Any]) -> str:
    """The one owner that got the name; the other was refused."""
    won = [owner for owner, result in outcome.items() if not isinstance(result, Exception)]
    assert len(won) == 1, outcome
    return won[0]


async def test_the_store_gives_a_name_to_one_owner_of_two_writing_at_once(db_url: str) -> None:
    """Two stores on one database (two servers), each writing the name for its owner."""
    names = [f"agent-{n}" for n in range(ROUNDS)]
    with trio.fail_after(30):
        async with open_store(db_url) as first, open_store(db_url, exclusive=False) as second:
            stores = {"alice": first, "mallory": second}

            async def create(name: str, owner: str) -> AgentRow:
                spec = {"name": name, "by": owner}
                return await stores[owner].put_agent_version(name, spec, owner)

            outcomes = await race(create, names)
            for name in names:
                owner = winner_of(outcomes[name])
                row = await first.get_agent_by_name(name)
                assert row is not None
                assert (row.owner, row.version, row.spec["by"]) == (owner, 1, owner)
            # The loser may not add a version later either; the owner may.
            row = await first.get_agent_by_name(names[0])
            assert row is not None
            loser = "mallory" if row.owner == "alice" else "alice"
            with pytest.raises(Forbidden):
                await first.put_agent_version(names[0], {"name": names[0], "v": 2}, loser)
            again = await first.put_agent_version(names[0], {"name": names[0], "v": 2}, row.owner)
            assert (again.id, again.version) == (row.id, 2)


async def test_two_owners_creating_one_agent_at_once_on_a_runtime(db_url: str) -> None:
    names = [f"agent-{n}" for n in range(ROUNDS)]
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:

            async def create(name: str, owner: str) -> omnigent.Agent:
                spec = scripted_agent(name, script=[{"say": owner}])
                return await rt.create_agent(spec, owner=owner)

            outcomes = await race(create, names)
            for name in names:
                owner = winner_of(outcomes[name])
                agent = await rt.get_agent_by_name(name)
                assert agent.version == 1
                assert agent.id == outcomes[name][owner].id


async def test_two_users_posting_one_agent_at_once_over_http() -> None:
    """``--auth header``: one ``201``, one ``403 forbidden``; the agent is the winner's."""
    names = [f"agent-{n}" for n in range(ROUNDS)]
    with trio.fail_after(30):
        async with open_server(auth="header") as server:
            clients = {
                owner: httpx.AsyncClient(
                    base_url=server.url, headers={IDENTITY_HEADER: owner}, timeout=10
                )
                for owner in ("alice", "mallory")
            }
            try:

                async def create(name: str, owner: str) -> dict[str, Any]:
                    spec = scripted_agent(name, script=[{"say": owner}])
                    answer = await clients[owner].post("/v1/agents", json=spec)
                    if answer.status_code == 403:
                        assert answer.json()["error"]["code"] == "forbidden", answer.text
                        raise Forbidden(answer.text)
                    assert answer.status_code == 201, answer.text
                    body: dict[str, Any] = answer.json()
                    return body

                outcomes = await race(create, names)
                for name in names:
                    owner = winner_of(outcomes[name])
                    got = await clients[owner].get(f"/v1/agents/{outcomes[name][owner]['id']}")
                    assert got.status_code == 200, got.text
                    assert got.json()["version"] == 1
            finally:
                for client in clients.values():
                    await client.aclose()
