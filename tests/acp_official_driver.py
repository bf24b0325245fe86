"""Drive omnigent with the official ACP Python client (``agent-client-protocol``).

The client is asyncio-based, so it runs here, in its own process, and the Trio tests
run this script and read its report: one JSON object on stdout.

    python tests/acp_official_driver.py stdio CONFIG_JSON   # spawns `omnigent stdio`
    python tests/acp_official_driver.py ws CONFIG_JSON      # connects to a /v1/ws URL

``CONFIG_JSON`` names the agent specs (or the URL), the database, the working
directory. Each flow the tests check — prompt, cancel (timed), permissions
allow/reject/always, list, load in a second process, a 2 MiB prompt line — runs in
order and adds its observations to the report. Observations only; the tests assert.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from acp import connect_to_agent, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    EnvVariable,
    FileSystemCapabilities,
    McpServerStdio,
    RequestPermissionResponse,
)


class Editor:
    """The client side: records updates, answers permissions from a script."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.asked: list[dict[str, Any]] = []
        self.answers: list[str | None] = []
        self.chunk = asyncio.Event()
        self.permission = asyncio.Event()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.asked.append(
            {
                "sessionId": session_id,
                "title": tool_call.title,
                "options": [o.option_id for o in options],
            }
        )
        self.permission.set()
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "wait":  # hold the request until the agent withdraws it
            await asyncio.sleep(3600)
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=answer, outcome="selected")
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        dumped = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.updates.append((session_id, dumped))
        if dumped.get("sessionUpdate") == "agent_message_chunk":
            self.chunk.set()

    def of(self, session_id: str, kind: str) -> list[dict[str, Any]]:
        return [u for s, u in self.updates if s == session_id and u["sessionUpdate"] == kind]

    def text(self, session_id: str) -> str:
        return "".join(u["content"]["text"] for u in self.of(session_id, "agent_message_chunk"))


Opener = Callable[[Editor, str], Any]


@asynccontextmanager
async def stdio_agent(
    editor: Editor, spec: str, config: dict[str, Any], *options: str
) -> AsyncIterator[Any]:
    env = {"OMNIGENT_HOME": config["home"], "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    command = ["-m", "omnigent", "stdio", "--agent", spec, "--db", config["db"], *options]
    async with spawn_agent_process(
        editor, sys.executable, *command, env=env, transport_kwargs={"stderr": None}
    ) as (conn, _process):
        yield conn


@asynccontextmanager
async def ws_agent(editor: Editor, agent: str, config: dict[str, Any]) -> AsyncIterator[Any]:
    import functools

    from acp.ws import client as ws_client

    # The websockets library refuses frames over 1 MiB by default, and session/load
    # replays the 2 MiB prompt: lift the client's limit (omnigent's is 64 MiB).
    ws_client.ws_connect = functools.partial(ws_client.ws_connect, max_size=None)
    transport = await ws_client.create_websocket_stream(f"{config['url']}?agent={agent}")
    conn = connect_to_agent(editor, transport)
    try:
        yield conn
    finally:
        await conn.close()


async def initialize(conn: Any, report: dict[str, Any]) -> None:
    caps = ClientCapabilities(
        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False)
    )
    answer = await conn.initialize(protocol_version=1, client_capabilities=caps)
    report["initialize"] = answer.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run(kind: str, config: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    opener = stdio_agent if kind == "stdio" else ws_agent
    cwd = config["cwd"]
    specs = config["specs"]

    # -- prompt, list, a 2 MiB line --------------------------------------------------
    editor = Editor()
    async with opener(editor, specs["talker"], config) as conn:
        await initialize(conn, report)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("hello")])
        report["prompt"] = {"stopReason": answer.stop_reason, "text": editor.text(sid)}
        big = "y" * (2 * 1024 * 1024)
        answer = await conn.prompt(session_id=sid, prompt=[text_block(big)])
        report["big"] = {"stopReason": answer.stop_reason}
        listed = await conn.list_sessions(cwd=cwd)
        report["list"] = [s.session_id for s in listed.sessions]
        report["list_other_cwd"] = [
            s.session_id for s in (await conn.list_sessions(cwd="/elsewhere")).sessions
        ]
        report["session"] = sid

    # -- load in a second process (or connection) -----------------------------------
    editor = Editor()
    async with opener(editor, specs["talker"], config) as conn:
        await initialize(conn, report)
        await conn.load_session(cwd=cwd, session_id=report["session"], mcp_servers=[])
        report["load"] = {
            "user": [
                u["content"].get("text", "")[:20]
                for u in editor.of(report["session"], "user_message_chunk")
            ],
            "agent": editor.text(report["session"]),
        }
        answer = await conn.prompt(session_id=report["session"], prompt=[text_block("more")])
        report["load"]["after"] = answer.stop_reason

    # -- cancel, timed ---------------------------------------------------------------
    editor = Editor()
    async with opener(editor, specs["sleeper"], config) as conn:
        await initialize(conn, report)
        sid = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("go")]))
        await asyncio.wait_for(editor.chunk.wait(), 10)
        started = time.perf_counter()
        await conn.cancel(session_id=sid)
        answer = await asyncio.wait_for(prompt, 10)
        report["cancel"] = {
            "stopReason": answer.stop_reason,
            "seconds": time.perf_counter() - started,
        }

    # -- permissions: allow, reject, always, and a cancel while asking ----------------
    editor = Editor()
    async with opener(editor, specs["asker"], config) as conn:
        await initialize(conn, report)
        sid = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        outcomes: list[dict[str, Any]] = []
        editor.answers = ["allow_once", "reject_once", "allow_always"]
        for _ in range(4):  # the fourth is remembered: nobody is asked
            answer = await conn.prompt(session_id=sid, prompt=[text_block("run it")])
            results = [
                u
                for u in editor.of(sid, "tool_call_update")
                if u.get("status") in ("completed", "failed")
            ]
            outcomes.append({"stopReason": answer.stop_reason, "tool": results[-1]["status"]})
        report["permissions"] = {"outcomes": outcomes, "asked": list(editor.asked)}
        editor.answers = ["wait"]
        editor.permission.clear()
        other = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
        prompt = asyncio.create_task(conn.prompt(session_id=other, prompt=[text_block("again")]))
        await asyncio.wait_for(editor.permission.wait(), 10)
        started = time.perf_counter()
        await conn.cancel(session_id=other)
        answer = await asyncio.wait_for(prompt, 10)
        report["cancel_while_asking"] = {
            "stopReason": answer.stop_reason,
            "seconds": time.perf_counter() - started,
        }
    if "mcp" in config:
        await mcp_flows(config, report)
    return report


async def mcp_flows(config: dict[str, Any], report: dict[str, Any]) -> None:
    """The editor passes a stdio MCP server: used by the agent; refused with the switch."""
    mcp = config["mcp"]

    def server(pid_file: str) -> McpServerStdio:
        env = [EnvVariable(name="MCP_PID_FILE", value=pid_file)]
        return McpServerStdio(name="Calc", command=mcp["command"], args=mcp["args"], env=env)

    editor = Editor()
    async with stdio_agent(editor, config["specs"]["adder"], config) as conn:
        await initialize(conn, report)
        report["mcp_capabilities"] = report["initialize"]["agentCapabilities"]["mcpCapabilities"]
        session = await conn.new_session(cwd=config["cwd"], mcp_servers=[server(mcp["pid"])])
        sid = session.session_id
        answer = await conn.prompt(session_id=sid, prompt=[text_block("add")])
        report["mcp"] = {
            "stopReason": answer.stop_reason,
            "meta": session.field_meta,
            "tool": editor.of(sid, "tool_call_update"),
        }
    editor = Editor()
    async with stdio_agent(editor, config["specs"]["adder"], config, "--no-client-mcp") as conn:
        await initialize(conn, report)
        off = await conn.new_session(cwd=config["cwd"], mcp_servers=[server(mcp["pid_off"])])
        answer = await conn.prompt(session_id=off.session_id, prompt=[text_block("add")])
        report["mcp_off"] = {
            "stopReason": answer.stop_reason,
            "meta": off.field_meta,
            "capabilities": report["initialize"]["agentCapabilities"]["mcpCapabilities"],
        }


def main() -> None:
    kind, raw = sys.argv[1], sys.argv[2]
    report = asyncio.run(asyncio.wait_for(run(kind, json.loads(raw)), 120))
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
