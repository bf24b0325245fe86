"""Spec keys whose feature is not built are refused at registration, naming the key."""

from __future__ import annotations

from typing import Any

import pytest

import omnigent
from omnigent.spec import _unbuilt
from omnigent.spec._unbuilt import UNBUILT
from omnigent.testing import scripted_agent

SETTINGS: dict[str, dict[str, Any]] = {
    "os_env.fork": {"os_env": {"fork": True}},
    "os_env.start_in_scratch": {"os_env": {"start_in_scratch": True}},
}


def test_every_unbuilt_key_has_a_case_here() -> None:
    # When a feature lands and its row leaves the table, its case leaves too.
    assert set(SETTINGS) == set(UNBUILT)


def _spec(**extra: Any) -> dict[str, Any]:
    return {**scripted_agent("a"), **extra}


async def test_a_key_whose_feature_is_not_built_is_refused(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every key is built today; the table still works for the next one.
    monkeypatch.setattr(_unbuilt, "UNBUILT", {"spawn": "a feature to come"})
    with pytest.raises(omnigent.SpecError) as caught:
        await rt.create_agent(_spec(spawn=True))
    detail = next(d for d in caught.value.details if d.loc == "spawn")
    assert "a feature to come" in detail.msg and "remove the key" in detail.msg
    assert await rt.list_agents() == []  # nothing was stored


@pytest.mark.parametrize("key", sorted(SETTINGS))
async def test_each_unbuilt_key_is_refused_naming_it(rt: omnigent.Runtime, key: str) -> None:
    with pytest.raises(omnigent.SpecError) as caught:
        await rt.create_agent(_spec(**SETTINGS[key]))
    assert any(d.loc == key and "remove the key" in d.msg for d in caught.value.details)


async def test_keys_left_at_their_defaults_ask_for_nothing(rt: omnigent.Runtime) -> None:
    spec = _spec(spawn=False, sub_agents=[], tools={"agents": []})
    assert (await rt.create_agent(spec)).version == 1


async def test_the_sub_agent_keys_are_built(rt: omnigent.Runtime) -> None:
    spec = _spec(spawn=True, sub_agents=[scripted_agent("helper")], tools={"agents": ["helper"]})
    assert (await rt.create_agent(spec)).version == 1
