"""The sessions feed: ``GET /v1/feed`` (and ``Runtime.watch_sessions``).

Snapshot-then-tail over a real loopback server: every readable session, ``feed.synced``,
then each change (created, status, elicitation, title, deleted), coalesced; the sharing
fence (``--auth header``: each user sees only what they may read, a grant makes a
session appear, a revoke makes it disappear); and the watch's own bounds.
"""

from __future__ import annotations

from typing import Any

import trio

import omnigent
from omnigent.core import ChangeKind, SessionPage, SessionSnapshot
from omnigent.core.bus._session_changes import PENDING_LIMIT, SessionChanges, SessionWatch
from omnigent.errors import InvalidInput

from .http_helpers import HTTPX_GENERATORS, Frame, SSEReader, open_server, open_stream, scripted

pytestmark = HTTPX_GENERATORS


async def until(reader: SSEReader, predicate: Any) -> list[Frame]:
    frames = await reader.read_until(predicate)
    assert frames and predicate(frames[-1]), frames
    return frames


def updated(session_id: str, **fields: Any) -> Any:
    def check(frame: Frame) -> bool:
        if frame.event != "session.updated" or frame.data["session"]["id"] != session_id:
            return False
        return all(frame.data["session"].get(k) == v for k, v in fields.items())

    return check


async def test_snapshot_then_each_change_until_deleted() -> None:
    ask = {
        **scripted("asker", [{"call": "sys_os_shell", "args": {"command": "true"}}]),
        "policies": [{"name": "ask", "type": "ask_tools", "tools": ["sys_os_shell"]}],
    }
    with trio.fail_after(20):
        async with open_server() as server:
            old = await server.session(title="before the feed")
            async with open_stream(server.client, "GET", "/v1/feed") as feed:
                assert feed.response.status_code == 200
                assert feed.response.headers["content-type"].startswith("text/event-stream")
                first = await until(feed, lambda f: f.event == "feed.synced")
                assert [f.event for f in first] == [
                    "feed.snapshot",
                    "session.updated",
                    "feed.synced",
                ]
                assert first[1].data["session"]["title"] == "before the feed"
                assert first[1].id is None  # no ids: a reconnect starts with a snapshot

                new = await server.session(ask, title="made after")
                await until(feed, updated(new, title="made after", status="idle"))
                answer = await server.client.patch(f"/v1/sessions/{old}", json={"title": "renamed"})
                assert answer.status_code == 200
                await until(feed, updated(old, title="renamed"))

                await server.message(new)
                waiting = await until(feed, updated(new, status="waiting"))
                pending = waiting[-1].data["session"]["pending_elicitations"]
                assert len(pending) == 1
                eid = pending[0]["elicitation_id"]
                resolve = f"/v1/sessions/{new}/elicitations/{eid}/resolve"
                assert (
                    await server.client.post(resolve, json={"action": "accept"})
                ).status_code == 202
                done = await until(feed, updated(new, status="idle"))
                assert done[-1].data["session"]["pending_elicitations"] == []

                assert (await server.client.delete(f"/v1/sessions/{old}")).status_code == 200
                gone = await until(feed, lambda f: f.event == "session.deleted")
                assert gone[-1].data == {"type": "session.deleted", "session_id": old}


async def test_a_child_appears_under_its_parent() -> None:
    parent = {
        **scripted(
            "parent", [{"call": "sys_session_send", "args": {"agent": "kid", "args": "go"}}]
        ),
        "sub_agents": [scripted("kid", [{"sleep": 0.2}, {"say": "done"}])],
        "tools": {"agents": ["kid"]},
    }
    with trio.fail_after(20):
        async with open_server() as server:
            sid = await server.session(parent)
            async with open_stream(server.client, "GET", "/v1/feed") as feed:
                await until(feed, lambda f: f.event == "feed.synced")
                await server.message(sid)
                child = await until(
                    feed,
                    lambda f: (
                        f.event == "session.updated"
                        and f.data["session"]["parent_session_id"] == sid
                    ),
                )
                kid = child[-1].data["session"]["id"]
                await until(feed, updated(kid, status="running"))
                await until(feed, updated(kid, status="idle"))


async def test_each_user_sees_only_what_they_may_read() -> None:
    alice = {"X-Forwarded-Email": "alice@example.com"}
    bob = {"X-Forwarded-Email": "bob@example.com"}
    with trio.fail_after(20):
        async with open_server(auth="header") as server:
            client = server.client
            assert (await client.get("/v1/feed")).status_code == 401
            agent = (await client.post("/v1/agents", json=scripted(), headers=alice)).json()["id"]

            async def create(who: dict[str, str], title: str) -> str:
                body = {"agent_id": agent, "title": title}
                answer = await client.post("/v1/sessions", json=body, headers=who)
                assert answer.status_code == 201
                return str(answer.json()["id"])

            mine = await create(alice, "alice's")
            async with open_stream(client, "GET", "/v1/feed", headers=bob) as feed:
                first = await until(feed, lambda f: f.event == "feed.synced")
                assert [f.event for f in first] == ["feed.snapshot", "feed.synced"]
                await create(alice, "also alice's")
                own = await create(bob, "bob's")
                frames = await until(feed, updated(own))
                assert all(f.data["session"]["id"] == own for f in frames)  # nothing of alice's
                # A grant makes alice's session readable: bob's feed takes a new snapshot.
                grant = {"user_id": "bob@example.com", "level": 1}
                put = await client.put(
                    f"/v1/sessions/{mine}/permissions", json=grant, headers=alice
                )
                assert put.status_code == 200
                await until(feed, lambda f: f.event == "feed.snapshot")
                again = await until(feed, lambda f: f.event == "feed.synced")
                shown = {f.data["session"]["id"] for f in again if f.event == "session.updated"}
                assert shown == {mine, own}
                # Alice deletes hers: bob, who was shown it, is told.
                assert (
                    await client.delete(f"/v1/sessions/{mine}", headers=alice)
                ).status_code == 200
                gone = await until(feed, lambda f: f.event == "session.deleted")
                assert gone[-1].data["session_id"] == mine


class _Reads:
    """A watch's reads over a fixed set of sessions, counting what it reads."""

    def __init__(self, sessions: list[SessionSnapshot]) -> None:
        self.sessions = {s.id: s for s in sessions}
        self.reads: list[str] = []
        self.fail_after: str | None = None

    async def page(self, after: str | None, limit: int) -> SessionPage:
        await trio.lowlevel.checkpoint()
        if after is not None and after == self.fail_after:
            self.fail_after = None
            raise InvalidInput.at("after", "gone")
        ids = sorted(self.sessions)
        start = 0 if after is None else ids.index(after) + 1
        chunk = ids[start : start + limit]
        return SessionPage(tuple(self.sessions[i] for i in chunk), start + limit < len(ids))

    async def read(self, session_id: str) -> SessionSnapshot | None:
        await trio.lowlevel.checkpoint()
        self.reads.append(session_id)
        return self.sessions.get(session_id)


async def _snapshot_of(runtime: omnigent.Runtime, count: int) -> list[SessionSnapshot]:
    agent = await runtime.create_agent(scripted())
    return [await runtime.create_session(agent.id) for _ in range(count)]


async def drain(watch: SessionWatch) -> list[Any]:
    out = []
    while (change := await watch.next(wait=False)) is not None:
        out.append(change)
    return out


async def test_a_watch_coalesces_restarts_and_falls_back_to_a_snapshot() -> None:
    with trio.fail_after(10):
        async with omnigent.open_runtime() as runtime:
            sessions = await _snapshot_of(runtime, 3)
    reads = _Reads(sessions)
    changes = SessionChanges()
    with changes.listen() as pending:
        watch = SessionWatch(pending, reads)
        reads.fail_after = sorted(reads.sessions)[0]
        first = await drain(watch)
        # A page whose cursor vanished starts the snapshot again (sessions resent).
        assert first[0].kind is ChangeKind.SNAPSHOT and first[-1].kind is ChangeKind.SYNCED
        assert {c.session.id for c in first if c.kind is ChangeKind.UPDATED} == set(reads.sessions)
        target = sessions[0].id
        for _ in range(50):
            changes.touched([target])  # coalesced: read once
        assert [c.kind for c in await drain(watch)] == [ChangeKind.UPDATED]
        assert reads.reads == [target]
        del reads.sessions[target]
        changes.touched([target])
        assert [(c.kind, c.session_id) for c in await drain(watch)] == [
            (ChangeKind.DELETED, target)
        ]
        changes.touched(["conv_never_shown"], deleted=True)
        assert await drain(watch) == []  # never shown: nothing told
        for n in range(PENDING_LIMIT + 1):
            changes.touched([f"conv_{n}"])
        assert (await drain(watch))[0].kind is ChangeKind.SNAPSHOT  # too many: a snapshot
    assert changes.watching() == 0


async def test_a_cancelled_read_loses_nothing() -> None:
    with trio.fail_after(10):
        async with omnigent.open_runtime() as runtime:
            sessions = await _snapshot_of(runtime, 1)
    reads = _Reads(sessions)
    changes = SessionChanges()
    with changes.listen() as pending:
        watch = SessionWatch(pending, reads)
        await drain(watch)
        changes.touched([sessions[0].id])
        with trio.CancelScope() as scope:
            scope.cancel()
            await watch.next(wait=True)
        change = await watch.next(wait=False)
        assert change is not None and change.session is not None
        assert change.session.id == sessions[0].id


async def test_an_agent_spec_is_readable_with_its_secrets_redacted() -> None:
    spec = scripted("secretive")
    spec["terminals"] = {"sh": {"command": "bash", "env": {"TOKEN": "s3cret"}}}
    spec["executor"]["config"]["base_url"] = "http://127.0.0.1:9/v1"
    with trio.fail_after(10):
        async with open_server() as server:
            agent_id = await server.agent(spec, by_operator=True)
            spec["description"] = "v2"
            await server.agent(spec, by_operator=True)
            latest = await server.client.get(f"/v1/agents/{agent_id}/spec")
            first = await server.client.get(f"/v1/agents/{agent_id}/spec?version=1")
            bad = await server.client.get(f"/v1/agents/{agent_id}/spec?version=3")
    assert latest.status_code == 200 and first.status_code == 200
    body = latest.json()
    assert body["object"] == "agent.spec" and body["version"] == 2
    assert body["spec"]["description"] == "v2" and first.json()["spec"]["description"] == ""
    assert "s3cret" not in latest.text
    assert body["spec"]["terminals"]["sh"]["env"] == {"TOKEN": "<redacted>"}
    assert bad.status_code == 422 and bad.json()["error"]["details"][0]["loc"] == "version"
