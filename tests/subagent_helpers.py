"""Helpers for the sub-agent tests: orchestrator specs, a driven parent, waits."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import trio

import omnigent
from omnigent.harnesses.base import HarnessEnv, TurnContext, TurnRequest
from omnigent.model import MessageItem, SessionStatusChanged, item_text

Step = Callable[[TurnContext], Awaitable[None]]

LINE = re.compile(r"^\[System: sub-agent task (\S+) (completed|failed|cancelled) — (.*)\]$", re.M)


def worker(name: str, script: list[Any] | None = None, **config: Any) -> dict[str, Any]:
    """A sub-agent spec (scripted by default)."""
    cfg: dict[str, Any] = {"harness": "scripted", **config}
    if script is not None:
        cfg["script"] = script
    return {"name": name, "description": f"the {name}", "executor": {"config": cfg}}


def lead(
    workers: list[dict[str, Any]],
    *,
    name: str = "lead",
    grant: list[str] | None = None,
    harness: str = "driver",
    **extra: Any,
) -> dict[str, Any]:
    """An orchestrator spec whose turns a :class:`Driver` plays."""
    return {
        "name": name,
        "executor": {"type": "omnigent", "config": {"harness": harness}},
        "sub_agents": workers,
        "tools": {"agents": grant if grant is not None else [w["name"] for w in workers]},
        **extra,
    }


class Driver:
    """A harness double for parents: each turn plays the next planned step.

    ``outputs`` collects every tool output, ``inputs`` the text of every turn's input.
    """

    def __init__(self) -> None:
        self.plan: list[Step | None] = []
        self.outputs: list[str] = []
        self.inputs: list[str] = []
        self.requests: list[TurnRequest] = []
        self.envs: list[HarnessEnv] = []

    def factory(self, env: HarnessEnv) -> Any:
        self.envs.append(env)
        return _Driven(self)

    def then(self, *steps: Step | None) -> Driver:
        self.plan.extend(steps)
        return self


class _Driven:
    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        self._driver.requests.append(request)
        self._driver.inputs.append("\n".join(item_text(m) for m in request.input))
        step = self._driver.plan.pop(0) if self._driver.plan else None
        if step is not None:
            await step(ctx)

    async def aclose(self) -> None:
        return None


def call(driver: Driver, name: str, args: dict[str, Any] | None = None, *more: Any) -> Step:
    """A step making tool calls (``name, args`` pairs) and keeping their outputs."""
    calls = [(name, args or {}), *zip(more[::2], more[1::2], strict=True)]

    async def step(ctx: TurnContext) -> None:
        for tool, tool_args in calls:
            driver.outputs.append(await ctx.call_tool(tool, tool_args))

    return step


def say(text: str) -> Step:
    async def step(ctx: TurnContext) -> None:
        async with ctx.open_message() as message:
            await message.write(text)

    return step


def refused(output: str) -> str:
    """The text of a free-text refusal ``{"error": "<text>"}`` (nothing else in it)."""
    answer = json.loads(output)
    assert isinstance(answer, dict) and list(answer) == ["error"], output
    text: str = answer["error"]
    return text


def handle(output: str) -> dict[str, Any]:
    """A ``sys_session_send`` output as JSON (failing clearly on an ``Error:``)."""
    assert not output.startswith("Error"), output
    decoded: dict[str, Any] = json.loads(output)
    return decoded


async def inbox_lines(rt: omnigent.Runtime, session_id: str) -> list[tuple[str, str, str]]:
    """``(task_id, status, rest)`` of every sub-agent line the session was woken with."""
    found = []
    for item in (await rt.list_items(session_id)).data:
        if isinstance(item, MessageItem) and item.role == "user":
            found += LINE.findall(item_text(item))
    return found


async def wait_lines(
    rt: omnigent.Runtime, session_id: str, count: int, timeout: float = 10
) -> list[tuple[str, str, str]]:
    """Wait (on the session's events) until it was woken with ``count`` lines."""
    with trio.fail_after(timeout):
        async with rt.subscribe(session_id, after=0) as events:
            async for event in events:
                if isinstance(event, SessionStatusChanged) and event.status == "idle":
                    lines = await inbox_lines(rt, session_id)
                    if len(lines) >= count:
                        return lines
    raise AssertionError("the stream ended")


async def wait_status(rt: omnigent.Runtime, session_id: str, *wanted: str) -> None:
    """Wait until the session's status (as events tell) is one of ``wanted``."""
    with trio.fail_after(10):
        if (await rt.get_session(session_id)).status in wanted:
            return
        async with rt.subscribe(session_id, after=0) as events:
            async for event in events:
                if isinstance(event, SessionStatusChanged) and event.status in wanted:
                    return
