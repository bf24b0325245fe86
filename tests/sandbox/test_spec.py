"""The ``os_env.sandbox`` block: the original omnigent's fields, read strictly."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

import omnigent
from omnigent.spec import AgentSpec
from omnigent.spec._trust import client_spec_problems

ORIGINAL = """
name: original
os_env:
  type: caller_process
  cwd: .
  sandbox:
    type: darwin_seatbelt
    read_paths: ["~/.databrickscfg"]
    write_paths: ["."]
    write_files: ["~/.ssh/known_hosts"]
    allow_network: true
    cwd_allow_hidden: [".git", ".venv"]
    cwd_hidden_scan_max_entries: 12345
    cwd_hidden_scan_overflow: warn
    env_passthrough: ["DATABRICKS_HOST", "DATABRICKS_TOKEN"]
    egress_rules: ["GET api.github.com/repos/databricks/*/**"]
    egress_allow_private_destinations: true
"""


def test_the_original_block_is_accepted_and_cloned_whole() -> None:
    spec = AgentSpec.from_yaml(ORIGINAL)
    clone = AgentSpec.from_dict(spec.to_dict())
    assert clone == spec
    assert spec.to_dict()["os_env"]["sandbox"] == yaml.safe_load(ORIGINAL)["os_env"]["sandbox"]


def test_a_block_without_type_is_this_platforms_sandbox_and_no_block_is_none() -> None:
    boxed = AgentSpec.from_dict({"name": "a", "os_env": {"sandbox": {}}})
    bare = AgentSpec.from_dict({"name": "a", "os_env": {"cwd": "."}})
    assert boxed.os_env is not None and boxed.os_env.sandbox.type == "auto"
    assert bare.os_env is not None and bare.os_env.sandbox.type == "none"
    assert AgentSpec.from_dict(boxed.to_dict()) == boxed


def problems(sandbox: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(omnigent.SpecError) as caught:
        AgentSpec.from_dict({"name": "a", "os_env": {"sandbox": sandbox}})
    return {d.loc: d.msg for d in caught.value.details}


@pytest.mark.parametrize(
    ("sandbox", "where", "says"),
    [
        ({"bogus": 1}, "os_env.sandbox.bogus", "unknown field"),
        ({"type": "firejail"}, "os_env.sandbox.type", ""),
        ({"type": "none", "allow_network": True}, "os_env.sandbox.allow_network", "type none"),
        ({"egress_rules": ["GET x.com"]}, "os_env.sandbox.egress_rules", "allow_network"),
        (
            {"egress_allow_private_destinations": True},
            "os_env.sandbox.egress_allow_private_destinations",
            "egress_rules",
        ),
        (
            {"allow_network": True, "egress_rules": ["GET a.com", "nope"]},
            "os_env.sandbox.egress_rules[1]",
            "METHODS host/path",
        ),
        ({"cwd_allow_hidden": ["git"]}, "os_env.sandbox.cwd_allow_hidden[0]", "starting with '.'"),
        ({"env_passthrough": ["A-B"]}, "os_env.sandbox.env_passthrough[0]", "variable name"),
        ({"cwd_hidden_scan_max_entries": 0}, "os_env.sandbox.cwd_hidden_scan_max_entries", ""),
        ({"cwd_hidden_scan_overflow": "ignore"}, "os_env.sandbox.cwd_hidden_scan_overflow", ""),
        ({"allow_network": "yes"}, "os_env.sandbox.allow_network", ""),
        ({"read_paths": [""]}, "os_env.sandbox.read_paths[0]", "non-empty"),
    ],
)
def test_a_bad_field_is_named(sandbox: dict[str, Any], where: str, says: str) -> None:
    found = problems(sandbox)
    assert where in found, found
    assert says in found[where]


async def test_registering_refuses_naming_the_field(rt: omnigent.Runtime) -> None:
    with pytest.raises(omnigent.SpecError) as caught:
        await rt.create_agent({"name": "a", "os_env": {"sandbox": {"write_path": ["."]}}})
    assert [d.loc for d in caught.value.details] == ["os_env.sandbox.write_path"]


def test_a_client_spec_may_grant_only_inside_its_workspace() -> None:
    spec = AgentSpec.from_dict(
        {
            "name": "a",
            "os_env": {
                "sandbox": {
                    "read_paths": ["docs", "~/.ssh", "/etc"],
                    "write_paths": ["../up"],
                    "write_files": ["out/log.txt"],
                    "env_passthrough": ["OPENAI_API_KEY"],
                }
            },
        }
    )
    found = [d.loc for d in client_spec_problems(spec, ())]
    assert found == [
        "os_env.sandbox.read_paths[1]",
        "os_env.sandbox.read_paths[2]",
        "os_env.sandbox.write_paths[0]",
        "os_env.sandbox.env_passthrough",
    ]
