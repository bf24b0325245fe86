"""Regressions for defects that fuzzing the API from its document found (issue 17).

Each test names what was wrong. The fuzzer itself is
``tests/reliability/test_fuzz_openapi.py``.
"""

from __future__ import annotations

import json

import pytest
import trio

import omnigent
from omnigent.errors import InvalidInput, SpecError
from omnigent.model import loads
from omnigent.rpc import decode

from .http_helpers import HTTPX_GENERATORS, open_server, scripted
from .openapi_helpers import assert_conforms

pytestmark = HTTPX_GENERATORS

RAW = {"content-type": "application/json"}


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1E+999"])
def test_a_number_no_double_holds_is_refused_not_turned_into_infinity(number: str) -> None:
    # Was: Python read 1e400 as inf, and every answer or stream echoing it carried
    # ``Infinity``, which is not JSON.
    with pytest.raises(InvalidInput) as caught:
        loads(f'{{"a": [{number}]}}')
    assert caught.value.details[0].loc == "body"
    assert "too large" in caught.value.details[0].msg
    assert loads('{"a": 1e308}') == {"a": 1e308}
    reply = decode(f'{{"jsonrpc": "2.0", "id": 1, "method": "m", "params": {{"x": {number}}}}}')
    assert isinstance(reply, dict) and reply["error"]["code"] == -32700


async def test_an_approval_carrying_1e400_is_refused_and_publishes_nothing() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            url = f"/v1/sessions/{sid}/events"
            held = await server.client.post(
                url, json={"type": "mcp_elicitation", "data": {"message": "ok?"}}
            )
            eid = held.json()["elicitation_id"]
            before = (await server.client.get(f"/v1/sessions/{sid}")).json()["last_event_id"]
            data = {"elicitation_id": eid, "action": "accept", "content": {"x": "NUMBER"}}
            raw = json.dumps({"type": "approval", "data": data}).replace('"NUMBER"', "1e400")
            answer = await server.client.post(url, content=raw, headers=RAW)
            assert answer.status_code == 422, answer.text
            assert_conforms(answer)
            snapshot = (await server.client.get(f"/v1/sessions/{sid}")).json()
            assert snapshot["last_event_id"] == before
            assert [e["elicitation_id"] for e in snapshot["pending_elicitations"]] == [eid]


def test_a_spec_number_must_be_finite() -> None:
    # YAML's .inf reached the spec (and the store) as an infinite temperature.
    spec = scripted("hot")
    spec["executor"]["config"]["temperature"] = float("inf")
    with pytest.raises(SpecError) as caught:
        omnigent.AgentSpec.from_dict(spec)
    assert caught.value.details[0].loc == "executor.config.temperature"
    yaml_text = "name: hot\nexecutor: {config: {harness: scripted, temperature: .nan}}\n"
    with pytest.raises(SpecError):
        omnigent.AgentSpec.from_yaml(yaml_text)


async def test_a_bad_after_is_refused_even_when_last_event_id_is_given() -> None:
    # Was: the header won and ``?after=-1`` went unchecked (the document says minimum 0).
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            answer = await server.client.get(
                f"/v1/sessions/{sid}/stream?after=-1", headers={"Last-Event-ID": "0"}
            )
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["details"][0]["loc"] == "after"


@pytest.mark.parametrize("value", ["٣", "1_0", " 5", "+5", "5\n", "1" * 20])
async def test_a_query_integer_is_ascii_digits(value: str) -> None:
    # Was: Python's int() read Arabic-Indic digits, underscores and spaces as numbers
    # that the document (type integer) does not allow.
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            for url, loc in [
                ("/v1/sessions", "limit"),
                (f"/v1/sessions/{sid}/items", "limit"),
                (f"/v1/sessions/{sid}/stream", "after"),
            ]:
                answer = await server.client.get(url, params={loc: value})
                assert answer.status_code == 422, (url, value, answer.text)
                assert answer.json()["error"]["details"][0]["loc"] == loc
            assert (await server.client.get("/v1/sessions", params={"limit": "05"})).is_success


async def test_a_websocket_agent_name_with_a_trailing_newline_is_refused() -> None:
    # Was: ``^…$`` with ``re.match`` let "default\n" through (``$`` matches before it).
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }
    with trio.fail_after(10):
        async with open_server() as server:
            answer = await server.client.get(
                "/v1/ws", params={"agent": "default\n"}, headers=upgrade
            )
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["details"][0]["loc"] == "agent"


async def test_a_405_names_the_methods_the_path_has() -> None:
    # Was: the envelope replaced werkzeug's answer and dropped its ``Allow`` header
    # (RFC 9110 requires it on a 405).
    with trio.fail_after(10):
        async with open_server() as server:
            answer = await server.client.request("TRACE", "/health")
            assert answer.status_code == 405
            assert answer.json()["error"]["code"] == "method_not_allowed"
            assert set(answer.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}
            sessions = await server.client.put("/v1/sessions", json={})
            assert sessions.status_code == 405
            assert set(sessions.headers["Allow"].split(", ")) == {"GET", "HEAD", "OPTIONS", "POST"}
