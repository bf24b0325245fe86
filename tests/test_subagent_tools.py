"""The orchestration tools that look around: list, history, info, close, agents, models.

Every answer is compared whole (keys and values) with the original omnigent's shape.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

import omnigent
from omnigent.core.tools.session._orchestration_agents import workers_of
from omnigent.harnesses.registry import ModelRule
from omnigent.testing import probe
from omnigent.tools import ToolError

from .subagent_helpers import Driver, call, handle, lead, refused, wait_lines, worker
from .test_subagents import start, trio_turn


async def dispatched(
    rt: omnigent.Runtime, driver: Driver, spec: dict[str, Any], *titles: str
) -> tuple[str, list[str]]:
    """A parent that dispatched to ``w`` once per title, each result delivered."""
    parent = await start(rt, spec, driver)
    steps: list[Any] = []
    for title in titles:
        steps += ["sys_session_send", {"agent": "w", "title": title, "args": f"do {title}"}]
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    kids = [handle(o)["task_id"] for o in driver.outputs[-len(titles) :]]
    await wait_lines(rt, parent, len(titles))
    return parent, kids


async def listed_row(rt: omnigent.Runtime, session_id: str) -> dict[str, Any]:
    """A session as ``sys_session_list`` shows it."""
    s = await rt.get_session(session_id)
    return {
        "session_id": s.id,
        "agent_name": s.agent_name,
        "title": s.title.partition(":closed:")[0] if s.title else None,
        "status": s.status,
        "runner_id": None,
        "runner_online": None,
        "parent_session_id": s.parent_session_id,
    }


async def test_list_shows_open_children_and_a_child_sees_main_and_siblings(
    rt: omnigent.Runtime,
) -> None:
    looker = {
        **worker("w", turns=[[{"say": "hi"}], [{"call": "sys_session_list", "args": {}}]]),
        "tools": {"agents": []},
        "spawn": True,
    }
    driver = Driver()
    parent, (a, b) = await dispatched(rt, driver, lead([looker], name="boss"), "a", "b")
    await rt.update_session(parent, title="the plan")
    driver.then(call(driver, "sys_session_close", {"conversation_id": b}, "sys_session_list", {}))
    await trio_turn(rt, parent)
    listed = json.loads(driver.outputs[-1])
    assert listed == {
        "sub_agents": [{"agent": "w", "title": "a", "conversation_id": a}],
        # newest first: every session the user may read, the closed child included
        "sessions": [
            await listed_row(rt, b),
            await listed_row(rt, a),
            {**await listed_row(rt, parent), "status": "running"},  # it was listing
        ],
    }
    assert listed["sessions"][1] == {
        "session_id": a,
        "agent_name": "w",
        "title": "w:a",
        "status": "idle",
        "runner_id": None,
        "runner_online": None,
        "parent_session_id": parent,
    }
    driver.then(
        call(
            driver,
            "sys_session_list",
            {"agent_name": "nobody"},
            "sys_session_list",
            {"agent_name": "w"},
            "sys_session_list",
            {"agent_name": "boss"},
        )
    )
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[-3]) == {
        "sub_agents": [{"agent": "w", "title": "a", "conversation_id": a}],
        "sessions": [],
    }
    # The filter names the agent a session is listed with: the sub-agent, for a child
    # (not its parent's agent, which it belongs to).
    assert json.loads(driver.outputs[-2]) == {
        "sub_agents": [{"agent": "w", "title": "a", "conversation_id": a}],
        "sessions": [await listed_row(rt, b), await listed_row(rt, a)],
    }
    assert json.loads(driver.outputs[-1]) == {
        "sub_agents": [{"agent": "w", "title": "a", "conversation_id": a}],
        "sessions": [{**await listed_row(rt, parent), "status": "running"}],
    }
    # The child's own view: its parent as "main" (its title not shown), no closed sibling.
    with trio.fail_after(10):
        async with rt.subscribe(a) as events:
            await rt.send_message(a, "look around")
            async for event in events:
                if event.type == "session.status" and event.status == "idle":
                    break
    output = json.loads((await rt.list_items(a)).data[-1].output)  # type: ignore[union-attr]
    assert output["sub_agents"] == [{"agent": "main", "title": None, "conversation_id": parent}]


async def test_history_is_chronological_projected_and_shows_pending_questions(
    rt: omnigent.Runtime,
) -> None:
    asker = {
        **worker("w", [{"say": "x" * 3000}, {"call": "sys_os_shell", "args": {"command": "true"}}]),
        "policies": [
            {"name": "ask", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "ok?"}
        ],
    }
    driver = Driver()
    parent = await start(rt, lead([asker]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    with trio.fail_after(10):
        while not (await rt.get_session(child)).pending_elicitations:
            await trio.sleep(0.01)
    # A child waiting on a question is still at work, as its parent sees it.
    waiting = await rt.child_summary(child)
    assert (waiting.status, waiting.current_task_status) == ("waiting", "in_progress")
    history = {"conversation_id": child, "tail_items": 3}
    driver.then(
        call(
            driver,
            "sys_session_get_history",
            history,
            "sys_session_get_info",
            {"session_id": child},
        )
    )
    await trio_turn(rt, parent)
    snapshot = await rt.get_session(child)
    (question,) = snapshot.pending_elicitations
    items = (await rt.list_items(child)).data
    call_item = items[-1]
    assert json.loads(driver.outputs[1]) == {
        "conversation_id": child,
        "agent": "w",
        "title": "t",
        "items": [
            {"type": "message", "role": "user", "text": "go"},
            {"type": "message", "role": "assistant", "text": "x" * 2000 + " [truncated]"},
            {
                "type": "function_call",
                "name": "sys_os_shell",
                "arguments": call_item.arguments,  # type: ignore[union-attr]
            },
            {
                "type": "pending_elicitation",
                "elicitation_id": question.elicitation_id,
                "prompt": "ask: ok?",
            },
        ],
    }
    assert json.loads(driver.outputs[2]) == {
        "session_id": child,
        "status": "waiting",
        "last_activity_at": snapshot.updated_at,
        "title": "w:t",
        "agent_id": snapshot.agent_id,
        "agent_name": "w",
        "runner_id": None,
        "runner_online": None,
        "parent_session_id": parent,
        "sub_agent_name": "w",
        "model": None,
        "workspace": snapshot.cwd,
        "pending_elicitations": [question.to_dict()],
        "pending_elicitation_count": 1,
    }
    await rt.stop_session(parent)


async def test_a_form_question_shows_its_fields(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMNIGENT_ELICITATION_MODE", "form")
    driver = Driver()
    parent, (child,) = await dispatched(rt, driver, lead([worker("w", [{"say": "x"}])]), "t")
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "ok": {}}}
    held = await rt.post_event(
        child, "mcp_elicitation", {"message": "Who?", "requestedSchema": schema}
    )
    driver.then(call(driver, "sys_session_get_history", {"conversation_id": child}))
    await trio_turn(rt, parent)
    eid = held.elicitation_id  # type: ignore[union-attr]
    assert json.loads(driver.outputs[-1])["items"][-1] == {
        "type": "pending_elicitation",
        "elicitation_id": eid,
        "prompt": "Who?",
        "fields": ["name", "ok"],
    }
    await rt.resolve_elicitation(child, eid, "cancel")
    await rt.stop_session(parent)


async def test_the_model_shown_is_the_override(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", model="spec-model")]), driver)
    agent = (await rt.get_session(parent)).agent_id
    other = await rt.create_session(agent, model_override="picked-model")
    driver.then(
        call(
            driver,
            "sys_session_get_info",
            {"session_id": other.id},
            "sys_session_get_info",
            {},
        )
    )
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[0])["model"] == "picked-model"
    mine = json.loads(driver.outputs[1])
    assert mine["session_id"] == parent and mine["model"] is None
    assert mine["agent_name"] == "lead" and mine["sub_agent_name"] is None


async def test_history_and_close_stay_in_the_callers_tree(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent, (kid,) = await dispatched(rt, driver, lead([worker("w", [{"say": "ok"}])]), "t")
    other = await rt.create_agent(worker("elsewhere"))
    stranger = (await rt.create_session(other.id)).id
    made = (await rt.create_session(other.id, parent_session_id=parent)).id
    steps = [
        "sys_session_get_history", {"conversation_id": stranger},
        "sys_session_get_history", {"conversation_id": "conv_nope"},
        "sys_session_get_history", {"conversation_id": kid, "tail_items": 0},
        "sys_session_close", {"conversation_id": stranger},
        "sys_session_close", {"conversation_id": parent},
        "sys_session_close", {"conversation_id": made},
        "sys_session_get_info", {"session_id": "conv_nope"},
        "sys_session_get_history", "{not json",
    ]  # fmt: skip
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    out = [json.loads(o) for o in driver.outputs[1:]]
    out_of_tree = {
        "error": "session_out_of_tree",
        "conversation_id": stranger,
        "message": (
            "target conversation is not part of the caller's session tree; peek/close are "
            "scoped to the caller's root."
        ),
    }
    not_a_sub_agent = {
        "error": "session_not_a_sub_agent",
        "message": (
            "target conversation is not a named sub-agent session (a top-level "
            "conversation, or one made with sys_session_create); close only operates on "
            "sub-agents."
        ),
    }
    assert out == [
        out_of_tree,
        {"error": "session_not_found", "conversation_id": "conv_nope"},
        {"error": "invalid arguments for sys_session_get_history: 'tail_items' must be >= 1"},
        out_of_tree,
        {**not_a_sub_agent, "conversation_id": parent},
        {**not_a_sub_agent, "conversation_id": made},
        {"error": "session_not_found", "session_id": "conv_nope"},
        {
            "error": "sys_session_get_history: arguments are not valid JSON "
            "(Expecting property name enclosed in double quotes at position 1)"
        },
    ]
    for sid in (stranger, parent, made):
        snapshot = await rt.get_session(sid)
        assert "omnigent.closed" not in snapshot.labels


async def test_close_marks_the_child_and_frees_its_title(rt: omnigent.Runtime) -> None:
    driver = Driver()
    spec = lead([worker("w", turns=[[{"say": "old"}], [{"say": "fresh"}]])])
    parent, (old,) = await dispatched(rt, driver, spec, "t")
    driver.then(
        call(
            driver,
            "sys_session_close",
            {"conversation_id": old},
            "sys_session_close",
            {"conversation_id": old},
            "sys_session_send",
            {"session_id": old, "args": "again"},
            "sys_session_send",
            {"agent": "w", "title": "t", "args": "again"},
        )
    )
    await trio_turn(rt, parent)
    closed, again, refusal, sent = (json.loads(o) for o in driver.outputs[1:])
    assert closed == {"closed": True, "conversation_id": old, "agent": "w", "title": "t"}
    assert again == {**closed, "already_closed": True}
    assert refusal == {
        "error": "session_closed",
        "conversation_id": old,
        "message": "target sub-agent session is closed; create a new session to continue.",
    }
    snapshot = await rt.get_session(old)
    assert snapshot.labels["omnigent.closed"] == "true"
    assert snapshot.title == f"w:t:closed:{old}"
    assert sent["task_id"] != old and sent["title"] == "t"
    lines = await wait_lines(rt, parent, 2)
    assert lines[-1] == (sent["task_id"], "completed", "w:t returned: old")  # a new child


async def test_close_refuses_a_busy_child(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"sleep": 60}])]), driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    driver.then(call(driver, "sys_session_close", {"conversation_id": child}))
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[1]) == {
        "error": "sub_agent_busy",
        "conversation_id": child,
        "message": (
            "target sub-agent is still working; wait for its result or stop it with "
            "sys_cancel_task, then close it."
        ),
    }
    assert "omnigent.closed" not in (await rt.get_session(child)).labels
    await rt.stop_session(parent)


async def test_agent_list_has_three_sections_and_agent_get_reads_a_sessions_agent(
    rt: omnigent.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / ".omnigent" / "agent-configs"
    folder.mkdir(parents=True)
    (folder / "local.yaml").write_text("name: local-one\ndescription: from the folder\n")
    (folder / "list.yaml").write_text("- not a mapping\n")
    (folder / "notes.txt").write_text("ignored")
    registered = await rt.create_agent(worker("registered-one"))
    driver = Driver()
    spec = lead([worker("w"), worker("spare")], grant=["w"], os_env={"cwd": str(tmp_path)})
    parent = await start(rt, spec, driver)
    lead_agent = (await rt.get_session(parent)).agent_id
    driver.then(call(driver, "sys_agent_list", {}, "sys_agent_get", {"session_id": parent}))
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[0]) == {
        "builtins": [
            {
                "agent_id": a.id,
                "name": a.name,
                "description": a.description,
                "harness": a.harness,
            }
            for a in await rt.list_agents()
        ],
        "session_agents": [
            {
                "session_id": parent,
                "agent_id": lead_agent,
                "agent_name": "lead",
                "status": "running",
            }
        ],
        "local_configs": [
            {
                "name": "local-one",
                "path": ".omnigent/agent-configs/local.yaml",
                "description": "from the folder",
            }
        ],
    }
    assert {a.id for a in await rt.list_agents()} == {registered.id, lead_agent}
    assert json.loads(driver.outputs[1]) == {
        "session_id": parent,
        "agent_id": lead_agent,
        "name": "lead",
        "version": 1,
        "description": "",
        "harness": "driver",
        "mcp_servers": [],
        "policies": [],
    }

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the store is unwell")

    monkeypatch.setattr(probe(rt).store, "list_agents", broken)
    monkeypatch.setattr(probe(rt).store, "list_sessions", broken)
    driver.then(call(driver, "sys_agent_list", {}, "sys_agent_get", {"session_id": "conv_no"}))
    await trio_turn(rt, parent)
    degraded = json.loads(driver.outputs[2])
    assert degraded == {
        "builtins": [],
        "session_agents": [],
        "local_configs": [
            {
                "name": "local-one",
                "path": ".omnigent/agent-configs/local.yaml",
                "description": "from the folder",
            }
        ],
    }
    assert json.loads(driver.outputs[3]) == {"error": "agent_not_found", "session_id": "conv_no"}


async def test_agent_get_shows_mcp_servers_and_policies_without_secrets(
    rt: omnigent.Runtime,
) -> None:
    driver = Driver()
    spec = {
        **lead([worker("w", [{"sleep": 30}])]),
        "policies": [
            {"name": "ask", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "sure?"},
            {"name": "no_rm", "type": "deny_tools", "tools": ["sys_os_delete"]},
        ],
    }
    parent = await start(rt, spec, driver)
    driver.then(call(driver, "sys_session_send", {"agent": "w", "title": "t", "args": "go"}))
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    driver.then(
        call(
            driver, "sys_agent_get", {"session_id": parent}, "sys_agent_get", {"session_id": child}
        )
    )
    await trio_turn(rt, parent)
    agent_id = (await rt.get_session(parent)).agent_id
    assert json.loads(driver.outputs[1]) == {
        "session_id": parent,
        "agent_id": agent_id,
        "name": "lead",
        "version": 1,
        "description": "",
        "harness": "driver",
        "mcp_servers": [],
        "policies": [
            {"name": "ask", "type": "ask_tools", "on": ["tool_call"], "description": "sure?"},
            {"name": "no_rm", "type": "deny_tools", "on": ["tool_call"], "description": None},
        ],
    }
    # A sub-agent's session runs the sub-agent, of its parent's agent version.
    assert json.loads(driver.outputs[2]) == {
        "session_id": child,
        "agent_id": agent_id,
        "name": "w",
        "version": 1,
        "description": "the w",
        "harness": "scripted",
        "mcp_servers": [],
        "policies": [],
    }
    await rt.stop_session(parent)


def _bundle(path: Path) -> dict[str, Any]:
    with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:gz") as archive:
        assert archive.getnames() == ["config.yaml"]
        member = archive.extractfile("config.yaml")
        assert member is not None
        loaded: dict[str, Any] = yaml.safe_load(member.read())
        return loaded


async def test_agent_download_writes_the_bundle_inside_the_workspace_only(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "evil.tar.gz").symlink_to(outside / "evil.tar.gz")
    spec = {
        **lead([worker("w")], os_env={"cwd": str(work)}),
        "executor": {"type": "omnigent", "config": {"harness": "driver", "api_key": "sk-x"}},
        "metadata": {"deploy_token": "abc"},
    }
    driver = Driver()
    parent = await start(rt, spec, driver)
    steps = [
        "sys_agent_download", {"session_id": parent, "dest_filename": "../evil.tar.gz"},
        "sys_agent_download", {"session_id": parent, "dest_filename": "sub/evil.tar.gz"},
        "sys_agent_download", {"session_id": parent, "dest_filename": ".."},
        "sys_agent_download", {"session_id": parent, "dest_filename": "evil.tar.gz"},
        "sys_agent_download", {"session_id": "conv_nope"},
        "sys_agent_download", {"session_id": parent},
    ]  # fmt: skip
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    out = [json.loads(o) for o in driver.outputs]
    assert len(out) == 6, driver.outputs
    bare = {"error": "sys_agent_download dest_filename must be a bare filename, not a path"}
    assert out[:5] == [
        bare,
        bare,
        bare,
        {"error": "sys_agent_download resolved destination escapes the working directory"},
        {"error": "agent_not_found", "session_id": "conv_nope"},
    ]
    assert list(outside.iterdir()) == []
    written = work / "lead-v1.tar.gz"
    assert out[5] == {"path": str(written), "bytes_written": written.stat().st_size}
    # The owner downloads their own agent: nothing redacted but the model key.
    config = _bundle(written)
    assert config["name"] == "lead" and "api_key" not in config["executor"]["config"]
    assert config["metadata"] == {"deploy_token": "abc"}


async def test_anothers_agent_shows_its_servers_and_downloads_redacted(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    pytest.importorskip("mcp")
    theirs = await rt.create_agent(
        {
            **worker("theirs"),
            "mcp_servers": [
                {
                    "name": "docs",
                    "url": "http://127.0.0.1:9/mcp",
                    "headers": {"Authorization": "B"},
                },
                {"name": "fs", "command": ["my-fs", "--root", "."], "env": {"TOKEN": "t"}},
            ],
        },
        owner="alice",
    )
    shared = (await rt.create_session(theirs.id, owner="alice")).id
    private = (await rt.create_session(theirs.id, owner="alice")).id
    await rt.grant(shared, "local", 1)
    driver = Driver()
    parent = await start(rt, lead([], os_env={"cwd": str(tmp_path)}), driver)
    steps = [
        "sys_agent_get", {"session_id": shared},
        "sys_agent_get", {"session_id": private},
        "sys_agent_download", {"session_id": private},
        "sys_agent_download", {"session_id": shared, "dest_filename": "t.tgz"},
    ]  # fmt: skip
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    got, hidden, hidden_too, downloaded = (json.loads(o) for o in driver.outputs)
    assert got == {
        "session_id": shared,
        "agent_id": theirs.id,
        "name": "theirs",
        "version": 1,
        "description": "the theirs",
        "harness": "scripted",
        "mcp_servers": [
            {
                "name": "docs",
                "transport": "http",
                "description": None,
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "<redacted>"},
                "command": None,
                "args": [],
            },
            {
                "name": "fs",
                "transport": "stdio",
                "description": None,
                "url": None,
                "headers": {},
                "command": "my-fs",
                "args": ["--root", "."],
            },
        ],
        "policies": [],
    }
    # A session one may not read is answered as one that does not exist.
    assert hidden == hidden_too == {"error": "agent_not_found", "session_id": private}
    assert downloaded == {
        "path": str(tmp_path / "t.tgz"),
        "bytes_written": downloaded["bytes_written"],
    }
    config = _bundle(tmp_path / "t.tgz")
    assert config["mcp_servers"][0]["headers"] == {"Authorization": "<redacted>"}
    assert config["mcp_servers"][1]["env"] == {"TOKEN": "<redacted>"}
    assert sorted(await trio.to_thread.run_sync(lambda: [p.name for p in tmp_path.iterdir()])) == [
        "t.tgz"
    ]


def test_list_models_without_an_agent_spec_is_a_clear_error() -> None:
    with pytest.raises(ToolError) as caught:
        workers_of(None, None)  # type: ignore[arg-type]
    assert "needs the calling agent's spec" in caught.value.message


async def test_list_models_per_worker_from_the_configuration(
    rt: omnigent.Runtime, omnigent_home: Path
) -> None:
    (omnigent_home / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "default_provider": "gw",
                "providers": [
                    {
                        "name": "gw",
                        "kind": "gateway",
                        "model_prefix": "databricks-",
                        "models": ["databricks-claude-sonnet-4-6", "databricks-gpt-5-4"],
                    },
                    {
                        "name": "login",
                        "kind": "subscription",
                        "family": "anthropic",
                        "harnesses": ["claudeish"],
                    },
                ],
            }
        )
    )
    rule = ModelRule("Claude models", ("*claude*",), ("claude-opus-4-8", "claude-haiku-4-5"))
    rt.register_harness("claudeish", Driver().factory, models=rule)
    driver = Driver()
    workers = [worker("coder", harness="claudeish", model="claude-opus-4-8"), worker("script")]
    parent = await start(rt, lead(workers), driver)
    driver.then(
        call(
            driver,
            "sys_list_models",
            {},
            "sys_list_models",
            {"workers": ["self"], "model_ids": ["databricks-gpt-5-4"]},
            "sys_list_models",
            {"workers": "self"},
        )
    )
    await trio_turn(rt, parent)
    every = json.loads(driver.outputs[0])
    assert list(every) == ["coder", "script", "self"]  # the workers, then self
    assert every == {
        # The login lists no models: the harness's own names, the spec's model first.
        "coder": {
            "source": "static",
            "verified": False,
            "models": [
                {"id": "claude-opus-4-8", "family": "claude"},
                {"id": "claude-haiku-4-5", "family": "claude"},
            ],
            "note": "the models harness 'claudeish' names (no provider lists any)",
        },
        "script": {
            "source": "none",
            "verified": False,
            "models": [],
            "note": (
                "harness 'scripted' cannot apply a model chosen at dispatch; it runs the "
                "model its spec names"
            ),
        },
        "self": {
            "source": "static",
            "verified": False,
            "models": [
                {"id": "databricks-claude-sonnet-4-6", "family": "claude"},
                {"id": "databricks-gpt-5-4", "family": "openai"},
            ],
            "note": f"from provider 'gw' in {omnigent_home / 'config.yaml'}",
        },
    }
    assert json.loads(driver.outputs[1]) == {
        "self": {**every["self"], "models": [{"id": "databricks-gpt-5-4", "family": "openai"}]}
    }
    assert refused(driver.outputs[2]).startswith("invalid arguments for sys_list_models: 'work")
    (omnigent_home / "config.yaml").write_text("providers: [{name: x, kind: nope}]")
    driver.then(call(driver, "sys_list_models", {}))
    await trio_turn(rt, parent)
    text = refused(driver.outputs[3])
    assert text.startswith("cannot read the provider configuration: invalid")
    assert "providers[0].kind" in text


async def test_only_the_session_and_agent_tools_refuse_as_json(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    """The OS and async tools keep their ``Error: …`` strings, through a session too."""
    driver = Driver()
    parent = await start(rt, lead([worker("w")], os_env={"cwd": str(tmp_path)}), driver)
    steps = [
        "sys_os_read", "{not json",
        "sys_os_read", {"path": "nope.txt"},
        "sys_cancel_async", {"handle_id": "task_nope"},
        "sys_read_inbox", {"extra": 1},
        "sys_session_list", {"extra": 1},
        "sys_nope", {},
    ]  # fmt: skip
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    assert driver.outputs[:5] == [
        "Error: arguments are not valid JSON (Expecting property name enclosed in double "
        "quotes at position 1)",
        "Error: cannot read 'nope.txt': no such file; check the path",
        "Error: no running background task 'task_nope'",
        "Error: invalid arguments for sys_read_inbox: unknown argument 'extra'",
        '{"error": "invalid arguments for sys_session_list: unknown argument \'extra\' '
        '(expected: agent_name)"}',
    ]
    assert driver.outputs[5].startswith("Error: unknown tool 'sys_nope' (available: sys_os_read")


async def test_a_filtered_list_searches_a_bounded_number_of_sessions(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("omnigent.core.runtime._orchestration.SCAN_LIMIT", 2)
    driver = Driver()
    parent = await start(rt, lead([]), driver)
    other = await rt.create_agent(worker("x"))
    _older, x2, x3 = [(await rt.create_session(other.id)).id for _ in range(3)]
    steps = ["sys_session_list", {"agent_name": "x"}, "sys_session_list", {"agent_name": "lead"}]
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    more = {"limit": 100, "has_more": {"sessions": True}}
    assert [json.loads(o) for o in driver.outputs] == [
        {
            "sub_agents": [],
            "sessions": [await listed_row(rt, x3), await listed_row(rt, x2)],
            "page": more,
        },
        {"sub_agents": [], "sessions": [], "page": more},  # the lead is past the two read
    ]
