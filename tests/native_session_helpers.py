"""Helpers for tests that run the claude-code and codex harnesses on the real CLIs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.model import (
    ElicitationRequest,
    Event,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OutputItemDone,
    SessionStatusChanged,
)
from omnigent.testing import collect_turn

from .external_helpers import alive

CLAUDE_MODEL = "claude-sonnet-4-5"
CODEX_MODEL = "gpt-5.5"  # in Codex's bundled catalog (docs/harnesses-native.md)

Answer = Callable[[ElicitationRequest], Awaitable[tuple[str, Any] | None]]
"""Answers an elicitation: ``(action, content)``, or ``None`` to leave it open."""


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLIs' shells read ``$HOME`` (profiles, caches): a private one per test."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def native_spec(
    harness: str, base_url: str, *, name: str = "coder", cwd: Path | None = None, **extra: Any
) -> dict[str, Any]:
    """An agent spec for ``harness`` pointed at a fake model server."""
    model = CODEX_MODEL if harness.startswith("codex") else CLAUDE_MODEL
    config: dict[str, Any] = {
        "harness": harness,
        "model": model,
        "base_url": base_url,
        "api_key": "sk-omnigent-fake",
        **extra.pop("config", {}),
    }
    spec: dict[str, Any] = {
        "name": name,
        "prompt": "You are a careful coding agent.",
        "executor": {"type": "omnigent", "config": config},
        **extra,
    }
    if cwd is not None:
        spec["os_env"] = {"type": "caller_process", "cwd": str(cwd)}
    return spec


async def accept_all(request: ElicitationRequest) -> tuple[str, Any] | None:
    return "accept", None


async def decline_all(request: ElicitationRequest) -> tuple[str, Any] | None:
    return "decline", None


async def turn(
    rt: omnigent.Runtime, session_id: str, text: str, answer: Answer | None = None
) -> list[Event]:
    """Send ``text`` and collect the turn's events, answering elicitations with
    ``answer`` (an unexpected elicitation fails the test)."""
    async with rt.subscribe(session_id) as events:
        await rt.send_message(session_id, text)
        seen: list[Event] = []
        async for event in events:
            seen.append(event)
            if isinstance(event, ElicitationRequest):
                assert answer is not None, f"an unexpected elicitation: {event.params}"
                reply = await answer(event)
                if reply is not None:
                    await rt.resolve_elicitation(session_id, event.elicitation_id, *reply)
            if isinstance(event, SessionStatusChanged) and event.status in (
                "idle",
                "failed",
                "cancelled",
            ):
                return seen
    raise AssertionError("the stream ended")


def statuses(events: list[Event]) -> list[str]:
    return [e.status for e in events if isinstance(e, SessionStatusChanged)]


def said(events: list[Event]) -> str:
    """Every assistant message of the turn, joined."""
    return "".join(
        "".join(getattr(b, "text", "") for b in e.item.content)
        for e in events
        if isinstance(e, OutputItemDone)
        and isinstance(e.item, MessageItem)
        and e.item.role == "assistant"
    )


def asked(events: list[Event]) -> list[ElicitationRequest]:
    return [e for e in events if isinstance(e, ElicitationRequest)]


def outputs(events: list[Event]) -> list[str]:
    return [
        e.item.output
        for e in events
        if isinstance(e, OutputItemDone) and isinstance(e.item, FunctionCallOutputItem)
    ]


def calls(events: list[Event]) -> list[FunctionCallItem]:
    return [
        e.item
        for e in events
        if isinstance(e, OutputItemDone)
        and isinstance(e.item, FunctionCallItem)
        and e.item.status == "completed"
    ]


def native_processes(rt: omnigent.Runtime) -> list[int]:
    """Pids of the live processes the runtime's manager owns."""
    assert rt.processes is not None
    return [p.pid for p in rt.processes.processes]


def process_of(rt: omnigent.Runtime, harness: str, session_id: str) -> Any:
    assert rt.processes is not None
    return rt.processes.get(f"{harness}:{session_id}")


async def wait_dead(pids: list[int], timeout: float = 10) -> None:
    """Wait until none of ``pids`` is alive (reaped by the runtime meanwhile)."""
    with trio.fail_after(timeout):
        while any(alive(pid) for pid in pids):
            await trio.sleep(0.02)


async def interrupt_when(
    rt: omnigent.Runtime, session_id: str, text: str, ready: Callable[[], Awaitable[None]]
) -> tuple[list[Event], float]:
    """Send ``text``, wait for ``ready()``, interrupt; the rest of the turn and how
    long the interrupt took to end it."""
    async with rt.subscribe(session_id) as events:
        await rt.send_message(session_id, text)
        await ready()
        started = trio.current_time()
        assert await rt.interrupt(session_id)
        rest = await collect_turn(events)
        return rest, trio.current_time() - started
