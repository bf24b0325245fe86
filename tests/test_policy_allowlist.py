"""Which function policies may run: the allowlist, and the library's default."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import omnigent
from omnigent.core.tools._policy_allowlist import PolicyAllowlist, function_name
from omnigent.errors import InvalidInput
from omnigent.testing import scripted_agent

HERE = __name__


def deny(event: dict[str, Any]) -> dict[str, Any]:
    return {"result": "DENY", "reason": "no"}


class Holder:
    @staticmethod
    def check(event: dict[str, Any]) -> dict[str, Any]:
        return {"result": "DENY", "reason": "held"}


imported_elsewhere = Path  # a callable this module did not define


def test_registered_functions_by_name_and_by_default_name() -> None:
    by_name = PolicyAllowlist(functions={"guard": deny}, load_entry_points=False)
    assert by_name.problem("guard") is None
    assert by_name.resolve("guard") is deny
    listed = PolicyAllowlist(functions=[deny], load_entry_points=False)
    assert function_name(deny) == f"{HERE}:deny"
    assert listed.resolve(f"{HERE}:deny") is deny


@pytest.mark.parametrize("ref", [f"{HERE}:deny", f"{HERE}.deny", f"{HERE}:Holder.check"])
def test_an_allowed_module_admits_its_own_callables(ref: str) -> None:
    allowlist = PolicyAllowlist(modules=[HERE], load_entry_points=False)
    assert allowlist.problem(ref) is None
    assert callable(allowlist.resolve(ref))


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        (f"{HERE}:imported_elsewhere", "it is defined in pathlib"),
        (f"{HERE}:pytest.fail", "'pytest' is a module"),
        (f"{HERE}:__loader__", "not a policy function name"),
        (f"{HERE}:nope", "has no 'nope'"),
    ],
)
def test_an_allowed_module_refuses_what_it_did_not_define(ref: str, message: str) -> None:
    allowlist = PolicyAllowlist(modules=[HERE], load_entry_points=False)
    with pytest.raises(InvalidInput, match=message):
        allowlist.resolve(ref)


@pytest.mark.parametrize(
    "ref",
    ["sys:exit", "builtins:exit", "os.system", "tests:x", "tests.test_policy_allowlist_x:deny"],
)
def test_anything_else_is_refused_without_importing(
    ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowlist = PolicyAllowlist(modules=[HERE], load_entry_points=False)
    assert allowlist.problem(ref) is not None
    imported = dict(sys.modules)
    monkeypatch.setattr("importlib.import_module", _no_imports)
    with pytest.raises(InvalidInput, match="is not an allowed policy function"):
        allowlist.resolve(ref)
    assert sys.modules.keys() == imported.keys()


def _no_imports(name: str, package: str | None = None) -> Any:
    raise AssertionError(f"imported {name}")


def test_exactly_the_module_listed() -> None:
    allowlist = PolicyAllowlist(modules=["tests"], load_entry_points=False)
    # A submodule of an allowed package is not allowed by it...
    assert allowlist.problem(f"{HERE}:deny") is not None
    # ...and the dotted form picks the longest allowed prefix.
    nested = PolicyAllowlist(modules=["tests", HERE], load_entry_points=False)
    assert nested.resolve(f"{HERE}.deny") is deny


def test_trusted_references_are_exact() -> None:
    allowlist = PolicyAllowlist(trusted=[f"{HERE}:deny"], load_entry_points=False)
    assert allowlist.resolve(f"{HERE}:deny") is deny
    assert allowlist.problem(f"{HERE}:Holder.check") is not None


@pytest.mark.parametrize(
    ("options", "loc"),
    [
        ({"modules": ["not a module"]}, "policy_modules"),
        ({"modules": ["a..b"]}, "policy_modules"),
        ({"functions": {"": deny}}, "policy_functions"),
        ({"functions": {"x": 3}}, "policy_functions"),
    ],
)
def test_bad_allowlists_are_refused(options: dict[str, Any], loc: str) -> None:
    with pytest.raises(InvalidInput) as info:
        PolicyAllowlist(load_entry_points=False, **options)
    assert [d.loc for d in info.value.details] == [loc]


def test_entry_points_by_name_and_by_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ep_allow_mod.py").write_text("def guard(event):\n    return {'result': 'DENY'}\n")
    dist = tmp_path / "ep_allow_mod-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-allow-mod\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[omnigent.policies]\nguard = ep_allow_mod:guard\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    allowlist = PolicyAllowlist()
    assert "ep_allow_mod" not in sys.modules  # reading the group imports nothing
    assert allowlist.resolve("guard") is allowlist.resolve("ep_allow_mod:guard")
    assert PolicyAllowlist(load_entry_points=False).problem("guard") is not None


# -- the library's default -------------------------------------------------------------


def policy(ref: str) -> dict[str, Any]:
    return {**scripted_agent("a"), "policies": [{"name": "p", "type": "function", "function": ref}]}


async def test_the_library_default_allows_no_module() -> None:
    async with omnigent.open_runtime() as rt:
        with pytest.raises(omnigent.SpecError) as info:
            await rt.create_agent(policy(f"{HERE}:deny"))
        assert [d.loc for d in info.value.details] == ["policies[0].function"]
        assert "open_runtime(policy_functions=...)" in info.value.details[0].msg


async def test_the_library_registers_callables() -> None:
    async with omnigent.open_runtime(policy_functions={"no": deny}) as rt:
        agent = await rt.create_agent(policy("no"))
        session = await rt.create_session(agent.id)
        call = {"type": "PHASE_TOOL_CALL", "data": {"name": "x", "arguments": {}}}
        verdict = await rt.evaluate_policy(session.id, call)
        assert (verdict.action, verdict.reason) == ("DENY", "no")


async def test_default_policies_may_name_any_module() -> None:
    defaults = [{"name": "d", "type": "function", "function": f"{HERE}:deny"}]
    async with omnigent.open_runtime(default_policies=defaults) as rt:
        session = await rt.create_session((await rt.create_agent(scripted_agent("a"))).id)
        call = {"type": "PHASE_TOOL_CALL", "data": {"name": "x"}}
        assert (await rt.evaluate_policy(session.id, call)).policy_name == "d"


async def test_a_stored_agent_no_longer_allowed_fails_closed(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    async with omnigent.open_runtime(db, policy_modules=[HERE]) as rt:
        agent = await rt.create_agent(policy(f"{HERE}:deny"))
    async with omnigent.open_runtime(db) as rt:  # restarted without the module allowed
        session = await rt.create_session(agent.id)
        call = {"type": "PHASE_TOOL_CALL", "data": {"name": "x"}}
        verdict = await rt.evaluate_policy(session.id, call)
        assert verdict.action == "DENY"
        assert verdict.reason is not None
        assert "is not an allowed policy function" in verdict.reason
