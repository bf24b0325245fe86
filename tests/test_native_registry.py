"""The native harnesses as the registry knows them: names, aliases, the model guard,
what a missing CLI does, the spec keys they refuse, and the state they keep.

None of these needs a CLI: a missing one is simulated with ``$OMNIGENT_<NAME>_CLI``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses import HarnessRegistry
from omnigent.harnesses.native._cli import CLAUDE_CLI, CODEX_CLI, model_endpoint
from omnigent.model import ResponseFailed
from omnigent.providers import Provider
from omnigent.spec import AgentSpec
from omnigent.testing import run_turn

from .conftest import statuses
from .native_session_helpers import native_spec


def spec(harness: str, model: str | None = None, **extra: Any) -> dict[str, Any]:
    out = native_spec(harness, "http://127.0.0.1:9", **extra)
    if model is not None:
        out["executor"]["config"]["model"] = model
    return out


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("claude-code", "claude-code"),
        ("claude-sdk", "claude-sdk"),
        ("claude-native", "claude-native"),
        ("claude", "claude-sdk"),
        ("codex", "codex"),
        ("codex-native", "codex-native"),
        ("pi", "pi"),
    ],
)
def test_builtin_names_and_aliases(name: str, canonical: str) -> None:
    """The original omnigent's names read back as written (``claude`` is its alias of
    ``claude-sdk``)."""
    assert HarnessRegistry().canonical(name) == canonical


@pytest.mark.parametrize(
    ("written", "read_back"),
    [
        ("claude-sdk", "claude-sdk"),
        ("claude-native", "claude-native"),
        ("claude", "claude-sdk"),
        ("codex-native", "codex-native"),
        ("pi", "pi"),
    ],
)
async def test_a_spec_and_an_override_read_back_the_name_as_written(
    written: str, read_back: str
) -> None:
    async with omnigent.open_runtime() as rt:
        agent = await rt.create_agent(spec(written))
        assert agent.harness == read_back
        session = await rt.create_session(agent.id)
        assert session.harness == read_back and session.harness_override is None
        looped = await rt.create_agent(
            {"name": "looper", "executor": {"config": {"harness": "loop"}}}
        )
        model = spec(written)["executor"]["config"]["model"]
        session = await rt.create_session(looped.id, harness_override=written, model_override=model)
        assert session.harness_override == read_back and session.harness == read_back


async def test_an_unknown_harness_is_a_400_naming_it_and_leaves_no_session() -> None:
    async with omnigent.open_runtime() as rt:
        agent = await rt.create_agent(spec("claude"))
        with pytest.raises(omnigent.UnknownHarness, match="'claude-sdkk'") as caught:
            await rt.create_session(agent.id, harness_override="claude-sdkk")
        assert caught.value.status == 400 and caught.value.code == "unknown_harness"
        assert (await rt.list_sessions()).data == ()
        with pytest.raises(omnigent.UnknownHarness, match="'pi-native'"):
            await rt.create_agent(spec("pi-native", name="other"))


@pytest.mark.parametrize(
    ("harness", "model", "rule"),
    [
        ("claude-code", "gpt-4o", "only runs Claude models"),
        ("claude", "o4-mini", "only runs Claude models"),
        ("claude-native", "meta-llama-3.3-70b-instruct", "only runs Claude models"),
        ("codex", "claude-sonnet-4-5", "only runs GPT models"),
        ("codex-native", "llama3", "only runs GPT models"),
        ("codex", "databricks-claude-opus-4-8", "only runs GPT models"),
    ],
)
async def test_a_model_of_the_wrong_family_is_refused_up_front(
    harness: str, model: str, rule: str
) -> None:
    async with omnigent.open_runtime() as rt:
        with pytest.raises(omnigent.SpecError, match=rule) as caught:
            await rt.create_agent(spec(harness, model))
        assert caught.value.details[0].loc == "executor.config.model"
        assert await rt.list_agents() == []


@pytest.mark.parametrize(
    ("harness", "good"),
    [
        ("claude-code", ["claude-opus-5-5", "sonnet", "OPUS", "us.anthropic.claude-haiku-4-5"]),
        ("claude-sdk", ["databricks-claude-sonnet-4-6", "anthropic/claude-opus-4-8"]),
        ("codex", ["gpt-5.5", "o3", "gpt-5-codex", "codex-mini-latest"]),
        # A gateway's spelling of a GPT id is a GPT id (the original's rewrite of gpt-5-4).
        ("codex-native", ["databricks-gpt-5-4", "openai/gpt-4o", "chatgpt-4o-latest"]),
        ("pi", ["gpt-5.5", "claude-sonnet-4-5", "meta-llama-3.3-70b-instruct"]),
    ],
)
async def test_models_of_the_family_are_accepted(harness: str, good: list[str]) -> None:
    registry = HarnessRegistry()
    for model in good:
        assert registry.model_problem(harness, model) is None, model
    assert registry.model_problem(harness, None) is None  # the CLI's default
    assert registry.model_problem("loop", "anything") is None


async def test_a_model_override_of_the_wrong_family_is_refused() -> None:
    async with omnigent.open_runtime() as rt:
        agent = await rt.create_agent(spec("claude"))
        with pytest.raises(omnigent.InvalidInput, match="only runs Claude models") as caught:
            await rt.create_session(agent.id, model_override="gpt-4o")
        assert caught.value.details[0].loc == "model_override"
        assert (await rt.list_sessions()).data == ()
        session = await rt.create_session(agent.id)
        with pytest.raises(omnigent.InvalidInput, match="only runs Claude models"):
            await rt.update_session(session.id, model_override="gpt-4o")
        assert (await rt.get_session(session.id)).model_override is None
        updated = await rt.update_session(session.id, model_override="claude-haiku-4-5")
        assert updated.model == "claude-haiku-4-5"


async def test_a_harness_override_checks_the_model_and_the_spec() -> None:
    async with omnigent.open_runtime() as rt:
        loop_agent = await rt.create_agent(
            {"name": "looper", "executor": {"config": {"harness": "loop", "model": "gpt-4o"}}}
        )
        with pytest.raises(omnigent.InvalidInput, match="only runs Claude models") as caught:
            await rt.create_session(loop_agent.id, harness_override="claude")
        assert caught.value.details[0].loc == "harness_override"
        ok = await rt.create_session(
            loop_agent.id, harness_override="claude", model_override="sonnet"
        )
        assert ok.harness == "claude-sdk" and ok.model == "sonnet"
        heated = await rt.create_agent(
            {"name": "heated", "executor": {"config": {"harness": "loop", "temperature": 0.3}}}
        )
        with pytest.raises(omnigent.InvalidInput, match="temperature"):
            await rt.create_session(heated.id, harness_override="codex")


@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ({"config": {"temperature": 0.2}}, "executor.config.temperature"),
        ({"config": {"script": [{"say": "x"}]}}, "executor.config.script"),
        ({"config": {"options": {"turbo": True}}}, "executor.config.options.turbo"),
        (
            {"config": {"options": {"startup_timeout": -1}}},
            "executor.config.options.startup_timeout",
        ),
        ({"config": {"env": {"LD_PRELOAD": "/x.so"}}}, "executor.config.env.LD_PRELOAD"),
        ({"config": {"env": {"CLAUDE_CONFIG_DIR": "/x"}}}, "executor.config.env.CLAUDE_CONFIG_DIR"),
    ],
)
async def test_claude_code_refuses_what_it_cannot_honour(extra: dict[str, Any], loc: str) -> None:
    async with omnigent.open_runtime() as rt:
        with pytest.raises(omnigent.SpecError) as caught:
            await rt.create_agent(spec("claude", **extra))
        assert loc in [d.loc for d in caught.value.details]


@pytest.mark.parametrize("harness", ["claude-sdk", "claude-native", "codex-native", "pi"])
async def test_omnigent_tools_are_honoured_for_a_native_harness(harness: str) -> None:
    """A native CLI gets omnigent's tools through the bridge: the spec keys that grant
    them are no longer refused."""
    granting = {
        "terminals": {"bash": {"command": "bash"}},
        "mcp_servers": [{"name": "fs", "url": "http://127.0.0.1:1/mcp"}],
        "async_enabled": True,
        "spawn": True,
        "sub_agents": [{"name": "helper", "executor": {"config": {"harness": "scripted"}}}],
        "tools": {"agents": ["helper"]},
    }
    async with omnigent.open_runtime() as rt:
        agent = await rt.create_agent(spec(harness, **granting))
        assert agent.harness == harness


async def test_what_the_native_harnesses_do_honour_is_accepted() -> None:
    async with omnigent.open_runtime() as rt:
        await rt.create_agent(
            spec(
                "claude",
                config={
                    "options": {"startup_timeout": 10},
                    "env": {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "1000", "HTTPS_PROXY": "http://p"},
                },
                policies=[{"name": "no", "type": "deny_tools", "tools": ["Bash"]}],
            )
        )
        await rt.create_agent(
            spec("codex", name="cx", config={"options": {"sandbox": "read-only"}})
        )
        with pytest.raises(omnigent.SpecError, match="must be one of"):
            await rt.create_agent(
                spec("codex", name="cy", config={"options": {"sandbox": "everything"}})
            )


def uninstall_both(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither wheel findable, nothing on ``PATH``: both CLIs are missing."""
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    monkeypatch.setenv("PATH", str(tmp_path))


async def test_a_missing_cli_fails_the_turn_naming_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    uninstall_both(monkeypatch, tmp_path)
    registry = HarnessRegistry()
    assert "pip install 'omnigent[claude]'" in (registry.unavailable("claude-sdk") or "")
    assert registry.unavailable("pi") == (
        "harness 'pi' needs the pi CLI, which is not installed: "
        "npm install -g @mariozechner/pi-coding-agent"
    )
    assert registry.unavailable("loop") is None
    with trio.fail_after(10):
        async with omnigent.open_runtime() as rt:
            for harness, canonical, extra in (
                ("claude", "claude-sdk", "pip install 'omnigent[claude]'"),
                ("codex", "codex", "pip install 'omnigent[codex]'"),
                ("pi", "pi", "npm install -g @mariozechner/pi-coding-agent"),
            ):
                agent = await rt.create_agent(spec(harness, name=f"n-{harness}"))
                session = await rt.create_session(agent.id)
                events = await run_turn(rt, session.id, "hi")
                assert statuses(events) == ["running", "failed"]
                failure = next(e for e in events if isinstance(e, ResponseFailed))
                assert failure.error.code == "harness_unavailable"
                assert failure.error.message.startswith(f"harness {canonical!r} needs")
                assert extra in failure.error.message
                assert rt.processes is not None and rt.processes.processes == []


def test_an_explicit_cli_path_that_is_not_executable_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OMNIGENT_CODEX_CLI", str(tmp_path / "no-codex"))
    missing = CODEX_CLI.missing("codex-native") or ""
    assert f"OMNIGENT_CODEX_CLI={tmp_path / 'no-codex'}" in missing


def test_the_missing_message_names_the_extra_and_the_npm_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = {"PATH": str(tmp_path)}
    uninstall_both(monkeypatch, tmp_path)
    assert CLAUDE_CLI.find(empty) is None
    assert CLAUDE_CLI.missing("claude-native", empty) == (
        "harness 'claude-native' needs the Claude Code CLI, which is not installed: "
        "pip install 'omnigent[claude]' (or npm install -g @anthropic-ai/claude-code)"
    )
    assert "pip install 'omnigent[codex]'" in (CODEX_CLI.missing("codex", empty) or "")
    assert "@openai/codex" in (CODEX_CLI.missing("codex", empty) or "")
    binary = tmp_path / "claude"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert CLAUDE_CLI.find(empty) == binary  # on PATH
    assert CLAUDE_CLI.missing("claude-sdk", empty) is None


def test_the_model_endpoint_prefers_the_spec_then_the_environment() -> None:
    env = {"ANTHROPIC_BASE_URL": "http://env", "ANTHROPIC_API_KEY": "env-key"}
    names = {"base_url_variable": "ANTHROPIC_BASE_URL", "api_key_variable": "ANTHROPIC_API_KEY"}
    endpoint = model_endpoint(None, None, environ=env, **names)
    assert (endpoint.base_url, endpoint.api_key) == ("http://env", "env-key")
    endpoint = model_endpoint("http://spec", "spec-key", environ=env, **names)
    assert (endpoint.base_url, endpoint.api_key) == ("http://spec", "spec-key")
    endpoint = model_endpoint(None, None, environ={}, **names)
    assert (endpoint.base_url, endpoint.api_key) == (None, None)
    assert "env-key" not in repr(endpoint)


def test_the_provider_configuration_comes_after_the_spec_and_the_environment() -> None:
    names = {"base_url_variable": "ANTHROPIC_BASE_URL", "api_key_variable": "ANTHROPIC_API_KEY"}
    gateway = Provider("gw", "gateway", base_url="http://gw", api_key_env="GW_KEY")
    env = {"GW_KEY": "gw-key", "ANTHROPIC_API_KEY": "env-key"}
    # Neither the spec nor the environment names an endpoint: the provider's, its key.
    endpoint = model_endpoint(None, None, provider=gateway, environ=env, **names)
    assert (endpoint.base_url, endpoint.api_key) == ("http://gw", "gw-key")
    # The environment's endpoint wins, with the environment's key.
    env_url = {**env, "ANTHROPIC_BASE_URL": "http://env"}
    endpoint = model_endpoint(None, None, provider=gateway, environ=env_url, **names)
    assert (endpoint.base_url, endpoint.api_key) == ("http://env", "env-key")
    # The spec's own endpoint gets the spec's key only, never the provider's.
    endpoint = model_endpoint("http://spec", None, provider=gateway, environ=env, **names)
    assert (endpoint.base_url, endpoint.api_key) == ("http://spec", None)
    # A provider without a key variable: the environment's key stays with its own
    # endpoint and is not sent to the gateway.
    keyless = Provider("gw", "gateway", base_url="http://gw")
    endpoint = model_endpoint(None, None, provider=keyless, environ=env, **names)
    assert (endpoint.base_url, endpoint.api_key) == ("http://gw", None)
    # A vendor key provider: the vendor's default endpoint, with the provider's key.
    vendor = Provider("a", "key", "anthropic", api_key_env="GW_KEY")
    endpoint = model_endpoint(
        None,
        None,
        provider=vendor,
        environ={"GW_KEY": "k"},
        default_base_url="http://vendor",
        **names,
    )
    assert (endpoint.base_url, endpoint.api_key) == ("http://vendor", "k")
    # A subscription (the CLI's own login) changes nothing.
    login = Provider("s", "subscription", "anthropic")
    endpoint = model_endpoint(None, None, provider=login, environ=env, **names)
    assert (endpoint.base_url, endpoint.api_key) == (None, "env-key")


async def test_harness_state_is_kept_per_harness_and_deleted_with_the_session(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'o.db'}"
    async with omnigent.open_runtime(db) as rt:
        agent = await rt.create_agent(spec("claude"))
        session = await rt.create_session(agent.id)
    from omnigent.core.session._harness_state import StoredHarnessState
    from omnigent.stores import open_store

    async with open_store(db) as store:
        state = StoredHarnessState(store, session.id, "claude-code")
        await state.set("session_id", "abc")
        other = StoredHarnessState(store, session.id, "codex")
        assert await other.get("session_id") is None
        with pytest.raises(omnigent.InvalidInput):
            await state.set("", "x")
        with pytest.raises(omnigent.InvalidInput):
            await state.set("k", "x" * 5000)
    async with open_store(db) as store:
        again = StoredHarnessState(store, session.id, "claude-code")
        assert await again.get("session_id") == "abc"  # it survives a reopen
        await again.set("session_id", None)
        assert await StoredHarnessState(store, session.id, "claude-code").get("session_id") is None
        await again.set("session_id", "def")
        await store.delete_sessions([session.id])
        assert await store.get_harness_state(session.id, "claude-code") == {}
        await store.put_harness_state(session.id, "claude-code", "k", "v")  # gone: not kept
        assert await store.get_harness_state(session.id, "claude-code") == {}


@pytest.mark.parametrize(
    ("harness", "key", "value"),
    [
        ("loop", "command", ["python", "h.py"]),
        ("loop", "script", [{"say": "hi"}]),
        ("scripted", "command", ["python", "h.py"]),
    ],
)
def test_a_key_the_harness_would_ignore_is_refused(harness: str, key: str, value: Any) -> None:
    """Regression: ``executor.config.command`` on a non-external harness was ignored."""
    spec = AgentSpec.from_dict(
        {"name": "x", "executor": {"type": "omnigent", "config": {"harness": harness, key: value}}}
    )
    problems = HarnessRegistry().spec_problems(harness, spec)
    assert [p.loc for p in problems] == [f"executor.config.{key}"]
