"""The orchestration tools that look around: list, history, info, close, agents, models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

import omnigent
from omnigent.core.tools._orchestration_agents import workers_of
from omnigent.harnesses.registry import ModelRule
from omnigent.testing import probe
from omnigent.tools import ToolError

from .subagent_helpers import Driver, call, handle, lead, wait_lines, worker
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
    assert listed["sub_agents"] == [{"agent": "w", "title": "a", "conversation_id": a}]
    assert {s["conversation_id"] for s in listed["sessions"]} == {parent, a, b}
    driver.then(call(driver, "sys_session_list", {"agent_name": "nobody"}))
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[-1])["sessions"] == []
    # The child's own view: its parent as "main", and no closed sibling.
    with trio.fail_after(10):
        async with rt.subscribe(a) as events:
            await rt.send_message(a, "look around")
            async for event in events:
                if event.type == "session.status" and event.status == "idle":
                    break
    output = json.loads((await rt.list_items(a)).data[-1].output)  # type: ignore[union-attr]
    assert output["sub_agents"] == [
        {"agent": "main", "title": "the plan", "conversation_id": parent}
    ]


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
    seen = json.loads(driver.outputs[1])
    assert seen["conversation_id"] == child and (seen["agent"], seen["title"]) == ("w", "t")
    kinds = [i["type"] for i in seen["items"]]
    assert kinds == ["message", "message", "function_call", "elicitation"]
    assert seen["items"][1]["text"] == "x" * 2000 + " [truncated]"
    assert seen["items"][3]["message"] == "ask: ok?"
    info = json.loads(driver.outputs[2])
    assert info["conversation_id"] == child and info["pending_elicitations"] == 1
    assert info["status"] == "waiting" and info["agent"] == "w" and info["session_name"] == "t"
    assert info["parent_session_id"] == parent and info["harness"] == "scripted"
    await rt.stop_session(parent)


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
    ]  # fmt: skip
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    out = driver.outputs[1:]
    assert out[0].startswith("Error: session_out_of_tree: ")
    assert out[1].startswith("Error: session_not_found: ")
    assert out[2].startswith("Error: invalid arguments for sys_session_get_history: 'tail_items'")
    assert out[3].startswith("Error: session_out_of_tree: ")
    assert out[4].startswith("Error: session_not_a_sub_agent: ")
    assert out[5].startswith("Error: session_not_a_sub_agent: ")
    assert out[6].startswith("Error: session_not_found: ")
    for sid in (stranger, parent, made):
        snapshot = await rt.get_session(sid)
        assert "omnigent.closed" not in snapshot.labels


async def test_info_of_a_session_the_user_cannot_read_is_access_denied(
    rt: omnigent.Runtime,
) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w")]), driver)
    theirs = await rt.create_agent(worker("private"), owner="alice")
    hidden = (await rt.create_session(theirs.id, owner="alice")).id
    driver.then(
        call(driver, "sys_session_get_info", {"session_id": hidden}, "sys_session_get_info", {})
    )
    await trio_turn(rt, parent)
    assert driver.outputs[0].startswith("Error: access_denied: ")
    mine = json.loads(driver.outputs[1])
    assert mine["conversation_id"] == parent and mine["agent_name"] == "lead"


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
    closed, again, refused, sent = (json.loads(o) if o[0] == "{" else o for o in driver.outputs[1:])
    assert closed == {"closed": True, "conversation_id": old, "agent": "w", "title": "t"}
    assert again == {**closed, "already_closed": True}
    assert refused.startswith("Error: session_closed: ")
    snapshot = await rt.get_session(old)
    assert snapshot.labels["omnigent.closed"] == "true"
    assert snapshot.title == f"w:t:closed:{old}"
    assert sent["task_id"] != old and sent["title"] == "t"
    lines = await wait_lines(rt, parent, 2)
    assert lines[-1] == (sent["task_id"], "completed", "w:t returned: old")  # a new child


async def test_close_refuses_a_busy_child(rt: omnigent.Runtime) -> None:
    driver = Driver()
    parent = await start(rt, lead([worker("w", [{"sleep": 60}])]), driver)
    driver.then(
        call(
            driver,
            "sys_session_send",
            {"agent": "w", "title": "t", "args": "go"},
        )
    )
    await trio_turn(rt, parent)
    child = handle(driver.outputs[0])["task_id"]
    driver.then(call(driver, "sys_session_close", {"conversation_id": child}))
    await trio_turn(rt, parent)
    assert driver.outputs[1].startswith("Error: sub_agent_busy: ")
    assert "omnigent.closed" not in (await rt.get_session(child)).labels
    await rt.stop_session(parent)


async def test_agent_list_merges_sources_and_degrades(
    rt: omnigent.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / ".omnigent" / "agents"
    folder.mkdir(parents=True)
    (folder / "local.yaml").write_text("name: local-one\ndescription: from the folder\n")
    (folder / "bad.yaml").write_text("name: [not a name]\n")
    (folder / "notes.txt").write_text("ignored")
    await rt.create_agent(worker("registered-one"))
    driver = Driver()
    spec = lead([worker("w"), worker("spare")], grant=["w"], os_env={"cwd": str(tmp_path)})
    parent = await start(rt, spec, driver)
    driver.then(call(driver, "sys_agent_list", {}, "sys_agent_get", {"agent_id": "spare"}))
    await trio_turn(rt, parent)
    listed = json.loads(driver.outputs[0])
    sources = {(a["name"], a["source"]) for a in listed["agents"]}
    assert {("w", "sub_agent"), ("spare", "sub_agent"), ("registered-one", "registered")} <= sources
    assert ("local-one", "local") in sources and ("lead", "registered") in sources
    assert [(e["source"], e["path"]) for e in listed["errors"]] == [
        ("local", ".omnigent/agents/bad.yaml")
    ]
    spare = json.loads(driver.outputs[1])
    assert spare == {
        "name": "spare",
        "description": "the spare",
        "harness": "scripted",
        "model": None,
        "source": "sub_agent",
        "granted": False,
    }

    async def broken() -> list[Any]:
        raise OSError("the store is unwell")

    monkeypatch.setattr(probe(rt).store, "list_agents", broken)
    driver.then(call(driver, "sys_agent_list", {}, "sys_agent_get", {"agent_id": "nobody"}))
    await trio_turn(rt, parent)
    degraded = json.loads(driver.outputs[2])
    assert {a["source"] for a in degraded["agents"]} == {"sub_agent", "local"}
    assert {"source": "registered", "message": "OSError: the store is unwell"} in degraded["errors"]
    assert driver.outputs[3].startswith("Error: agent_not_found: ")


async def test_agent_download_writes_inside_the_workspace_only(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / ".omnigent").mkdir()
    (work / ".omnigent" / "agents").symlink_to(outside)
    secret = {**worker("w"), "executor": {"config": {"harness": "scripted", "api_key": "sk-x"}}}
    driver = Driver()
    spec = lead([secret], spawn=True, os_env={"cwd": str(work)})
    parent = await start(rt, spec, driver)
    steps = [
        "sys_agent_download", {"agent_id": "w", "filename": "../evil.yaml"},
        "sys_agent_download", {"agent_id": "w", "filename": "sub/evil.yaml"},
        "sys_agent_download", {"agent_id": "w", "filename": "evil.sh"},
        "sys_agent_download", {"agent_id": "w"},
    ]  # fmt: skip
    driver.then(call(driver, *steps))
    await trio_turn(rt, parent)
    assert all(o.startswith("Error: ") for o in driver.outputs), driver.outputs
    assert "not a path" in driver.outputs[0] and "not a path" in driver.outputs[1]
    assert "outside the working directory" in driver.outputs[3]
    assert list(outside.iterdir()) == []
    (work / ".omnigent" / "agents").unlink()
    driver.then(call(driver, "sys_agent_download", {"agent_id": "w"}))
    await trio_turn(rt, parent)
    answer = json.loads(driver.outputs[4])
    assert answer["downloaded"] is True and answer["path"] == ".omnigent/agents/w.yaml"
    written = yaml.safe_load((work / ".omnigent" / "agents" / "w.yaml").read_text())
    assert written["name"] == "w" and "api_key" not in written["executor"]["config"]
    # What was downloaded makes sessions.
    driver.then(call(driver, "sys_session_create", {"config_path": ".omnigent/agents/w.yaml"}))
    await trio_turn(rt, parent)
    assert json.loads(driver.outputs[5])["agent_name"] == "w"


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
    assert set(every) == {"self", "coder", "script"}
    assert every["self"]["source"] == "config" and every["self"]["provider"] == "gw"
    assert [m["id"] for m in every["self"]["models"]] == [
        "databricks-claude-sonnet-4-6",
        "databricks-gpt-5-4",
    ]
    # The login lists no models: the harness's own names, the spec's model first.
    assert every["coder"]["provider"] == "login" and every["coder"]["source"] == "harness"
    assert every["coder"]["models"] == [
        {"id": "claude-opus-4-8", "family": "claude"},
        {"id": "claude-haiku-4-5", "family": "claude"},
    ]
    assert every["script"]["models"] == [] and "cannot apply" in every["script"]["note"]
    only = json.loads(driver.outputs[1])
    assert list(only) == ["self"] and only["self"]["models"] == [
        {"id": "databricks-gpt-5-4", "family": "openai"}
    ]
    assert driver.outputs[2].startswith("Error: invalid arguments for sys_list_models: 'workers'")
    (omnigent_home / "config.yaml").write_text("providers: [{name: x, kind: nope}]")
    driver.then(call(driver, "sys_list_models", {}))
    await trio_turn(rt, parent)
    assert driver.outputs[3].startswith("Error: cannot read the provider configuration: invalid")
    assert "providers[0].kind" in driver.outputs[3]


def test_list_models_without_an_agent_spec_is_a_clear_error() -> None:
    with pytest.raises(ToolError) as caught:
        workers_of(None, None)  # type: ignore[arg-type]
    assert "needs the calling agent's spec" in caught.value.message
