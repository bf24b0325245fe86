"""A spec is stored as JSON: YAML that JSON cannot hold is refused, naming the field;
and a sub-agent's function policy is checked when the agent is registered.

Found by the third attack probe (issue 23, defects 8 and 9): dates, timestamps,
``!!binary``, ``!!set`` and integers over 4,300 digits in a YAML ``POST /v1/agents``
answered ``500`` (the store's JSON encoder met them); ``serve --agents`` with
``metadata: {since: 2024-05-01}`` crashed with a traceback and exit 1; ``.nan`` and
``.inf`` were stored; and ``sys:exit`` as a policy inside ``sub_agents[]`` was
registered (``201``) although ``docs/policies.md`` promises ``422``.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import trio

import omnigent
from omnigent.errors import SpecError

from .serve_helpers import open_serve, run_cli

YAML = {"Content-Type": "application/yaml"}
HEAD = "name: dated\nexecutor: {type: omnigent, config: {harness: scripted, script: [{say: hi}]}}\n"

# What JSON cannot hold, and where the refusal must point.
UNHELD = {
    "metadata: {since: 2024-05-01}": "metadata.since",
    "metadata: {at: 2024-05-01T10:00:00Z}": "metadata.at",
    "metadata: {at: !!timestamp '2024-05-01 10:00:00'}": "metadata.at",
    "metadata: {blob: !!binary aGVsbG8=}": "metadata.blob",
    "metadata: {tags: !!set {a, b}}": "metadata.tags",
    "metadata: {pairs: !!omap [{a: 1}]}": "metadata.pairs",
    "metadata: {n: .nan}": "metadata.n",
    "metadata: {big: [1, .inf]}": "metadata.big[1]",
    "metadata: {small: -.Inf}": "metadata.small",
    f"metadata: {{huge: {'9' * 5000}}}": "metadata.huge",
    "metadata: {1: one}": "metadata.1",
    "executor: {type: omnigent, config: {harness: scripted, script: "
    "[{call: sys_os_read, args: {path: x, when: 2024-05-01}}]}}": (
        "executor.config.script[0].args.when"
    ),
}


def _spec(extra: str) -> str:
    if extra.startswith("executor:"):
        return "name: dated\n" + extra + "\n"
    return HEAD + extra + "\n"


async def test_yaml_a_json_store_cannot_hold_is_a_422_naming_the_field(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_serve(tmp_path) as served:
            for extra, loc in UNHELD.items():
                answer = await served.client.post("/v1/agents", content=_spec(extra), headers=YAML)
                assert answer.status_code == 422, (extra, answer.text)
                details = answer.json()["error"]["details"]
                assert [d["loc"] for d in details] == [loc], (extra, details)
            quoted = HEAD + "metadata: {since: '2024-05-01', n: 1.5, big: 12345678901234567890}\n"
            answer = await served.client.post("/v1/agents", content=quoted, headers=YAML)
            assert answer.status_code == 201, answer.text
            spec = (await served.client.get(f"/v1/agents/{answer.json()['id']}/spec")).json()
            assert spec["spec"]["metadata"] == {
                "since": "2024-05-01",
                "n": 1.5,
                "big": 12345678901234567890,
            }
            assert (await served.client.get("/health")).status_code == 200


async def test_serve_agents_with_a_date_prints_one_error_and_exits_2(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "dated.yaml").write_text(HEAD + "metadata: {since: 2024-05-01}\n")
    db = f"sqlite:///{tmp_path / 'o.db'}"
    done = await run_cli("serve", "--port", "0", "--db", db, "--agents", str(agents))
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert stderr.startswith("Error: ") and "metadata.since" in stderr, stderr
    assert "Traceback" not in stderr


def test_a_spec_built_in_python_holds_only_json_values() -> None:
    base = {"name": "py", "executor": {"type": "omnigent", "config": {"harness": "scripted"}}}
    bad = {"d": datetime.date(2024, 5, 1), "n": float("nan"), "b": b"x", 1: "one"}
    with pytest.raises(SpecError) as caught:
        omnigent.AgentSpec.from_dict({**base, "metadata": bad})
    assert sorted(d.loc for d in caught.value.details) == [
        "metadata.1",
        "metadata.b",
        "metadata.d",
        "metadata.n",
    ]


SUB_POLICY = {
    "name": "boss",
    "executor": {"type": "omnigent", "config": {"harness": "scripted"}},
    "sub_agents": [
        {
            "name": "helper",
            "executor": {"type": "omnigent", "config": {"harness": "scripted"}},
            "sub_agents": [
                {
                    "name": "deep",
                    "executor": {"type": "omnigent", "config": {"harness": "scripted"}},
                    "policies": [{"name": "bye", "type": "function", "function": "os:_exit"}],
                }
            ],
            "policies": [{"name": "bye", "type": "function", "function": "sys:exit"}],
        }
    ],
}


async def test_a_sub_agents_function_policy_is_checked_at_registration(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_serve(tmp_path) as served:
            answer = await served.client.post("/v1/agents", json=SUB_POLICY)
            assert answer.status_code == 422, answer.text
            locs = sorted(d["loc"] for d in answer.json()["error"]["details"])
            assert locs == [
                "sub_agents[0].policies[0].function",
                "sub_agents[0].sub_agents[0].policies[0].function",
            ]
            assert (await served.client.get("/v1/agents")).json()["data"] == []


async def test_an_allowed_sub_agent_policy_that_cannot_be_imported_is_refused() -> None:
    helper = {
        "name": "helper",
        "executor": {"type": "omnigent", "config": {"harness": "scripted"}},
        "policies": [{"name": "p", "type": "function", "function": "json:dumps"}],
    }
    spec = {**SUB_POLICY, "sub_agents": [helper]}
    with trio.fail_after(30):
        async with omnigent.open_runtime(policy_modules=["json"]) as rt:
            await rt.create_agent(spec)
            helper["policies"] = [{"name": "p", "type": "function", "function": "json:nope"}]
            with pytest.raises(SpecError) as caught:
                await rt.create_agent(spec)
            assert [d.loc for d in caught.value.details] == ["sub_agents[0].policies[0].function"]
