"""External harnesses end to end: real processes on real Unix sockets.

One harness is written with nothing but the standard library (the protocol is the
contract, not the scaffold); the other with :mod:`omnigent.harnesses.scaffold`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.external._harness import external_harness, model_variable
from omnigent.model import (
    ElicitationRequest,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseFailed,
    SessionStatusChanged,
)
from omnigent.testing import collect_turn, run_turn

from .conftest import statuses, types
from .external_helpers import SCAFFOLD, alive, external, wait_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def said(events: list[Any]) -> str:
    """The text of the last assistant message of a turn."""
    done = [
        e.item for e in events if isinstance(e, OutputItemDone) and isinstance(e.item, MessageItem)
    ]
    assert done, types(events)
    return "".join(b.text for b in done[-1].content)  # type: ignore[union-attr]


async def session_of(rt: omnigent.Runtime, spec: dict[str, Any], **options: Any) -> str:
    agent = await rt.create_agent(spec)
    return (await rt.create_session(agent.id, **options)).id


async def test_stdlib_harness_turn_and_reuse(rt: omnigent.Runtime) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external())
        first = await run_turn(rt, sid, "hello")
        assert statuses(first) == ["running", "launching", "running", "idle"]
        assert said(first) == "echo: hello"
        deltas = [e.delta for e in first if isinstance(e, OutputTextDelta)]
        assert "".join(deltas) == "echo: hello"
        pid = int(said(await run_turn(rt, sid, "pid")))
        second = await run_turn(rt, sid, "pid")
        assert "launching" not in statuses(second)  # the same process answered
        assert int(said(second)) == pid
        items = (await rt.list_items(sid)).data
        assert [i.role for i in items if isinstance(i, MessageItem)] == ["user", "assistant"] * 3


@pytest.mark.parametrize("how", ["stop", "delete"])
async def test_stop_and_delete_end_the_sessions_harness_process(
    rt: omnigent.Runtime, how: str
) -> None:
    """Regression: the process lived on until the idle reaper (an hour by default)."""
    with trio.fail_after(30):
        sid = await session_of(rt, external())
        pid = int(said(await run_turn(rt, sid, "pid")))
        assert alive(pid)
        if how == "stop":
            await rt.stop_session(sid)
        else:
            await rt.delete_session(sid)
        await wait_gone(pid)
        assert rt.processes is not None and rt.processes.processes == []
        if how == "stop":  # the next message starts a fresh one
            assert int(said(await run_turn(rt, sid, "pid"))) != pid


async def test_scaffold_harness_turn(rt: omnigent.Runtime) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external(command=SCAFFOLD))
        events = await run_turn(rt, sid, "hi there")
        assert said(events) == "echo: hi there"
        assert statuses(events)[-1] == "idle"
        snapshot = await rt.get_session(sid)
        assert snapshot.status == "idle" and snapshot.harness == "external"


async def test_a_crash_mid_turn_fails_the_turn_and_the_next_message_respawns(
    rt: omnigent.Runtime,
) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external())
        pid = int(said(await run_turn(rt, sid, "pid")))
        crashed = await run_turn(rt, sid, "crash")
        assert statuses(crashed)[-1] == "failed"
        failure = next(e for e in crashed if isinstance(e, ResponseFailed))
        assert "exited with code 3" in failure.error.message
        assert "dying on purpose" in failure.error.message
        await wait_gone(pid)
        again = await run_turn(rt, sid, "pid")
        assert "launching" in statuses(again)
        assert int(said(again)) != pid
        assert statuses(again)[-1] == "idle"


async def test_a_stream_cut_short_fails_the_turn(rt: omnigent.Runtime) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external())
        events = await run_turn(rt, sid, "truncate")
        failure = next(e for e in events if isinstance(e, ResponseFailed))
        assert "without finishing" in failure.error.message
        assert said(await run_turn(rt, sid, "after")) == "echo: after"  # still usable


async def test_a_failed_response_then_a_completed_one_ends_the_turn_idle(
    rt: omnigent.Runtime,
) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external())
        events = await run_turn(rt, sid, "recover")
        assert said(events) == "recovered"
        assert [e.type for e in events if e.type.startswith("response.") and "delta" not in e.type][
            -1
        ] == "response.completed"
        assert statuses(events)[-1] == "idle"
        # A failed response the stream ends on fails the turn, with its message.
        events = await run_turn(rt, sid, "fail")
        failure = next(e for e in events if isinstance(e, ResponseFailed))
        assert failure.error.message == "a hiccup" and statuses(events)[-1] == "failed"


async def test_interrupt_cancels_the_turn_and_tells_the_harness(rt: omnigent.Runtime) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external())
        pid = int(said(await run_turn(rt, sid, "pid")))
        async with rt.subscribe(sid) as events:
            await rt.send_message(sid, "wait")
            async for event in events:
                if isinstance(event, OutputTextDelta):
                    break
            assert await rt.interrupt(sid)
            rest = await collect_turn(events)
        assert statuses(rest)[-1] == "cancelled"
        assert alive(pid)  # an interrupt ends the turn, not the process
        assert int(said(await run_turn(rt, sid, "pid"))) == pid


async def test_shutdown_leaves_no_process(tmp_path: Any) -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime(shutdown_grace=2) as rt:
            sid = await session_of(rt, external())
            harness = int(said(await run_turn(rt, sid, "pid")))
            grandchild = int(said(await run_turn(rt, sid, "child")))
            assert alive(harness) and alive(grandchild)
            socket_dir = rt.processes.socket_dir if rt.processes else None
        assert not alive(harness)
        await wait_gone(grandchild)  # the whole process group went
        assert socket_dir is not None and not socket_dir.exists()


async def test_shutdown_mid_turn_cancels_it_and_kills_the_process() -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime() as rt:
            sid = await session_of(rt, external())
            pid = int(said(await run_turn(rt, sid, "pid")))
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "wait")
                async for event in events:
                    if isinstance(event, OutputTextDelta):
                        break
        assert not alive(pid)
        async with omnigent.open_runtime() as again:
            assert again.processes is not None and again.processes.processes == []


async def test_tool_calls_go_through_the_policies(rt: omnigent.Runtime) -> None:
    spec = external()
    spec["policies"] = [{"name": "no_shell", "type": "deny_tools", "tools": ["sys_os_shell"]}]
    with trio.fail_after(30):
        sid = await session_of(rt, spec)
        events = await run_turn(rt, sid, 'tool sys_os_shell {"command": "echo hi"}')
        assert said(events) == (
            "tool said: Error: denied by policy no_shell: tool sys_os_shell is denied"
        )
        items = (await rt.list_items(sid)).data
        calls = [i for i in items if isinstance(i, FunctionCallItem)]
        outputs = [i for i in items if isinstance(i, FunctionCallOutputItem)]
        assert [(c.call_id, c.name, c.status) for c in calls] == [
            ("c1", "sys_os_shell", "completed")
        ]
        assert [o.call_id for o in outputs] == ["c1"]


async def test_a_registered_tool_runs_for_the_harness(rt: omnigent.Runtime) -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    rt.register_tool(shout)
    with trio.fail_after(30):
        sid = await session_of(rt, external(command=SCAFFOLD))
        events = await run_turn(rt, sid, 'tool shout {"text": "quiet"}')
        assert said(events) == "tool said: QUIET"


async def test_the_harness_asks_a_person(rt: omnigent.Runtime) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external(command=SCAFFOLD))
        async with rt.subscribe(sid) as events:
            await rt.send_message(sid, "ask")
            async for event in events:
                if isinstance(event, ElicitationRequest):
                    break
            assert event.params.message == "May I?"
            assert event.params.phase == "harness_elicitation"
            assert (await rt.get_session(sid)).status == "waiting"
            assert await rt.resolve_elicitation(sid, event.elicitation_id, "accept", {"ok": 1})
            rest = await collect_turn(events)
        assert said(rest) == 'answer: accept {"ok": 1}'


async def test_the_harness_asks_the_policies(rt: omnigent.Runtime) -> None:
    spec = external(command=SCAFFOLD)
    spec["policies"] = [{"name": "no_rm", "type": "deny_tools", "tools": ["rm"]}]
    with trio.fail_after(30):
        sid = await session_of(rt, spec)
        assert said(await run_turn(rt, sid, "policy rm")) == "verdict: POLICY_ACTION_DENY"
        assert said(await run_turn(rt, sid, "policy ls")) == "verdict: POLICY_ACTION_UNSPECIFIED"


async def test_messages_mid_turn_are_forwarded_as_injections(rt: omnigent.Runtime) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external(command=SCAFFOLD))
        async with rt.subscribe(sid) as events:
            await rt.send_message(sid, "inject")
            async for event in events:
                if isinstance(event, SessionStatusChanged) and event.status == "running":
                    break  # the turn has started: the next message is buffered for it
            accepted = await rt.send_message(sid, "the late one")
            assert accepted.status == "buffered"
            turn = await collect_turn(events)
        assert said(turn) == "injected: the late one"
        assert statuses(turn)[-1] == "idle"
        # The message was answered by this turn: no continuation turn follows.
        items = (await rt.list_items(sid)).data
        assert [i.role for i in items if isinstance(i, MessageItem)] == [
            "user",
            "user",
            "assistant",
        ]


async def test_the_spawn_environment_holds_no_server_secret(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server-secret")
    monkeypatch.setenv("OMNIGENT_DB", "sqlite:///secret.db")
    spec = external(env={"GIVEN": "by the spec"}, model="spec-model")
    with trio.fail_after(30):
        sid = await session_of(rt, spec, model_override="override-model")
        report = json.loads(said(await run_turn(rt, sid, "env")))
    env = report["env"]
    assert "OPENAI_API_KEY" not in env and "OMNIGENT_DB" not in env
    assert env["GIVEN"] == "by the spec"
    assert env[model_variable("external")] == "override-model" == report["model"]
    assert len(env["OMNIGENT_HARNESS_AUTH_TOKEN"]) >= 32
    assert set(env) <= {
        "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME",
        "GIVEN", "OMNIGENT_HARNESS_AUTH_TOKEN", "HARNESS_EXTERNAL_MODEL",
    }  # fmt: skip
    assert f"/workspaces/{sid}/" in report["cwd"] + "/"  # the session's own workspace
    assert "sys_os_read" in report["tools"]


def test_model_variable_names() -> None:
    assert model_variable("claude-sdk") == "HARNESS_CLAUDE_SDK_MODEL"
    assert model_variable("external") == "HARNESS_EXTERNAL_MODEL"
    assert model_variable("my.harness") == "HARNESS_MY_HARNESS_MODEL"


async def test_a_harness_that_exits_at_start_fails_the_turn_clearly(rt: omnigent.Runtime) -> None:
    command = [sys.executable, "-c", "import sys; sys.stderr.write('no config'); sys.exit(2)"]
    with trio.fail_after(30):
        sid = await session_of(rt, external(command=command))
        events = await run_turn(rt, sid)
        failure = next(e for e in events if isinstance(e, ResponseFailed))
        assert failure.error.message == (
            "the external harness exited before it was ready: exited with code 2; stderr: no config"
        )
        assert statuses(events) == ["running", "launching", "failed"]


async def test_a_harness_that_never_listens_times_out(rt: omnigent.Runtime) -> None:
    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    with trio.fail_after(30):
        sid = await session_of(rt, external(command=command, options={"startup_timeout": 0.5}))
        events = await run_turn(rt, sid)
        failure = next(e for e in events if isinstance(e, ResponseFailed))
        assert failure.error.message == "the external harness did not answer /health within 0.5 s"
        assert rt.processes is not None and rt.processes.processes == []


async def test_a_missing_program_fails_the_turn(rt: omnigent.Runtime) -> None:
    with trio.fail_after(30):
        sid = await session_of(rt, external(command=["/nonexistent/harness"]))
        events = await run_turn(rt, sid)
        failure = next(e for e in events if isinstance(e, ResponseFailed))
        assert failure.error.message.startswith("cannot start the external harness")


async def test_registered_by_name(rt: omnigent.Runtime) -> None:
    rt.register_harness("echo-ext", external_harness(SCAFFOLD))
    spec = {"name": "named", "executor": {"type": "omnigent", "config": {"harness": "echo-ext"}}}
    with trio.fail_after(30):
        sid = await session_of(rt, spec)
        assert said(await run_turn(rt, sid, "by name")) == "echo: by name"


def test_entry_points_register_external_harnesses(monkeypatch: pytest.MonkeyPatch) -> None:
    from omnigent.harnesses import registry

    class EntryPoint:
        name = "from-package"

        def load(self) -> Any:
            return external_harness(SCAFFOLD)

    monkeypatch.setattr(registry, "entry_points", lambda group: [EntryPoint()])
    harnesses = registry.HarnessRegistry()
    harnesses.load_entry_points()
    assert harnesses.canonical("from-package") == "from-package"


def test_entry_points_are_read_when_a_name_is_first_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime asks for the group when it opens; the metadata is read (and each
    entry point loaded) when the registry is first asked about a name, once. A
    built-in name wins over an entry point's."""
    from omnigent.harnesses import registry

    class EntryPoint:
        def __init__(self, name: str) -> None:
            self.name = name

        def load(self) -> Any:
            return external_harness(SCAFFOLD)

    reads: list[str] = []

    def read(group: str) -> list[EntryPoint]:
        reads.append(group)
        return [EntryPoint("from-package"), EntryPoint("loop")]

    monkeypatch.setattr(registry, "entry_points", read)
    harnesses = registry.HarnessRegistry()
    harnesses.load_entry_points()
    assert reads == []
    assert harnesses.known("from-package")
    assert "from-package" in harnesses.names()
    assert reads == [registry.ENTRY_POINT_GROUP]
    assert harnesses.info("loop").check_spec is not None  # the built-in, not the package's


async def test_the_scaffold_refuses_a_caller_without_the_token(tmp_path: Any) -> None:
    import httpx

    from omnigent.harnesses.scaffold import serve

    async def body(turn: Any) -> None:
        await turn.say("never")

    socket = tmp_path / "h.sock"
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: serve(
                    body,
                    socket=socket,
                    conversation_id="c",
                    token="s3cret",
                    task_status=task_status,
                )
            )
            transport = httpx.AsyncHTTPTransport(uds=str(socket))
            async with httpx.AsyncClient(transport=transport, base_url="http://h") as client:
                assert (await client.get("/health")).status_code == 401
                good = {"Authorization": "Bearer s3cret"}
                assert (await client.get("/health", headers=good)).json() == {"status": "ok"}
                bad = await client.post("/v1/sessions/c/events", json={"type": "x"}, headers=good)
                assert bad.status_code == 422
                unawaited = {"type": "tool_result", "call_id": "nope", "output": ""}
                answer = await client.post("/v1/sessions/c/events", json=unawaited, headers=good)
                assert answer.status_code == 404
            assert oct(os.stat(socket).st_mode & 0o777) == "0o600"
            nursery.cancel_scope.cancel()
