"""Identity and sharing over HTTP (``--auth header``), on a real loopback socket.

Alice owns; Bob is refused until she shares; Carol stands for everyone else. Route
families added by other modules (elicitations, hooks, the approval page) are found in
the app's URL map, so the fence is checked on every session route that exists.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import httpx
import trio

from omnigent.transports.http._params import IDENTITY_HEADER

from .http_helpers import HTTPX_GENERATORS, Server, open_server, scripted
from .test_http_api import assert_error

pytestmark = HTTPX_GENERATORS

ALICE, BOB, CAROL = "alice@example.com", "bob@example.com", "carol@example.com"
PNG = b"\x89PNG\r\n\x1a\n" + b"x" * 64
SNF = "session_not_found"


def message(*blocks: dict[str, Any]) -> dict[str, Any]:
    content = list(blocks) or [{"type": "input_text", "text": "hello"}]
    return {"type": "message", "data": {"content": content}}


@attrs.define
class World:
    """A header-auth server and one client per user."""

    server: Server
    users: dict[str, httpx.AsyncClient]

    def __getitem__(self, user: str) -> httpx.AsyncClient:
        return self.users[user]

    async def session(self, user: str = ALICE, **body: Any) -> str:
        agent = await self[user].post("/v1/agents", json=scripted(f"bot-{user[0]}"))
        assert agent.status_code == 201, agent.text
        made = await self[user].post("/v1/sessions", json={"agent_id": agent.json()["id"], **body})
        assert made.status_code == 201, made.text
        session_id: str = made.json()["id"]
        return session_id

    async def grant(self, session_id: str, user: str, level: int) -> None:
        url = f"/v1/sessions/{session_id}/permissions"
        answer = await self[ALICE].put(url, json={"user_id": user, "level": level})
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"user_id": user, "level": level, "owner": False}

    async def upload(self, user: str) -> str:
        answer = await self[user].post("/v1/files", files={"file": ("p.png", PNG, "image/png")})
        assert answer.status_code == 201, answer.text
        file_id: str = answer.json()["id"]
        return file_id

    async def finished_turn(self, session_id: str) -> None:
        """Send Alice's message and wait for its turn to end (the session has events)."""
        runtime = self.server.runtime
        async with runtime.subscribe(session_id) as events:
            sent = await self[ALICE].post(f"/v1/sessions/{session_id}/events", json=message())
            assert sent.status_code == 202, sent.text
            async for event in events:
                if event.type == "session.status" and event.status == "idle":
                    break

    def session_routes(self) -> list[tuple[str, str]]:
        """``(method, rule)`` of every route that names a session, whoever made it."""
        found = []
        for rule in self.server.app.url_map.iter_rules():
            if "<session_id>" in rule.rule:
                for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                    found.append((method, rule.rule))
        return found


@asynccontextmanager
async def open_world() -> AsyncIterator[World]:
    async with open_server(auth="header") as server, AsyncExitStack() as stack:
        users = {}
        for user in (ALICE, BOB, CAROL):
            client = httpx.AsyncClient(
                base_url=server.url, headers={IDENTITY_HEADER: user}, timeout=10
            )
            users[user] = await stack.enter_async_context(client)
        yield World(server, users)


def fill(rule: str, session_id: str, user_id: str = BOB) -> str:
    """A concrete URL for ``rule``; any other id is unknown (access is checked first)."""
    url = rule.replace("<session_id>", session_id).replace("<user_id>", user_id)
    return re.sub(r"<(?:\w+:)?(\w+)>", r"\1_none", url)


def body_of(rule: str) -> dict[str, Any]:
    """A body of the type the route reads: a form for the approval page, else JSON."""
    return {"data": {"action": "accept"}} if rule.startswith("/approve/") else {"json": {}}


async def status_of(client: httpx.AsyncClient, method: str, url: str, **options: Any) -> int:
    """The status of a request, without reading a streaming body past its headers."""
    async with client.stream(method, url, **options) as answer:
        return answer.status_code


async def test_missing_identity_is_401_everywhere_but_health() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            session_id = await world.session()
            anonymous = world.server.client
            assert (await anonymous.get("/health")).json()["status"] == "ok"
            checked = 0
            for rule in world.server.app.url_map.iter_rules():
                if rule.endpoint == "static" or rule.rule == "/health":
                    continue
                url = fill(rule.rule, session_id)
                for method in rule.methods - {"HEAD", "OPTIONS"}:
                    answer = await anonymous.request(method, url, json={})
                    assert_error(answer, 401, "unauthorized")
                    checked += 1
            assert checked >= 17
            snapshot = await world[ALICE].get(f"/v1/sessions/{session_id}")
            assert snapshot.status_code == 200


async def test_a_session_is_invisible_to_other_users() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            session_id = await world.session()
            await world.finished_turn(session_id)
            child = await world.session(parent_session_id=session_id)
            bob = world[BOB]
            routes = world.session_routes()
            assert ("GET", "/v1/sessions/<session_id>/stream") in routes
            assert ("PUT", "/v1/sessions/<session_id>/permissions") in routes
            for method, rule in routes:
                for target in (session_id, child):
                    url = fill(rule, target)
                    answer = await bob.request(method, url, **body_of(rule))
                    assert answer.status_code == 404, f"{method} {url}: {answer.text}"
                    if rule.startswith("/v1/"):
                        assert_error(answer, 404, SNF)
            streamed = await status_of(bob, "GET", f"/v1/sessions/{session_id}/stream?after=0")
            assert streamed == 404
            turn = f"/v1/sessions/{session_id}/events?stream=true"
            assert await status_of(bob, "POST", turn, json=message()) == 404
            agent_id = (await world[ALICE].get(f"/v1/sessions/{session_id}")).json()["agent_id"]
            adopt = {"agent_id": agent_id, "parent_session_id": session_id}
            assert_error(await bob.post("/v1/sessions", json=adopt), 404, SNF)
            listed = (await bob.get("/v1/sessions")).json()
            assert listed["data"] == [] and listed["has_more"] is False
            under = (await bob.get(f"/v1/sessions?parent_session_id={session_id}")).json()
            assert under["data"] == []
            # Refusals changed nothing.
            items = (await world[ALICE].get(f"/v1/sessions/{session_id}/items")).json()
            assert len(items["data"]) == 2
            assert (await world[ALICE].get(f"/v1/sessions/{child}")).status_code == 200


async def test_a_read_grant_reads_but_does_not_write() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            session_id = await world.session()
            await world.finished_turn(session_id)
            await world.grant(session_id, BOB, 1)
            bob, base = world[BOB], f"/v1/sessions/{session_id}"
            assert (await bob.get(base)).json()["id"] == session_id
            assert len((await bob.get(f"{base}/items")).json()["data"]) == 2
            assert (await bob.get(f"{base}/child_sessions")).json()["data"] == []
            assert len((await bob.get(f"{base}/permissions")).json()["data"]) == 2
            async with bob.stream("GET", f"{base}/stream?after=0") as stream:
                assert stream.status_code == 200
                first = await anext(stream.aiter_lines())
                assert first.startswith("id: 1")
            assert [s["id"] for s in (await bob.get("/v1/sessions")).json()["data"]] == [session_id]
            for method, rule in world.session_routes():
                if method == "POST" and rule.endswith("/fork"):
                    # Reading is enough to fork: the fork is a new session, bob's own.
                    answer = await bob.post(fill(rule, session_id), json={})
                    assert answer.status_code == 201, answer.text
                    fork = answer.json()["id"]
                    assert (await world[ALICE].get(f"/v1/sessions/{fork}")).status_code == 404
                    continue
                if method != "GET":
                    answer = await bob.request(method, fill(rule, session_id), **body_of(rule))
                    assert answer.status_code == 403, f"{method} {rule}: {answer.text}"
                    if rule.startswith("/v1/"):
                        assert_error(answer, 403, "forbidden")
            for body in (message(), {"type": "interrupt"}, {"type": "stop_session"}):
                assert_error(await bob.post(f"{base}/events", json=body), 403, "forbidden")
            turn = f"{base}/events?stream=true"
            assert await status_of(bob, "POST", turn, json=message()) == 403
            assert_error(await bob.patch(base, json={"title": "mine"}), 403, "forbidden")
            assert_error(await bob.delete(base), 403, "forbidden")
            share = {"user_id": CAROL, "level": 1}
            assert_error(await bob.put(f"{base}/permissions", json=share), 403, "forbidden")
            agent_id = (await bob.get(base)).json()["agent_id"]
            adopt = {"agent_id": agent_id, "parent_session_id": session_id}
            assert_error(await bob.post("/v1/sessions", json=adopt), 403, "forbidden")
            items = (await world[ALICE].get(f"{base}/items")).json()
            assert len(items["data"]) == 2


async def test_an_edit_grant_writes_but_does_not_delete_or_share() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            session_id = await world.session()
            await world.grant(session_id, BOB, 2)
            bob, base = world[BOB], f"/v1/sessions/{session_id}"
            sent = await bob.post(f"{base}/events", json=message())
            assert sent.status_code == 202, sent.text
            assert (await bob.patch(base, json={"title": "bob's"})).json()["title"] == "bob's"
            assert (await bob.post(f"{base}/events", json={"type": "interrupt"})).status_code == 202
            assert_error(await bob.delete(base), 403, "forbidden")
            share = {"user_id": CAROL, "level": 1}
            assert_error(await bob.put(f"{base}/permissions", json=share), 403, "forbidden")
            assert_error(await bob.delete(f"{base}/permissions/{BOB}"), 403, "forbidden")
            # Edit on the parent is enough to start a child; Bob owns the child.
            agent_id = (await bob.get(base)).json()["agent_id"]
            adopt = {"agent_id": agent_id, "parent_session_id": session_id}
            child = await bob.post("/v1/sessions", json=adopt)
            assert child.status_code == 201, child.text
            child_id = child.json()["id"]
            grants = await world.server.runtime.list_grants(child_id)
            assert [(g.user_id, g.owner) for g in grants] == [(BOB, True)]
            assert (await world[ALICE].get(f"/v1/sessions/{child_id}")).status_code == 200
            assert (await bob.delete(f"/v1/sessions/{child_id}")).status_code == 200
            assert (await world[ALICE].get(base)).status_code == 200


async def test_public_is_read_only() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            session_id = await world.session()
            base = f"/v1/sessions/{session_id}"
            alice, carol = world[ALICE], world[CAROL]
            assert_error(await carol.get(base), 404, SNF)
            await world.grant(session_id, "__public__", 1)
            assert (await carol.get(base)).status_code == 200
            assert (await carol.get(f"{base}/items")).status_code == 200
            assert await status_of(carol, "GET", f"{base}/stream") == 200
            assert [s["id"] for s in (await carol.get("/v1/sessions")).json()["data"]] == [
                session_id
            ]
            assert_error(await carol.post(f"{base}/events", json=message()), 403, "forbidden")
            assert_error(await carol.patch(base, json={"title": "x"}), 403, "forbidden")
            for level in (2, 3):
                wider = {"user_id": "__public__", "level": level}
                answer = await alice.put(f"{base}/permissions", json=wider)
                assert_error(answer, 422, "invalid_request", "level")
            grants = (await alice.get(f"{base}/permissions")).json()["data"]
            assert {"user_id": "__public__", "level": 1, "owner": False} in grants


async def test_permission_routes_validate_and_keep_the_owner() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            session_id = await world.session()
            alice, base = world[ALICE], f"/v1/sessions/{session_id}/permissions"
            IR = "invalid_request"
            bad: list[tuple[Any, str]] = [
                ({"user_id": BOB, "level": 4}, "level"),
                ({"user_id": BOB, "level": 0}, "level"),
                ({"user_id": BOB, "level": "1"}, "level"),
                ({"user_id": BOB, "level": True}, "level"),
                ({"user_id": BOB}, "level"),
                ({"level": 1}, "user_id"),
                ({"user_id": "", "level": 1}, "user_id"),
                ({"user_id": 7, "level": 1}, "user_id"),
                ({"user_id": BOB, "level": 1, "extra": 1}, "extra"),
                ([BOB, 1], "body"),
            ]
            for body, loc in bad:
                assert_error(await alice.put(base, json=body), 422, IR, loc)
            owner_change = await alice.put(base, json={"user_id": ALICE, "level": 1})
            assert_error(owner_change, 409, "conflict")
            assert_error(await alice.delete(f"{base}/{ALICE}"), 409, "conflict")
            assert (await alice.get(base)).json() == {
                "object": "list",
                "data": [{"user_id": ALICE, "level": 3, "owner": True}],
            }
            await world.grant(session_id, BOB, 1)
            await world.grant(session_id, BOB, 3)  # a new grant replaces the old one
            listed = (await alice.get(base)).json()["data"]
            assert listed == [
                {"user_id": ALICE, "level": 3, "owner": True},
                {"user_id": BOB, "level": 3, "owner": False},
            ]
            # Manage is enough to share and to revoke (Bob revokes Carol, then himself).
            carol = await world[BOB].put(base, json={"user_id": CAROL, "level": 2})
            assert carol.status_code == 200, carol.text
            gone = await world[BOB].delete(f"{base}/{CAROL}")
            assert gone.json() == {"user_id": CAROL, "deleted": True}
            again = await world[BOB].delete(f"{base}/{CAROL}")
            assert again.json() == {"user_id": CAROL, "deleted": False}
            assert (await world[BOB].delete(f"{base}/{BOB}")).json()["deleted"] is True
            assert_error(await world[BOB].get(f"/v1/sessions/{session_id}"), 404, SNF)
            nope = "/v1/sessions/conv_none/permissions"
            assert_error(await alice.put(nope, json={"user_id": BOB, "level": 1}), 404, SNF)
            assert_error(await alice.get(nope), 404, SNF)
            assert_error(await alice.delete(f"{nope}/{BOB}"), 404, SNF)


async def test_children_share_the_roots_grants() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            root = await world.session()
            middle = await world.session(parent_session_id=root)
            leaf = await world.session(parent_session_id=middle)
            bob = world[BOB]
            await world.grant(root, BOB, 1)
            for session_id in (middle, leaf):
                assert (await bob.get(f"/v1/sessions/{session_id}")).status_code == 200
                sent = await bob.post(f"/v1/sessions/{session_id}/events", json=message())
                assert_error(sent, 403, "forbidden")
            kids = (await bob.get(f"/v1/sessions/{root}/child_sessions")).json()["data"]
            assert [k["id"] for k in kids] == [middle]
            await world.grant(root, BOB, 2)
            sent = await bob.post(f"/v1/sessions/{leaf}/events", json=message())
            assert sent.status_code == 202, sent.text
            assert_error(await bob.delete(f"/v1/sessions/{leaf}"), 403, "forbidden")
            assert (await world[ALICE].delete(f"/v1/sessions/{root}/permissions/{BOB}")).json()[
                "deleted"
            ]
            assert_error(await bob.get(f"/v1/sessions/{leaf}"), 404, SNF)
            # The root's owner owns the whole tree: no grant to her on a child is needed
            # or allowed.
            owner_on_leaf = {"user_id": ALICE, "level": 1}
            put = await world[ALICE].put(f"/v1/sessions/{leaf}/permissions", json=owner_on_leaf)
            assert_error(put, 409, "conflict")


async def test_session_lists_hold_only_readable_sessions() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            mine = await world.session(ALICE)
            theirs = await world.session(BOB)
            public = await world.session(CAROL)
            cpub = f"/v1/sessions/{public}/permissions"
            answer = await world[CAROL].put(cpub, json={"user_id": "__public__", "level": 1})
            assert answer.status_code == 200
            # A grant on a middle session reaches that session and everything below it.
            middle = await world.session(ALICE, parent_session_id=mine)
            leaf = await world.session(ALICE, parent_session_id=middle)
            await world.grant(middle, BOB, 1)

            async def ids(user: str, query: str = "") -> set[str]:
                page = (await world[user].get(f"/v1/sessions{query}")).json()
                return {s["id"] for s in page["data"]}

            assert await ids(ALICE) == {mine, middle, leaf, public}
            assert await ids(BOB) == {theirs, public, middle, leaf}
            assert await ids(CAROL) == {public}
            assert await ids(BOB, f"?parent_session_id={middle}") == {leaf}
            assert await ids(BOB, f"?parent_session_id={mine}") == {middle}
            assert await ids(ALICE, f"?parent_session_id={middle}") == {leaf}
            kids = f"/v1/sessions/{middle}/child_sessions"
            assert [k["id"] for k in (await world[BOB].get(kids)).json()["data"]] == [leaf]
            assert [k["id"] for k in (await world[ALICE].get(kids)).json()["data"]] == [leaf]
            assert (await world[BOB].get(f"/v1/sessions/{leaf}")).status_code == 200
            assert_error(await world[BOB].get(f"/v1/sessions/{mine}"), 404, SNF)
            assert_error(await world[CAROL].get(f"/v1/sessions/{leaf}"), 404, SNF)


async def test_files_belong_to_their_uploader() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            alices, bobs = await world.upload(ALICE), await world.upload(BOB)
            assert (await world[ALICE].get(f"/v1/files/{alices}")).json()["id"] == alices
            assert (await world[ALICE].get(f"/v1/files/{alices}/content")).content == PNG
            for url in (f"/v1/files/{alices}", f"/v1/files/{alices}/content"):
                assert_error(await world[BOB].get(url), 404, "file_not_found")
            session_id = await world.session()
            await world.grant(session_id, BOB, 2)
            events = f"/v1/sessions/{session_id}/events"
            loc = "data.content[0].file_id"
            for url in (events, f"{events}?stream=true"):
                taken = message({"type": "input_image", "file_id": alices})
                answer = await world[BOB].post(url, json=taken)
                assert_error(answer, 422, "invalid_request", loc)
                # Worded as for a file that does not exist: a refusal leaks nothing.
                assert answer.json()["error"]["message"] == f"unknown file {alices!r} @ {loc}"
            own = message({"type": "input_image", "file_id": bobs})
            assert (await world[BOB].post(events, json=own)).status_code == 202
            agent_id = (await world[BOB].get(f"/v1/sessions/{session_id}")).json()["agent_id"]
            image = {"type": "input_image", "file_id": alices}
            seed = {"type": "message", "data": {"role": "user", "content": [image]}}
            answer = await world[BOB].post(
                "/v1/sessions", json={"agent_id": agent_id, "initial_items": [seed]}
            )
            assert_error(answer, 422, "invalid_request", "initial_items[0].data.content[0].file_id")


async def test_agents_are_shared_but_names_are_owned() -> None:
    with trio.fail_after(20):
        async with open_world() as world:
            made = await world[ALICE].post("/v1/agents", json=scripted("helper"))
            agent_id = made.json()["id"]
            assert [a["id"] for a in (await world[BOB].get("/v1/agents")).json()["data"]] == [
                agent_id
            ]
            assert (await world[BOB].get(f"/v1/agents/{agent_id}")).status_code == 200
            taken = await world[BOB].post("/v1/agents", json=scripted("helper"))
            assert_error(taken, 403, "forbidden")
            session = await world[BOB].post("/v1/sessions", json={"agent_id": agent_id})
            assert session.status_code == 201
            assert (await world[ALICE].get(f"/v1/agents/{agent_id}")).json()["version"] == 1


async def test_without_auth_everyone_is_local_and_unchecked() -> None:
    with trio.fail_after(20):
        async with open_server() as server:
            session_id = await server.session()
            base = f"/v1/sessions/{session_id}/permissions"
            anyone = {IDENTITY_HEADER: BOB}  # ignored under --auth none
            assert (await server.client.get(base, headers=anyone)).json()["data"] == [
                {"user_id": "local", "level": 3, "owner": True}
            ]
            granted = await server.client.put(base, json={"user_id": BOB, "level": 1})
            assert granted.status_code == 200
            assert_error(
                await server.client.put(base, json={"user_id": "local", "level": 1}),
                409,
                "conflict",
            )
            up = await server.client.post("/v1/files", files={"file": ("p.png", PNG, "image/png")})
            got = await server.client.get(f"/v1/files/{up.json()['id']}", headers=anyone)
            assert got.status_code == 200
            assert (await server.client.delete(f"/v1/sessions/{session_id}")).status_code == 200
