"""ACP v1 as its schema stands at 1.21: authentication, resume, close, delete, fork, live
session info, config options (``model_config``, boolean), form elicitations, request
cancellation both ways. In process (:mod:`.acp_helpers`); every message the agent sends
is checked against the vendored schema."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent import rpc
from omnigent.model import ElicitationParams, ElicitationResolved
from omnigent.testing import MockLLM
from omnigent.testing import scripted_agent as scripted

from .acp_helpers import Editor, open_acp

ASK_SHELL = [{"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"], "reason": "ok?"}]
ASK_WRITES = [{"name": "ask_w", "type": "ask_tools", "tools": ["sys_os_w*"], "reason": "write?"}]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "x-extra": 1},
        "level": {"type": "string", "enum": ["low", "high"]},
        "count": {"type": "integer", "minimum": 1},
    },
    "required": ["name"],
}


def loop_spec(name: str = "looped", **config: Any) -> dict[str, Any]:
    cfg = {"harness": "loop", "model": "mock-model", "base_url": "http://mock/v1", **config}
    return {"name": name, "executor": {"type": "omnigent", "config": cfg}, "policies": ASK_WRITES}


async def new(editor: Editor, cwd: str = "/tmp") -> dict[str, Any]:
    result: dict[str, Any] = await editor.call("session/new", {"cwd": cwd, "mcpServers": []})
    return result


async def rpc_error(editor: Editor, method: str, params: dict[str, Any]) -> rpc.RpcError:
    with pytest.raises(rpc.RpcError) as caught:
        await editor.call(method, params)
    return caught.value


# -- authenticate ---------------------------------------------------------------------


async def test_authenticate_checks_the_model_key(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    own = {"name": "openai", "executor": {"type": "omnigent", "config": {"harness": "loop"}}}
    await rt.create_agent(own)
    await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    with trio.fail_after(5):
        async with open_acp(rt, "openai") as editor:
            missing = await rpc_error(editor, "authenticate", {"methodId": "model-api-key"})
            assert missing.code == -32000 and "OPENAI_API_KEY" in missing.message
            other = await rpc_error(editor, "authenticate", {"methodId": "oauth"})
            assert other.code == rpc.INVALID_PARAMS
            assert await editor.call("authenticate", {}) == {}  # no method: nothing to check
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            assert await editor.call("authenticate", {"methodId": "model-api-key"}) == {}
        async with open_acp(rt, "talker") as editor:  # needs no key
            monkeypatch.delenv("OPENAI_API_KEY")
            assert await editor.call("authenticate", {"methodId": "model-api-key"}) == {}


async def test_set_model_is_not_a_method(rt: omnigent.Runtime) -> None:
    await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    with trio.fail_after(5):
        async with open_acp(rt, "talker") as editor:
            sid = (await new(editor))["sessionId"]
            gone = await rpc_error(editor, "session/set_model", {"sessionId": sid, "modelId": "x"})
            assert gone.code == rpc.METHOD_NOT_FOUND


# -- resume, close, delete, fork ----------------------------------------------------------


async def test_resume_reattaches_without_replay_and_asks_what_is_pending(
    rt: omnigent.Runtime,
) -> None:
    cmd = {"command": "echo hi"}
    await rt.create_agent(
        {**scripted("asker", [{"call": "sys_os_shell", "args": cmd}]), "policies": ASK_SHELL}
    )
    with trio.fail_after(10):
        async with open_acp(rt, "asker") as first:
            sid = (await new(first))["sessionId"]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first.prompt, sid)
                await first.next_request("session/request_permission")
                nursery.cancel_scope.cancel()  # the editor goes away, the turn waits on
        # (the closed prompt interrupted its turn: start one that waits again)
        await rt.send_message(sid, "again")
        async with open_acp(rt, "asker") as second:
            result = await second.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
            )
            assert [o["id"] for o in result["configOptions"]] == ["model"]
            asked = await second.next_request("session/request_permission")
            assert asked.params["sessionId"] == sid
            assert second.session_updates(sid, "user_message_chunk") == []  # no replay
            asked.choose("allow_once")

            async def allow(method: str, params: dict[str, Any]) -> Any:
                return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

            second.answerers["session/request_permission"] = allow
            assert await second.prompt(sid, "more") == {"stopReason": "end_turn"}
            missing = await rpc_error(
                second, "session/resume", {"sessionId": "conv_nope", "cwd": "/tmp"}
            )
            assert missing.code == rpc.RESOURCE_NOT_FOUND


async def test_close_stops_the_work_and_frees_the_session_but_keeps_it(
    rt: omnigent.Runtime,
) -> None:
    await rt.create_agent(scripted("sleeper", [{"say": "working"}, {"sleep": 30}]))
    with trio.fail_after(10):
        async with open_acp(rt, "sleeper") as editor:
            sid = (await new(editor))["sessionId"]
            async with trio.open_nursery() as nursery:
                answer: list[Any] = []

                async def prompt() -> None:
                    answer.append(await editor.prompt(sid))

                nursery.start_soon(prompt)
                await editor.wait_for_update(
                    lambda u: u["update"]["sessionUpdate"] == "agent_message_chunk"
                )
                assert await editor.call("session/close", {"sessionId": sid}) == {}
            assert answer == [{"stopReason": "cancelled"}]
            assert (await rt.get_session(sid)).status == "cancelled"
            assert len((await rt.list_items(sid)).data) >= 1  # the history stays
            not_open = await rpc_error(editor, "session/prompt", {"sessionId": sid, "prompt": []})
            assert not_open.code == rpc.RESOURCE_NOT_FOUND
            again = await rpc_error(editor, "session/close", {"sessionId": sid})
            assert again.code == rpc.RESOURCE_NOT_FOUND
            load = {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
            assert "configOptions" in await editor.call("session/load", load)  # reopens


async def test_delete_removes_the_session_and_is_idempotent(rt: omnigent.Runtime) -> None:
    await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    with trio.fail_after(10):
        async with open_acp(rt, "talker") as editor:
            sid = (await new(editor, "/tmp/p"))["sessionId"]
            assert await editor.prompt(sid) == {"stopReason": "end_turn"}
            assert await editor.call("session/delete", {"sessionId": sid}) == {}
            with pytest.raises(omnigent.SessionNotFound):
                await rt.get_session(sid)
            listed = await editor.call("session/list", {"cwd": "/tmp/p"})
            assert listed["sessions"] == []
            for gone in (sid, "conv_never"):
                assert await editor.call("session/delete", {"sessionId": gone}) == {}


async def test_delete_needs_manage_and_hides_what_the_user_cannot_see(
    rt: omnigent.Runtime,
) -> None:
    agent = await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    theirs = await rt.create_session(agent.id, owner="ann", cwd="/tmp")
    with trio.fail_after(5):
        async with open_acp(rt, "talker", user="bob", check_access=True) as editor:
            # bob cannot see it: for him it does not exist, and deleting it is a no-op.
            assert await editor.call("session/delete", {"sessionId": theirs.id}) == {}
            await rt.grant(theirs.id, "bob", 1)
            refused = await rpc_error(editor, "session/delete", {"sessionId": theirs.id})
            assert refused.code == -32001 and refused.data["code"] == "forbidden"
    assert (await rt.get_session(theirs.id)).id == theirs.id


async def test_fork_opens_a_copy_up_to_an_item(rt: omnigent.Runtime) -> None:
    await rt.create_agent(scripted("talker", [{"say": "hello"}]))
    with trio.fail_after(10):
        async with open_acp(rt, "talker") as editor:
            sid = (await new(editor))["sessionId"]
            await editor.prompt(sid, "one")
            await editor.prompt(sid, "two")
            items = (await rt.list_items(sid)).data
            params = {
                "sessionId": sid,
                "cwd": "/tmp/fork",
                "mcpServers": [],
                "_meta": {"omnigent": {"upToItemId": items[1].id}},
            }
            forked = await editor.call("session/fork", params)
            fork_id = forked["sessionId"]
            assert fork_id != sid and forked["configOptions"][0]["id"] == "model"
            assert len((await rt.list_items(fork_id)).data) == 2
            assert (await rt.get_session(fork_id)).cwd == "/tmp/fork"
            assert await editor.prompt(fork_id, "three") == {"stopReason": "end_turn"}
            assert len((await rt.list_items(sid)).data) == 4  # the source is untouched
            bad = dict(params, _meta={"omnigent": {"upToItemId": "item_nope"}})
            refused = await rpc_error(editor, "session/fork", bad)
            assert refused.code == rpc.INVALID_PARAMS


# -- live session info, config options ---------------------------------------------------


async def test_a_title_or_model_changed_elsewhere_reaches_the_editor_live(
    rt: omnigent.Runtime,
) -> None:
    await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    with trio.fail_after(5):
        async with open_acp(rt, "talker") as editor:
            sid = (await new(editor))["sessionId"]
            await rt.update_session(sid, title="Renamed in the console")
            info = await editor.wait_for_update(
                lambda u: u["update"]["sessionUpdate"] == "session_info_update"
            )
            assert info["update"]["title"] == "Renamed in the console"
            await rt.update_session(sid, model_override="other-model")
            update = await editor.wait_for_update(
                lambda u: u["update"]["sessionUpdate"] == "config_option_update"
            )
            [model] = update["update"]["configOptions"]
            assert model["currentValue"] == "other-model"


async def test_temperature_is_a_model_config_option_the_loop_uses(
    rt: omnigent.Runtime,
) -> None:
    mock = MockLLM()
    mock.reply_text("warm")
    with trio.fail_after(10):
        async with (
            httpx.AsyncClient(transport=mock.transport()) as http,
            omnigent.open_runtime(http_client=http) as loop_rt,
        ):
            await loop_rt.create_agent(loop_spec(temperature=0.7))
            async with open_acp(loop_rt, "looped") as editor:
                result = await new(editor)
                sid = result["sessionId"]
                ids = [(o["id"], o.get("category"), o["type"]) for o in result["configOptions"]]
                assert ids == [
                    ("model", "model", "select"),
                    ("temperature", "model_config", "select"),
                ]
                assert result["configOptions"][1]["currentValue"] == "default"
                set_to = {"sessionId": sid, "configId": "temperature", "value": "0.2"}
                changed = await editor.call("session/set_config_option", set_to)
                assert changed["configOptions"][1]["currentValue"] == "0.2"
                assert loop_rt.session_temperature(sid) == 0.2
                assert await editor.prompt(sid) == {"stopReason": "end_turn"}
                assert mock.requests[-1]["temperature"] == 0.2
                for value in ("3", "warm", True):
                    bad = await rpc_error(
                        editor, "session/set_config_option", dict(set_to, value=value)
                    )
                    assert bad.code == rpc.INVALID_PARAMS
                back = dict(set_to, value="default")
                await editor.call("session/set_config_option", back)
                assert loop_rt.session_temperature(sid) is None


async def test_a_boolean_option_only_for_clients_that_take_them(rt: omnigent.Runtime) -> None:
    await rt.create_agent(loop_spec())
    with trio.fail_after(5):
        async with open_acp(rt, "looped") as plain:
            assert [o["id"] for o in (await new(plain))["configOptions"]] == [
                "model",
                "temperature",
            ]
        async with open_acp(rt, "looped", boolean=True) as editor:
            result = await new(editor)
            sid = result["sessionId"]
            edits = result["configOptions"][2]
            assert (edits["id"], edits["type"], edits["currentValue"]) == (
                "auto_approve_edits",
                "boolean",
                False,
            )
            on = {"sessionId": sid, "configId": "auto_approve_edits", "type": "boolean"}
            changed = await editor.call("session/set_config_option", dict(on, value=True))
            assert changed["configOptions"][2]["currentValue"] is True
            assert rt.standing_answer(sid, "sys_os_write") == "accept"
            assert rt.standing_answer(sid, "sys_os_edit") == "accept"
            bad = await rpc_error(editor, "session/set_config_option", dict(on, value="yes"))
            assert bad.code == rpc.INVALID_PARAMS
            await editor.call("session/set_config_option", dict(on, value=False))
            assert rt.standing_answer(sid, "sys_os_write") is None


# -- elicitations -------------------------------------------------------------------------


async def test_a_form_goes_as_elicitation_create_when_the_client_takes_forms(
    rt: omnigent.Runtime,
) -> None:
    await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    params = ElicitationParams(
        mode="form", message="Who are you?", phase="mcp_elicitation", requestedSchema=SCHEMA
    )
    with trio.fail_after(10):
        async with open_acp(rt, "talker", form=True) as editor:
            sid = (await new(editor))["sessionId"]
            async with rt.subscribe(sid) as events:
                eid = await rt.hold_elicitation(sid, params)
                asked = await editor.next_request("elicitation/create")
                sent = asked.params
                assert (sent["sessionId"], sent["mode"], sent["message"]) == (
                    sid,
                    "form",
                    "Who are you?",
                )
                properties = sent["requestedSchema"]["properties"]
                assert properties["name"] == {"type": "string", "title": "Name"}  # x-extra gone
                assert sent["requestedSchema"]["required"] == ["name"]
                asked.reply({"action": "accept", "content": {"name": "Ann", "count": 2}})
                async for event in events:
                    if isinstance(event, ElicitationResolved) and event.elicitation_id == eid:
                        break
            assert (event.action, event.content) == ("accept", {"name": "Ann", "count": 2})
        async with open_acp(rt, "talker") as plain:  # no form capability: a permission
            sid = (await new(plain))["sessionId"]
            await rt.hold_elicitation(sid, params)
            asked = await plain.next_request("session/request_permission")
            assert [o["optionId"] for o in asked.params["options"]] == ["allow_once", "reject_once"]
            asked.choose("reject_once")


async def test_questions_become_a_form_keyed_by_question(rt: omnigent.Runtime) -> None:
    await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    question = {
        "question": "Which color?",
        "header": "Color",
        "multiSelect": False,
        "options": [{"label": "red", "description": "warm"}, {"label": "blue"}],
    }
    params = ElicitationParams(
        mode="form",
        message="Claude asks",
        phase="ask_user_question",
        tool_name="AskUserQuestion",
        ask_user_question={"questions": [question]},
    )
    with trio.fail_after(10):
        async with open_acp(rt, "talker", form=True) as editor:
            sid = (await new(editor))["sessionId"]
            await rt.hold_elicitation(sid, params)
            asked = await editor.next_request("elicitation/create")
            prop = asked.params["requestedSchema"]["properties"]["Which color?"]
            assert prop["type"] == "string" and prop["title"] == "Color"
            assert [o["const"] for o in prop["oneOf"]] == ["red", "blue"]
            asked.reply({"action": "decline"})


async def test_an_unknown_form_answer_declines(rt: omnigent.Runtime) -> None:
    await rt.create_agent(scripted("talker", [{"say": "hi"}]))
    params = ElicitationParams(
        mode="form", message="?", phase="mcp_elicitation", requestedSchema=SCHEMA
    )
    with trio.fail_after(10):
        async with open_acp(rt, "talker", form=True) as editor:
            sid = (await new(editor))["sessionId"]
            async with rt.subscribe(sid) as events:
                await rt.hold_elicitation(sid, params)
                (await editor.next_request("elicitation/create")).reply({"action": "maybe"})
                async for event in events:
                    if isinstance(event, ElicitationResolved):
                        break
            assert event.action == "decline"


# -- request cancellation both ways ----------------------------------------------------------


async def test_cancel_request_answers_minus_32800_and_ends_the_turn_cancelled(
    rt: omnigent.Runtime,
) -> None:
    await rt.create_agent(scripted("sleeper", [{"say": "working"}, {"sleep": 30}]))
    with trio.fail_after(10):
        async with open_acp(rt, "sleeper") as editor:
            sid = (await new(editor))["sessionId"]
            async with rt.subscribe(sid) as events:
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:
                        # The client side cancels its own request: $/cancel_request.
                        nursery.start_soon(editor.prompt, sid)
                        await editor.wait_for_update(
                            lambda u: u["update"]["sessionUpdate"] == "agent_message_chunk"
                        )
                        scope.cancel()
                statuses = [e.status async for e in _statuses(events)]
            assert statuses[-1] == "cancelled"


async def _statuses(events: Any) -> Any:
    async for event in events:
        if event.type == "session.status":
            yield event
            if event.status in ("idle", "failed", "cancelled"):
                return


async def test_message_chunks_carry_the_id_of_their_message(rt: omnigent.Runtime) -> None:
    """``messageId`` on every chunk, live and replayed: the item id of the message."""
    await rt.create_agent(scripted("talker", [{"say": "hello there"}]))
    with trio.fail_after(10):
        async with open_acp(rt, "talker") as editor:
            sid = (await new(editor))["sessionId"]
            await editor.prompt(sid, "hi")
            live = editor.session_updates(sid, "agent_message_chunk")
        items = (await rt.list_items(sid, limit=10)).data
        user, answer = (i.id for i in items if i.type == "message")
        assert live and {c["messageId"] for c in live} == {answer}
        async with open_acp(rt, "talker") as other:
            params = {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
            await other.call("session/load", params)
            replayed = [(u["sessionUpdate"], u["messageId"]) for u in other.session_updates(sid)]
            assert replayed == [("user_message_chunk", user), ("agent_message_chunk", answer)]
