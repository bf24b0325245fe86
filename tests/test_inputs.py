"""Bad input gets an error naming the field and changes nothing; files; session records."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import omnigent
from omnigent.errors import InvalidInput
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import EventAccepted, InputImage, MessageAccepted, event_from_dict
from omnigent.testing import RecordingHarness, probe, run_turn, scripted_agent

from .conftest import statuses

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def locs(exc: pytest.ExceptionInfo[InvalidInput]) -> list[str]:
    return [d.loc for d in exc.value.details]


@pytest.mark.parametrize(
    ("type_", "data", "loc"),
    [
        ("bogus", {}, "type"),
        (7, {}, "type"),
        ("message", {}, "data.content"),
        ("message", {"content": "text"}, "data.content"),
        ("message", {"content": []}, "data.content"),
        ("message", {"content": [{"type": "input_text"}]}, "data.content[0].text"),
        ("message", {"content": [{"type": "input_text", "text": 5}]}, "data.content[0].text"),
        ("message", {"content": [{"type": "video", "url": "x"}]}, "data.content[0].type"),
        ("message", {"content": [{"text": "x"}]}, "data.content[0].type"),
        ("message", {"content": [{"type": "output_text", "text": "x"}]}, "data.content[0].type"),
        (
            "message",
            {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]},
            "data.role",
        ),
        ("message", {"content": [{"type": "input_text", "text": "x"}], "extra": 1}, "data.extra"),
        ("message", "not an object", "data"),
        ("interrupt", {"why": "no"}, "data.why"),
    ],
)
async def test_bad_events_name_the_field_and_change_nothing(
    rt: omnigent.Runtime, type_: Any, data: Any, loc: str
) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = await rt.create_session(agent.id)
    with pytest.raises(InvalidInput) as caught:
        await rt.post_event(session.id, type_, data)
    assert loc in locs(caught)
    assert (await rt.list_items(session.id)).data == ()
    assert (await rt.get_session(session.id)).last_event_id == 0
    assert rt.statistics()["active_sessions"] == 0


async def test_post_event_message_and_interrupt(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = await rt.create_session(agent.id)
    answer = await rt.post_event(
        session.id, "message", {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    )
    assert isinstance(answer, MessageAccepted) and answer.status == "accepted"
    assert answer.item_id.startswith("item_")
    assert answer.to_dict() == {"status": "accepted", "item_id": answer.item_id}
    interrupted = await rt.post_event(session.id, "interrupt", {})
    assert interrupted == EventAccepted() and interrupted.to_dict() == {"status": "accepted"}


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"type": "session.status"}, "status"),
        ({"type": "session.status", "status": "sleeping"}, "status"),
        ({"type": "nope"}, "type"),
        ({"status": "idle"}, "type"),
        (
            {"type": "response.output_text.delta", "response_id": 1, "item_id": "i", "delta": "d"},
            "response_id",
        ),
    ],
)
def test_bad_wire_events_name_the_field(data: dict[str, Any], loc: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        event_from_dict(data)
    assert loc in locs(caught)


async def test_unknown_session_and_agent(rt: omnigent.Runtime) -> None:
    with pytest.raises(omnigent.SessionNotFound):
        await rt.send_message("conv_missing", "hi")
    with pytest.raises(omnigent.AgentNotFound):
        await rt.create_session("agent_missing")
    with pytest.raises(omnigent.SessionNotFound):
        async with rt.subscribe("conv_missing"):
            pass


async def test_session_creation_validation(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent())
    with pytest.raises(omnigent.UnknownHarness, match="nope"):
        await rt.create_session(agent.id, harness_override="nope")
    with pytest.raises(InvalidInput) as caught:
        await rt.create_session(agent.id, model_override="bad model!")
    assert locs(caught) == ["model_override"]
    with pytest.raises(InvalidInput) as caught:
        await rt.create_session(agent.id, labels={"a": 1})  # type: ignore[dict-item]
    assert locs(caught) == ["labels.a"]
    with pytest.raises(InvalidInput) as caught:
        await rt.create_session(agent.id, initial_items=[{"type": "message", "data": {}}])
    assert "initial_items[0].data.role" in locs(caught)
    assert (await rt.list_sessions()).data == ()
    alias = await rt.create_session(agent.id, harness_override="script")
    assert alias.harness_override == "scripted"
    assert alias.harness == "scripted"


async def test_harness_override_is_refused_for_other_executor_types(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    rt.register_harness("native", recorder.factory)
    agent = await rt.create_agent({"name": "native-agent", "executor": {"type": "native"}})
    with pytest.raises(omnigent.BadRequest, match="'native'"):
        await rt.create_session(agent.id, harness_override="scripted")


async def test_sessions_list_filter_paginate_update_delete(rt: omnigent.Runtime) -> None:
    a = await rt.create_agent(scripted_agent("alpha"))
    b = await rt.create_agent(scripted_agent("beta"))
    made = [(await rt.create_session(a.id, title=f"s{i}")).id for i in range(5)]
    parent = (await rt.create_session(b.id)).id
    child = await rt.create_session(b.id, parent_session_id=parent)
    assert child.root_session_id == parent
    page1 = await rt.list_sessions(agent_name="alpha", limit=2)
    assert [s.id for s in page1.data] == made[::-1][:2]
    assert page1.has_more
    page2 = await rt.list_sessions(agent_name="alpha", limit=2, after=page1.data[-1].id)
    assert [s.id for s in page2.data] == made[::-1][2:4]
    children = await rt.list_sessions(parent_session_id=parent)
    assert [s.id for s in children.data] == [child.id]
    assert (await rt.list_sessions(agent_name="nobody")).data == ()
    updated = await rt.update_session(made[0], title="renamed", labels={"k": "v"})
    assert (updated.title, updated.labels) == ("renamed", {"k": "v"})
    with pytest.raises(InvalidInput):
        await rt.update_session(made[0], colour="red")
    await rt.delete_session(parent)
    for gone in (parent, child.id):
        with pytest.raises(omnigent.SessionNotFound):
            await rt.get_session(gone)


async def test_initial_items_become_history(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    rt.register_harness("recorder", recorder.factory)
    agent = await rt.create_agent(scripted_agent(harness="recorder"))
    session = await rt.create_session(
        agent.id,
        initial_items=[
            {
                "type": "message",
                "data": {"role": "user", "content": [{"type": "input_text", "text": "earlier"}]},
            },
            {
                "type": "message",
                "data": {
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "noted"}],
                },
            },
        ],
    )
    await run_turn(rt, session.id, "now")
    assert [i.role for i in recorder.requests[0].history] == ["user", "assistant"]  # type: ignore[union-attr]


async def test_image_file_ids_reach_the_harness_as_data_urls(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    image = await rt.upload_file(PNG, filename="dot.png")
    assert (image.content_type, image.bytes) == ("image/png", len(PNG))
    assert await rt.read_file(image.id) == PNG
    content = [{"type": "input_text", "text": "see"}, {"type": "input_image", "file_id": image.id}]
    await run_turn(rt, rec_session, content)
    await run_turn(rt, rec_session, "again")
    expected = "data:image/png;base64," + base64.b64encode(PNG).decode()
    first = recorder.requests[0].input[0].content[1]
    assert isinstance(first, InputImage)
    assert (first.file_id, first.image_url) == (None, expected)
    replayed = recorder.requests[1].history[0].content[1]  # type: ignore[union-attr]
    assert (replayed.file_id, replayed.image_url) == (None, expected)
    stored = (await rt.list_items(rec_session)).data[0].content[1]  # type: ignore[union-attr]
    assert stored.file_id == image.id


async def test_unknown_or_non_image_file_ids_are_refused(
    rt: omnigent.Runtime, rec_session: str
) -> None:
    text = await rt.upload_file(b"plain", filename="a.txt")
    for file_id in ("file_missing", text.id):
        with pytest.raises(InvalidInput) as caught:
            await rt.send_message(rec_session, [{"type": "input_image", "file_id": file_id}])
        assert locs(caught) == ["content[0].file_id"]
    assert (await rt.list_items(rec_session)).data == ()


async def test_items_pagination(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    for i in range(3):
        await run_turn(rt, rec_session, f"m{i}")
    asc = await rt.list_items(rec_session, limit=2)
    assert asc.has_more and len(asc.data) == 2
    rest = await rt.list_items(rec_session, after=asc.last_id)
    assert len(rest.data) == 4 and not rest.has_more
    desc = await rt.list_items(rec_session, order="desc", limit=1)
    assert desc.data[0].id == rest.data[-1].id
    with pytest.raises(InvalidInput):
        await rt.list_items(rec_session, order="sideways")


async def test_a_turn_left_running_by_a_dead_process_is_failed_on_restart(
    tmp_path: Path,
) -> None:
    db = tmp_path / "crash.db"
    async with omnigent.open_runtime(db=f"sqlite:///{db}") as rt:
        agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
        session = await rt.create_session(agent.id)
    # What a killed process leaves behind: the last status it wrote was "running".
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET status = 'running' WHERE id = ?", (session.id,))
    async with omnigent.open_runtime(db=f"sqlite:///{db}") as rt:
        snapshot = await rt.get_session(session.id)
        assert snapshot.status == "failed"
        async with rt.subscribe(session.id, after=0) as events:
            first = await events.__anext__()
        assert first.to_dict()["error"]["code"] == "runtime_restarted"
        events_after = await run_turn(rt, session.id)
        assert statuses(events_after) == ["running", "idle"]


async def test_store_schema_is_versioned(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    async with omnigent.open_runtime(db=str(db)):
        pass
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {
        "agents",
        "agent_versions",
        "sessions",
        "items",
        "events",
        "files",
        "inbox",
        "elicitations",
        "permissions",
    } <= tables
    async with omnigent.open_runtime(db=str(db)):  # reopening migrates nothing twice
        pass


async def test_agent_versions(rt: omnigent.Runtime) -> None:
    first = await rt.create_agent(scripted_agent("same", script=[{"say": "v1"}]))
    second = await rt.create_agent(scripted_agent("same", script=[{"say": "v2"}]))
    assert second.id == first.id and second.version == 2
    assert [a.name for a in await rt.list_agents()] == ["same"]


async def test_an_unchanged_spec_keeps_its_version(rt: omnigent.Runtime) -> None:
    """Regression: every ``run`` and ``serve --agents`` start made a new version."""
    first = await rt.create_agent(scripted_agent("same", script=[{"say": "v1"}]))
    again = await rt.create_agent(scripted_agent("same", script=[{"say": "v1"}]))
    assert (again.id, again.version) == (first.id, 1)
    spec_v1 = await rt.get_agent_spec(first.id, 1)
    assert spec_v1.executor.config.script is not None


async def test_tools_validate_arguments(rt: omnigent.Runtime) -> None:
    def greet(name: str, times: int = 1) -> str:
        """Greet someone."""
        return " ".join([f"hi {name}"] * times)

    tool = rt.register_tool(greet)
    assert tool.schema.parameters["required"] == ["name"]
    assert tool.schema.description == "Greet someone."
    assert await probe(rt).tools.invoke("greet", {"name": "ada", "times": 2}) == "hi ada hi ada"
    assert await probe(rt).tools.invoke("greet", '{"name": "ada"}') == "hi ada"
    assert (await probe(rt).tools.invoke("greet", {"name": 3})).startswith(
        "Error: invalid arguments for greet: argument 'name' must be string"
    )
    assert "unknown argument 'x'" in await probe(rt).tools.invoke("greet", {"name": "a", "x": 1})
    assert "not valid JSON" in await probe(rt).tools.invoke("greet", "{nope")
    assert (await probe(rt).tools.invoke("missing", {})).startswith("Error: unknown tool 'missing'")
    with pytest.raises(omnigent.Conflict):
        rt.register_tool(greet)
    with pytest.raises(omnigent.BadRequest):
        rt.register_tool(greet, name="bad name")


async def test_a_raising_tool_becomes_an_error_string(rt: omnigent.Runtime) -> None:
    async def explode() -> None:
        raise OSError("disk on fire")

    rt.register_tool(explode)
    assert await probe(rt).tools.invoke("explode", {}) == "Error: explode failed: disk on fire"


def test_public_names() -> None:
    assert omnigent.__all__ == sorted(omnigent.__all__)
    for name in omnigent.__all__:
        assert hasattr(omnigent, name), name
    assert issubclass(omnigent.SessionNotFound, omnigent.OmnigentError)
    assert issubclass(omnigent.InvalidInput, ValueError)


async def test_turn_context_is_what_harnesses_get(
    rt: omnigent.Runtime, recorder: RecordingHarness, rec_session: str
) -> None:
    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        assert ctx.session_id == request.session_id
        assert ctx.response_id == request.response_id
        assert request.turn_number == 0

    recorder.body = body
    events = await run_turn(rt, rec_session)
    assert statuses(events) == ["running", "idle"]


async def test_unknown_cursors_are_refused(rt: omnigent.Runtime, rec_session: str) -> None:
    """Regression: an unknown ``after`` silently restarted /items from the beginning."""
    other = await rt.create_session((await rt.get_session(rec_session)).agent_id)
    await run_turn(rt, other.id, "elsewhere")
    foreign = (await rt.list_items(other.id)).data[0].id
    for cursor in ("item_nope", foreign):
        with pytest.raises(InvalidInput) as caught:
            await rt.list_items(rec_session, after=cursor)
        assert locs(caught) == ["after"]
    with pytest.raises(InvalidInput) as caught:
        await rt.list_sessions(after="conv_nope")
    assert locs(caught) == ["after"]


async def test_a_tool_name_with_a_trailing_newline_is_refused(rt: omnigent.Runtime) -> None:
    """Regression: ``^…$`` with ``re.match`` let ``"name\\n"`` through (``$`` matches
    before a final newline)."""

    def tool() -> str:
        return "ok"

    with pytest.raises(omnigent.BadRequest):
        rt.register_tool(tool, name="bad\n")
