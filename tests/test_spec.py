"""The agent spec: parsing, round trips, and errors that name the failing field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import omnigent.spec
from omnigent.errors import ErrorDetail, InvalidInput, SpecError
from omnigent.spec import (
    AgentSpec,
    CallStep,
    ExecutorConfig,
    ExecutorSpec,
    FailStep,
    McpServerSpec,
    OsEnv,
    PolicySpec,
    SandboxSpec,
    SayStep,
    SleepStep,
    TerminalSpec,
    ToolsGrant,
)

# The example from API.md ("Agent spec"), with the elided sub-agent filled in.
EXAMPLE_YAML = """\
name: coder                      # required; [a-z0-9][a-z0-9._-]*
description: Careful coding agent
prompt: You are a careful coding agent.
executor:
  type: omnigent                 # omnigent = harness chosen by config.harness
  config:
    harness: loop                # loop | scripted | <registered external harness>
    model: gpt-4o-mini
    base_url: http://127.0.0.1:8000/v1   # optional; else OPENAI_BASE_URL
    script: []                   # scripted harness only (see below)
os_env: {type: caller_process, cwd: ., sandbox: {type: none}}
sub_agents: [ {name: researcher, prompt: Find things., executor: {config: {harness: scripted}}} ]
tools: {agents: [researcher]}    # sub-agent dispatch grant (send + close)
spawn: false                     # true also grants sys_session_create
async_enabled: true              # sys_call_async / sys_read_inbox / sys_cancel_async
terminals: {bash: {command: bash, args: [-l]}}   # grants the five sys_terminal_* tools
policies:
  - {name: ask_shell, type: ask_tools, tools: [sys_os_shell], reason: Approve shell}
  - {name: no_rm, type: deny_tools, tools: [sys_os_delete]}
  - {name: custom, type: function, function: mypkg.policies:check}
agent_session_sharing: none      # none | non-public | public
mcp_servers:                     # tools appear as mcp__<server>__<tool>
  - {name: fs, command: [python, -m, my_mcp_server], env: {}}   # stdio
  - {name: docs, url: http://127.0.0.1:9000/mcp}                # streamable HTTP
"""

EXPECTED = AgentSpec(
    name="coder",
    description="Careful coding agent",
    prompt="You are a careful coding agent.",
    executor=ExecutorSpec(
        type="omnigent",
        config=ExecutorConfig(
            harness="loop",
            model="gpt-4o-mini",
            base_url="http://127.0.0.1:8000/v1",
            script=(),
        ),
    ),
    os_env=OsEnv(type="caller_process", cwd=".", sandbox=SandboxSpec(type="none")),
    sub_agents=(
        AgentSpec(
            name="researcher",
            prompt="Find things.",
            executor=ExecutorSpec(config=ExecutorConfig(harness="scripted")),
        ),
    ),
    tools=ToolsGrant(agents=("researcher",)),
    spawn=False,
    async_enabled=True,
    terminals={"bash": TerminalSpec(command="bash", args=("-l",))},
    policies=(
        PolicySpec(
            name="ask_shell", type="ask_tools", tools=("sys_os_shell",), reason="Approve shell"
        ),
        PolicySpec(name="no_rm", type="deny_tools", tools=("sys_os_delete",)),
        PolicySpec(name="custom", type="function", function="mypkg.policies:check"),
    ),
    agent_session_sharing="none",
    mcp_servers=(
        McpServerSpec(name="fs", command=("python", "-m", "my_mcp_server")),
        McpServerSpec(name="docs", url="http://127.0.0.1:9000/mcp"),
    ),
)


def spec_error(data: Any) -> SpecError:
    with pytest.raises(SpecError) as info:
        AgentSpec.from_dict(data)
    return info.value


def locs(data: Any) -> set[str]:
    return {d.loc for d in spec_error(data).details}


def with_config(**config: Any) -> dict[str, Any]:
    return {"name": "a", "executor": {"config": config}}


# -- parsing and round trips ----------------------------------------------------------


def test_all_is_sorted_and_complete() -> None:
    assert omnigent.spec.__all__ == sorted(omnigent.spec.__all__)
    for name in omnigent.spec.__all__:
        assert hasattr(omnigent.spec, name)


def test_example_yaml_parses() -> None:
    assert AgentSpec.from_yaml(EXAMPLE_YAML) == EXPECTED


def test_example_json_parses() -> None:
    text = json.dumps(yaml.safe_load(EXAMPLE_YAML))
    assert AgentSpec.from_json(text) == EXPECTED


def test_round_trip_through_dict_and_json() -> None:
    wire = EXPECTED.to_dict()
    assert AgentSpec.from_dict(wire) == EXPECTED
    assert AgentSpec.from_json(json.dumps(wire)) == EXPECTED
    assert "os_env" in wire
    assert "api_key" not in wire["executor"]["config"]  # None fields are left out


def test_round_trip_of_script_steps() -> None:
    steps = (
        SayStep(say="hi"),
        CallStep(call="sys_os_shell", args={"command": "ls"}),
        SleepStep(sleep=0.5),
        FailStep(fail="boom"),
    )
    spec = AgentSpec(
        name="s",
        executor=ExecutorSpec(
            config=ExecutorConfig(harness="scripted", turns=(steps, (SayStep("again"),)))
        ),
        metadata={"owner": {"team": "x"}},
    )
    wire = spec.to_dict()
    assert wire["executor"]["config"]["turns"][0] == [
        {"say": "hi"},
        {"call": "sys_os_shell", "args": {"command": "ls"}},
        {"sleep": 0.5},
        {"fail": "boom"},
    ]
    assert AgentSpec.from_dict(wire) == spec
    assert AgentSpec.from_dict(json.loads(json.dumps(wire))) == spec


def test_minimal_spec_gets_defaults() -> None:
    spec = AgentSpec.from_dict({"name": "a"})
    assert spec == AgentSpec(name="a")
    assert spec.executor == ExecutorSpec(type="omnigent", config=ExecutorConfig())
    assert spec.harness == "loop"
    assert spec.model is None
    assert spec.executor.config.max_steps == 50
    assert spec.os_env is None


def test_properties() -> None:
    assert EXPECTED.harness == "loop"
    assert EXPECTED.model == "gpt-4o-mini"


def test_specs_are_frozen_and_hashable() -> None:
    spec = AgentSpec.from_yaml(EXAMPLE_YAML)
    assert hash(spec) == hash(EXPECTED)
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]


def test_integer_is_accepted_for_float_fields() -> None:
    spec = AgentSpec.from_dict(with_config(temperature=1, script=[{"sleep": 2}]))
    assert spec.executor.config.temperature == 1.0
    assert spec.executor.config.script == (SleepStep(sleep=2.0),)


def test_external_harness_by_command() -> None:
    spec = AgentSpec.from_dict(with_config(harness="external", command=["python", "h.py"]))
    assert spec.executor.config.command == ("python", "h.py")


def test_free_form_fields_keep_any_values() -> None:
    spec = AgentSpec.from_dict(
        {
            "name": "a",
            "metadata": {"x": [1, {"y": None}]},
            "executor": {"config": {"options": {"k": 1}}},
        }
    )
    assert spec.metadata == {"x": [1, {"y": None}]}
    assert spec.executor.config.options == {"k": 1}


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_load_by_suffix(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"coder{suffix}"
    data = yaml.safe_load(EXAMPLE_YAML)
    path.write_text(json.dumps(data) if suffix == ".json" else EXAMPLE_YAML)
    assert AgentSpec.load(path) == EXPECTED
    assert AgentSpec.load(str(path)) == EXPECTED


def test_load_json_suffix_is_parsed_as_json(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text("name: a\n")  # valid YAML, invalid JSON
    with pytest.raises(SpecError) as info:
        AgentSpec.load(path)
    assert info.value.details[0].loc == "$"


# -- errors: one SpecError naming every field -----------------------------------------


def test_spec_error_is_an_invalid_input() -> None:
    err = spec_error({})
    assert isinstance(err, InvalidInput)
    assert isinstance(err, ValueError)
    assert err.code == "invalid_spec"
    assert err.status == 422
    assert err.details == (ErrorDetail("name", "required field missing"),)


def test_unknown_keys_are_named() -> None:
    data = {"name": "a", "bogus_key": 1, "executor": {"config": {"nope": 1}}}
    assert locs(data) == {"bogus_key", "executor.config.nope"}
    assert {d.msg for d in spec_error(data).details} == {"unknown field"}


@pytest.mark.parametrize(
    ("data", "loc"),
    [
        ({"name": "a", "spawn": "yes"}, "spawn"),
        ({"name": "a", "async_enabled": 1}, "async_enabled"),
        ({"name": 7}, "name"),
        (with_config(max_steps="3"), "executor.config.max_steps"),
        (with_config(max_steps=3.0), "executor.config.max_steps"),
        (with_config(max_steps=True), "executor.config.max_steps"),
        (with_config(temperature="0.2"), "executor.config.temperature"),
        (with_config(model=4), "executor.config.model"),
        (with_config(env={"A": 1}), "executor.config.env.A"),
        (with_config(command="python h.py"), "executor.config.command"),
        (with_config(script=[{"sleep": "1"}]), "executor.config.script[0].sleep"),
        (with_config(script=[{"sleep": True}]), "executor.config.script[0].sleep"),
        (with_config(script={"say": "x"}), "executor.config.script"),
        ({"name": "a", "tools": {"agents": "x"}}, "tools.agents"),
        ({"name": "a", "tools": ["x"]}, "tools"),
        ({"name": "a", "terminals": {"bash": {"command": ["bash"]}}}, "terminals.bash.command"),
        ({"name": "a", "terminals": {"bash": "bash"}}, "terminals.bash"),
        (
            {"name": "a", "policies": [{"name": "p", "type": "x", "tools": ["t"]}]},
            "policies[0].type",
        ),
        ({"name": "a", "policies": {"name": "p"}}, "policies"),
        ({"name": "a", "agent_session_sharing": "private"}, "agent_session_sharing"),
        ({"name": "a", "os_env": {"type": "docker"}}, "os_env.type"),
        ({"name": "a", "os_env": {"sandbox": {"type": None}}}, "os_env.sandbox.type"),
        ({"name": "a", "sub_agents": [{"name": "b", "spawn": "no"}]}, "sub_agents[0].spawn"),
        ({"name": "a", "mcp_servers": [{"name": "m", "url": 1}]}, "mcp_servers[0].url"),
        ({"name": "a", "metadata": []}, "metadata"),
    ],
)
def test_wrong_types_are_not_coerced(data: dict[str, Any], loc: str) -> None:
    assert locs(data) == {loc}


@pytest.mark.parametrize("name", ["Coder", "my agent", "-a", ".a", "_a", "", "a/b", "é", "a" * 101])
def test_bad_agent_names(name: str) -> None:
    assert locs({"name": name}) == {"name"}


@pytest.mark.parametrize("name", ["a", "0", "coder-2.v1_x", "a" * 100])
def test_good_agent_names(name: str) -> None:
    assert AgentSpec.from_dict({"name": name}).name == name


def test_script_step_errors_name_the_step() -> None:
    data = with_config(
        harness="scripted",
        script=[
            {"say": "ok"},
            {"say": 1},
            {"sleep": -1},
            {},
            {"say": "a", "fail": "b"},
            "say hi",
            {"call": "t", "args": []},
            {"say": "x", "args": {}},
            {"sleep": float("inf")},
            {"call": ""},
        ],
    )
    err = spec_error(data)
    assert [d.loc for d in err.details] == [
        "executor.config.script[1].say",
        "executor.config.script[2].sleep",
        "executor.config.script[3]",
        "executor.config.script[4]",
        "executor.config.script[5]",
        "executor.config.script[6].args",
        "executor.config.script[7].args",
        "executor.config.script[8].sleep",
        "executor.config.script[9].call",
    ]
    assert "exactly one of say, call, sleep, fail" in err.details[2].msg
    assert "say and fail" in err.details[3].msg


def test_turn_steps_are_named_by_turn_and_step() -> None:
    data = with_config(turns=[[{"say": "a"}], [{"say": "b"}, {"sleep": -0.1}]])
    assert locs(data) == {"executor.config.turns[1][1].sleep"}


@pytest.mark.parametrize(
    ("config", "loc"),
    [
        ({"script": [], "turns": [[]]}, "executor.config.turns"),
        ({"turns": []}, "executor.config.turns"),
        ({"max_steps": 0}, "executor.config.max_steps"),
        ({"harness": ""}, "executor.config.harness"),
        ({"command": []}, "executor.config.command"),
        ({"command": ["python", ""]}, "executor.config.command[1]"),
        ({"harness": "external"}, "executor.config.command"),
    ],
)
def test_executor_config_rules(config: dict[str, Any], loc: str) -> None:
    assert locs(with_config(**config)) == {loc}


def test_tools_agents_must_name_a_sub_agent() -> None:
    data = {
        "name": "a",
        "sub_agents": [{"name": "r"}],
        "tools": {"agents": ["r", "ghost", "spirit"]},
    }
    err = spec_error(data)
    assert [d.loc for d in err.details] == ["tools.agents[1]", "tools.agents[2]"]
    assert "'ghost'" in err.details[0].msg


def test_tools_agents_without_sub_agents() -> None:
    assert locs({"name": "a", "tools": {"agents": ["r"]}}) == {"tools.agents[0]"}


@pytest.mark.parametrize(
    ("field", "item"),
    [
        ("sub_agents", {"name": "x"}),
        ("policies", {"name": "x", "type": "deny_tools", "tools": ["t"]}),
        ("mcp_servers", {"name": "x", "url": "http://h/mcp"}),
    ],
)
def test_duplicate_names(field: str, item: dict[str, Any]) -> None:
    other = {**item, "name": "y"}
    data = {"name": "a", field: [item, other, item]}
    err = spec_error(data)
    assert [d.loc for d in err.details] == [f"{field}[2].name"]
    assert "duplicate" in err.details[0].msg


def test_sub_agents_are_full_specs() -> None:
    data = {
        "name": "a",
        "sub_agents": [{"name": "b", "sub_agents": [{"name": "C", "bogus": 1}]}],
    }
    assert locs(data) == {"sub_agents[0].sub_agents[0].name", "sub_agents[0].sub_agents[0].bogus"}


@pytest.mark.parametrize(
    ("policy", "loc"),
    [
        ({"type": "ask_tools"}, "policies[0].tools"),
        ({"type": "deny_tools", "tools": []}, "policies[0].tools"),
        ({"type": "allow_tools"}, "policies[0].tools"),
        ({"type": "function"}, "policies[0].function"),
        ({"type": "function", "function": "no spaces"}, "policies[0].function"),
        ({"type": "function", "function": "-leading-dash"}, "policies[0].function"),
        ({"type": "function", "function": "x" * 201}, "policies[0].function"),
        ({"type": "function", "function": "a.b:"}, "policies[0].function"),
        ({"type": "function", "function": "a b.c"}, "policies[0].function"),
        ({"type": "function", "function": "a.b", "tools": ["t"]}, "policies[0].tools"),
        ({"type": "deny_tools", "tools": ["t"], "function": "a.b"}, "policies[0].function"),
        ({"type": "deny_tools", "tools": ["t"], "name": ""}, "policies[0].name"),
        ({"tools": ["t"]}, "policies[0].type"),
    ],
)
def test_policy_rules(policy: dict[str, Any], loc: str) -> None:
    assert locs({"name": "a", "policies": [{"name": "p", **policy}]}) == {loc}


@pytest.mark.parametrize(
    "ref", ["pkg.mod:attr", "pkg.mod.attr", "mod:obj.method", "m:f", "ask_for_bash", "acme-guard"]
)
def test_function_refs(ref: str) -> None:
    spec = AgentSpec.from_dict(
        {"name": "a", "policies": [{"name": "p", "type": "function", "function": ref}]}
    )
    assert spec.policies[0].function == ref


@pytest.mark.parametrize(
    ("server", "loc"),
    [
        ({"name": "m"}, "mcp_servers[0].command"),
        ({"name": "m", "command": ["x"], "url": "http://h"}, "mcp_servers[0].url"),
        ({"name": "m", "command": []}, "mcp_servers[0].command"),
        ({"name": "m", "url": "ftp://h"}, "mcp_servers[0].url"),
        ({"name": "m", "url": "http://h", "env": {"A": "b"}}, "mcp_servers[0].env"),
        ({"name": "m", "command": ["x"], "headers": {"A": "b"}}, "mcp_servers[0].headers"),
        ({"name": "My.Server", "url": "http://h"}, "mcp_servers[0].name"),
        ({"name": "a__b", "url": "http://h"}, "mcp_servers[0].name"),
        ({"name": "_a", "url": "http://h"}, "mcp_servers[0].name"),
    ],
)
def test_mcp_server_rules(server: dict[str, Any], loc: str) -> None:
    assert locs({"name": "a", "mcp_servers": [server]}) == {loc}


@pytest.mark.parametrize("name", ["fs", "my_server", "my-server-2"])
def test_mcp_server_names_allow_underscores(name: str) -> None:
    spec = AgentSpec.from_dict({"name": "a", "mcp_servers": [{"name": name, "url": "http://h"}]})
    assert spec.mcp_servers[0].name == name


def test_all_failures_are_collected_in_one_error() -> None:
    data = {
        "name": "Bad Name",
        "spawn": "yes",
        "bogus_key": 1,
        "executor": {"config": {"max_steps": "3", "script": [{"sleep": -1}]}},
        "policies": [{"name": "p", "type": "ask_tools"}, {"name": "q", "type": "nope"}],
        "mcp_servers": [{"name": "m"}],
    }
    assert locs(data) == {
        "name",
        "spawn",
        "bogus_key",
        "executor.config.max_steps",
        "executor.config.script[0].sleep",
        "policies[0].tools",
        "policies[1].type",
        "mcp_servers[0].command",
    }


def test_error_message_summarises_the_details() -> None:
    err = spec_error({"name": "a", "spawn": "yes"})
    assert "spawn" in str(err)
    assert "expected boolean" in str(err)


# -- text input ------------------------------------------------------------------------


def test_yaml_syntax_error() -> None:
    with pytest.raises(SpecError) as info:
        AgentSpec.from_yaml("name: a\nprompt: [unclosed\nspawn: false\n")
    (detail,) = info.value.details
    assert detail.loc == "$"
    assert "line 3" in detail.msg
    assert isinstance(info.value.__cause__, yaml.YAMLError)


def test_json_syntax_error() -> None:
    with pytest.raises(SpecError) as info:
        AgentSpec.from_json('{"name": "a",\n}')
    (detail,) = info.value.details
    assert detail.loc == "$"
    assert "line 2" in detail.msg


@pytest.mark.parametrize("text", ["- name: a\n", "just text\n", "42\n", "", "null\n"])
def test_yaml_top_level_must_be_a_mapping(text: str) -> None:
    with pytest.raises(SpecError) as info:
        AgentSpec.from_yaml(text)
    assert [d.loc for d in info.value.details] == ["$"]


@pytest.mark.parametrize("data", [[{"name": "a"}], "a", None, 3])
def test_from_dict_rejects_non_mappings(data: Any) -> None:
    assert locs(data) == {"$"}


def test_yaml_values_are_not_coerced() -> None:
    # YAML itself types `"false"` (quoted) as a string: it stays an error.
    with pytest.raises(SpecError) as info:
        AgentSpec.from_yaml('name: a\nspawn: "false"\nexecutor: {config: {max_steps: "3"}}\n')
    assert {d.loc for d in info.value.details} == {"spawn", "executor.config.max_steps"}


# -- construction in Python -----------------------------------------------------------


def test_python_construction_checks_the_same_rules() -> None:
    with pytest.raises(SpecError) as info:
        AgentSpec(name="Bad", tools=ToolsGrant(agents=("ghost",)))
    assert [d.loc for d in info.value.details] == ["name", "tools.agents[0]"]
    with pytest.raises(SpecError) as info:
        ExecutorConfig(max_steps=0, script=(), turns=((),))
    assert [d.loc for d in info.value.details] == ["max_steps", "turns"]
    with pytest.raises(SpecError):
        SleepStep(sleep=-1)
    with pytest.raises(SpecError):
        PolicySpec(name="p", type="ask_tools")
