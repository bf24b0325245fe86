"""A spec's credentials are shown to nobody but the agent's owner.

Found by the third attack probe (issue 23, defect 3): ``sys_agent_download`` wrote
another user's whole spec into the caller's workspace, ``mcp_servers[].headers``
included (an ``Authorization: Bearer`` token); ``api_key`` was dropped, headers were
not, and ``GET /v1/agents/{id}/spec`` showed header values too. Now every place that
shows a spec uses one rule (:func:`omnigent.spec.redact_secrets`): ``env`` and
``headers`` values, and values under keys naming a key, token, secret, password,
credential, cookie or authorization, read ``<redacted>`` — unless the caller owns
the agent (``sys_agent_download``). A spec's ``repr`` (what a log line would print)
holds none of them either.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import trio
import yaml

import omnigent
from omnigent.spec import redact_secrets

from .serve_helpers import ALICE, BOB, open_serve, scripted

TOKEN = "Bearer alice-mcp-token-0042"
KEY = "sk-alice-model-key-0042"
TERM_SECRET = "alice-terminal-env-0042"
OPTION_TOKEN = "alice-option-token-0042"
REDACTED = "<redacted>"
SECRETS = (TOKEN, KEY, TERM_SECRET, OPTION_TOKEN)


def alice_spec() -> dict[str, Any]:
    spec = scripted(
        "alices",
        mcp_servers=[
            {"name": "docs", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": TOKEN}}
        ],
        terminals={"sh": {"command": "sh", "env": {"DEPLOY": TERM_SECRET}}},
        metadata={"author": "alice", "deploy": {"github_token": OPTION_TOKEN}},
        sub_agents=[
            {
                "name": "helper",
                "executor": {
                    "type": "omnigent",
                    "config": {"harness": "scripted", "api_key": KEY},
                },
                "mcp_servers": [
                    {"name": "x", "url": "http://127.0.0.1:9/x", "headers": {"X-Api-Key": KEY}}
                ],
            }
        ],
    )
    return spec


async def _download(served: Any, client: Any, agent_id: str, name: str) -> str:
    """A session of ``client``'s spawning agent downloads the agent of ``client``'s
    session of ``agent_id`` (the original's ``sys_agent_download {session_id}``); the
    spec's text in the bundle."""
    subject = await served.session(client, agent_id=agent_id)
    args = {"session_id": subject, "dest_filename": "x.tar.gz"}
    downloader = await served.agent(
        scripted(name, [{"call": "sys_agent_download", "args": args}], spawn=True), client
    )
    session = await served.session(client, agent_id=downloader)
    content = [{"type": "input_text", "text": "go"}]
    body = {"type": "message", "data": {"role": "user", "content": content}}
    async with client.stream(
        "POST", f"/v1/sessions/{session}/events?stream=true", json=body
    ) as stream:
        async for _ in stream.aiter_lines():
            pass
    path = served.home / "workspaces" / session / "workspace" / "x.tar.gz"
    data = await trio.Path(path).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as bundle:
        member = bundle.extractfile("config.yaml")
        assert member is not None
        return member.read().decode()


async def test_another_users_download_and_spec_show_no_credentials(tmp_path: Path) -> None:
    options = (
        "--auth",
        "header",
        "--allow-mcp-url",
        "http://127.0.0.1:9/",
        "--allow-command",
        "sh",
        "--allow-env",
        "DEPLOY",
    )
    with trio.fail_after(60):
        async with open_serve(tmp_path, *options) as served:
            alice, bob = served.as_user(ALICE), served.as_user(BOB)
            async with alice, bob:
                agent_id = await served.agent(alice_spec(), alice)
                theirs = await _download(served, bob, agent_id, "bobs")
                for secret in SECRETS:
                    assert secret not in theirs, theirs
                shown = yaml.safe_load(theirs)
                assert shown["mcp_servers"][0]["headers"] == {"Authorization": REDACTED}
                assert shown["metadata"] == {
                    "author": "alice",
                    "deploy": {"github_token": REDACTED},
                }
                # The owner's own download is the usable spec (without the model key).
                mine = await _download(served, alice, agent_id, "alices-dl")
                assert TOKEN in mine and TERM_SECRET in mine and KEY in mine
                assert "api_key" not in yaml.safe_load(mine)["executor"]["config"]
                for path in ("/v1/agents", f"/v1/agents/{agent_id}", f"/v1/agents/{agent_id}/spec"):
                    answer = await bob.get(path)
                    assert answer.status_code == 200, answer.text
                    for secret in SECRETS:
                        assert secret not in answer.text, (path, answer.text)


def test_the_rule_and_the_repr() -> None:
    spec = omnigent.AgentSpec.from_dict(alice_spec())
    shown = json.dumps(redact_secrets(spec.to_dict()))
    for secret in SECRETS:
        assert secret not in shown
        assert secret not in repr(spec)
    assert redact_secrets({"auth": "a", "basic_auth": "b", "author": "c", "Cookie": "d"}) == {
        "auth": REDACTED,
        "basic_auth": REDACTED,
        "author": "c",
        "Cookie": REDACTED,
    }
