"""``POST /v1/sessions/{id}/mcp``: the session's tools as an MCP server, driven by the
mcp SDK's own client over a real loopback server; MRTR for calls needing approval."""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest
import trio
from mcp import Client

from omnigent.model import ElicitationRequest

from .http_helpers import Server, open_server, scripted

ASK_SHELL = {
    "name": "ask_shell",
    "type": "ask_tools",
    "tools": ["sys_os_shell"],
    "reason": "run it?",
}


def tool_spec(**extra: Any) -> dict[str, Any]:
    return {**scripted("mcp-host", [{"say": "hi"}]), **extra}


def text(result: mcp_types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


async def mcp_url(server: Server, **spec: Any) -> tuple[str, str]:
    sid = await server.session(tool_spec(**spec))
    return sid, f"{server.url}/v1/sessions/{sid}/mcp"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_initialize_list_and_call(mode: str) -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    with trio.fail_after(30):
        async with open_server() as server:
            server.runtime.register_tool(shout)
            _, url = await mcp_url(server)
            async with Client(url, mode=mode) as client:
                assert client.server_info is not None and client.server_info.name == "omnigent"
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert {"sys_os_read", "sys_os_shell", "shout"} <= set(tools)
                assert tools["shout"].description == "Upper-case the text."
                result = await client.call_tool("shout", {"text": "quiet"})
                assert text(result) == "QUIET" and not result.is_error
                missing = await client.call_tool("nope", {})
                assert missing.is_error and text(missing).startswith("Error: unknown tool")
                era = "2026-07-28" if mode == "auto" else "2025-11-25"
                assert client.protocol_version == era


async def test_a_call_needing_approval_is_a_multi_round_trip() -> None:
    with trio.fail_after(30):
        async with open_server() as server:
            sid, url = await mcp_url(server, policies=[ASK_SHELL])
            seen: list[Any] = []

            async def elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
                seen.append(params)
                return mcp_types.ElicitResult(action="accept")

            async with (
                server.runtime.subscribe(sid) as events,
                Client(url, elicitation_callback=elicit) as client,
            ):
                result = await client.call_tool("sys_os_shell", {"command": "echo approved"})
                assert "approved" in text(result) and not result.is_error
                published = [e async for e in _until_resolved(events)]
            [params] = seen
            assert isinstance(params, mcp_types.ElicitRequestURLParams)
            assert params.message == "ask_shell: run it?"
            request = next(e for e in published if isinstance(e, ElicitationRequest))
            assert params.url == f"/approve/{sid}/{request.elicitation_id}"  # relative


async def _until_resolved(events: Any) -> Any:
    async for event in events:
        yield event
        if event.type == "response.elicitation_resolved":
            return


async def test_the_raw_round_trip_and_a_decline(monkeypatch: pytest.MonkeyPatch) -> None:
    with trio.fail_after(30):
        async with open_server() as server:
            parent = await server.session(scripted("parent", []))
            agent = await server.agent(tool_spec(policies=[ASK_SHELL]))
            answer = await server.client.post(
                "/v1/sessions", json={"agent_id": agent, "parent_session_id": parent}
            )
            sid = answer.json()["id"]
            path = f"/v1/sessions/{sid}/mcp"
            meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
            call = {"name": "sys_os_shell", "arguments": {"command": "echo no"}, "_meta": meta}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
            async with server.runtime.subscribe(parent) as mirrored:
                first = (await server.client.post(path, json=body)).json()["result"]
                assert first["resultType"] == "input_required"
                [(eid, prompt)] = first["inputRequests"].items()
                assert prompt["method"] == "elicitation/create"
                assert prompt == {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "url",
                        "message": "ask_shell: run it?",
                        "url": f"/approve/{sid}/{eid}",  # relative, as the original's
                    },
                }
                async for event in mirrored:  # the prompt is mirrored to the parent
                    if isinstance(event, ElicitationRequest):
                        break
                assert event.elicitation_id == eid and event.params.target_session_id == sid
            snapshot = (await server.client.get(f"/v1/sessions/{sid}")).json()
            assert [p["elicitation_id"] for p in snapshot["pending_elicitations"]] == [eid]

            forged = {**call, "requestState": "call_forged", "inputResponses": {}}
            bad = await server.client.post(path, json={**body, "id": 2, "params": forged})
            assert bad.json()["error"]["code"] == -32602

            retry = {
                **call,
                "requestState": first["requestState"],
                "inputResponses": {eid: {"action": "decline"}},
            }
            done = (await server.client.post(path, json={**body, "id": 3, "params": retry})).json()
            assert "result" in done, done
            result = done["result"]
            assert result["resultType"] == "complete" and result["isError"] is True
            assert result["content"][0]["text"].startswith("Error: denied by policy ask_shell")
            # Collected: the state is spent.
            again = await server.client.post(path, json={**body, "id": 4, "params": retry})
            assert again.json()["error"]["code"] == -32602


async def test_form_mode_and_an_answer_on_the_approval_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OMNIGENT_ELICITATION_MODE", "form")
    with trio.fail_after(30):
        async with open_server() as server:
            sid, _ = await mcp_url(server, policies=[ASK_SHELL])
            path = f"/v1/sessions/{sid}/mcp"
            meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
            call = {"name": "sys_os_shell", "arguments": {"command": "echo page"}, "_meta": meta}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
            first = (await server.client.post(path, json=body)).json()["result"]
            [(eid, prompt)] = first["inputRequests"].items()
            assert prompt["params"]["mode"] == "form"
            assert prompt["params"]["requestedSchema"]["type"] == "object"
            resolved = await server.client.post(
                f"/v1/sessions/{sid}/elicitations/{eid}/resolve", json={"action": "accept"}
            )
            assert resolved.json() == {"resolved": True}
            retry = {**call, "requestState": first["requestState"]}  # no response: answered
            done = (await server.client.post(path, json={**body, "params": retry})).json()
            assert "page" in done["result"]["content"][0]["text"]


async def test_a_handshake_era_call_holds_until_answered() -> None:
    with trio.fail_after(30):
        async with open_server() as server:
            sid, url = await mcp_url(server, policies=[ASK_SHELL])
            async with (
                server.runtime.subscribe(sid) as events,
                Client(url, mode="legacy") as client,
                trio.open_nursery() as nursery,
            ):

                async def approve() -> None:
                    async for event in events:
                        if isinstance(event, ElicitationRequest):
                            await server.runtime.resolve_elicitation(
                                sid, event.elicitation_id, "accept"
                            )
                            return

                nursery.start_soon(approve)
                result = await client.call_tool("sys_os_shell", {"command": "echo held"})
            assert "held" in text(result)


async def test_protocol_errors() -> None:
    with trio.fail_after(30):
        async with open_server() as server:
            sid, _ = await mcp_url(server)
            path = f"/v1/sessions/{sid}/mcp"
            post = server.client.post
            assert (
                await post(path, content=b"{nope", headers={"content-type": "application/json"})
            ).json()["error"]["code"] == -32700
            assert (await post(path, json=[1])).json()["error"]["code"] == -32600
            unknown = await post(path, json={"jsonrpc": "2.0", "id": 1, "method": "x/y"})
            assert unknown.json()["error"]["code"] == -32601
            bad = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 3}}
            assert (await post(path, json=bad)).json()["error"]["code"] == -32602
            note = await post(path, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert note.status_code == 202 and note.content == b""
            assert (await server.client.get(path)).status_code == 405
            assert (await post("/v1/sessions/conv_nope/mcp", json=bad)).status_code == 404
