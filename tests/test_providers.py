"""The provider configuration and the model-id rules (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from omnigent.errors import ConfigError
from omnigent.providers import (
    Provider,
    ProviderConfig,
    Worker,
    canonical_spelling,
    check_model_id,
    family_of,
    list_models,
    load_provider_config,
    localise_model,
    parse_provider_config,
)
from omnigent.spec import load_yaml

GATEWAY = Provider("gw", "gateway", model_prefix="databricks-")
KEY = Provider("anthropic", "key", family="anthropic")
LOGIN = Provider("codex", "subscription", family="openai")


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        ("claude-sonnet-4-6", "claude-sonnet-4-6"),
        ("  gpt-4.1-mini\n", "gpt-4.1-mini"),
        ("openai/gpt-4o", "openai/gpt-4o"),
        ("us.anthropic.claude-3-5:0", "us.anthropic.claude-3-5:0"),
        ("llama3@q4", "llama3@q4"),
    ],
)
def test_clean_model_ids_pass(value: str, expect: str) -> None:
    assert check_model_id(value) == expect


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (None, "must be a string, got null"),
        (7, "must be a string, got a number"),
        (True, "must be a string, got a boolean"),
        (["gpt"], "must be a string, got an array"),
        ("", "must not be blank"),
        ("   ", "must not be blank"),
        ("gpt 4", "is not a model id"),
        ("gpt;rm -rf /", "is not a model id"),
        ("$(id)", "is not a model id"),
        ("`id`", "is not a model id"),
        ("a|b", "is not a model id"),
        ("--model", "is not a model id"),
        ("-x", "is not a model id"),
        ("claude[1m]", "is not a model id"),
        ("a" * 201, "longer than 200"),
    ],
)
def test_unclean_model_ids_are_refused(value: Any, says: str) -> None:
    with pytest.raises(ValueError, match=r".*") as caught:
        check_model_id(value)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-6", "claude"),
        ("databricks-claude-opus-4-8", "claude"),
        ("gpt-5", "openai"),
        ("gpt-5.1-codex", "openai"),
        ("codex-mini", "openai"),
        ("llama3", "other"),
    ],
)
def test_families_by_token(model: str, family: str) -> None:
    assert family_of(model) == family


@pytest.mark.parametrize(
    ("model", "provider", "expect"),
    [
        # A canonical id is localised for a gateway...
        ("claude-sonnet-4-6", GATEWAY, "databricks-claude-sonnet-4-6"),
        ("gpt-5-4", GATEWAY, "databricks-gpt-5-4"),
        # ... an already-local one, a vendor-prefixed one or one of no family is not.
        ("databricks-claude-sonnet-4-6", GATEWAY, "databricks-claude-sonnet-4-6"),
        ("anthropic/claude-sonnet-4-6", GATEWAY, "anthropic/claude-sonnet-4-6"),
        ("us.anthropic.claude-sonnet-4-6", GATEWAY, "us.anthropic.claude-sonnet-4-6"),
        ("llama3", GATEWAY, "llama3"),
        ("Claude-Sonnet", GATEWAY, "Claude-Sonnet"),
        # A gateway id is stripped for a vendor-direct provider (key or login).
        ("databricks-claude-sonnet-4-6", KEY, "claude-sonnet-4-6"),
        ("databricks-gpt-5-4", LOGIN, "gpt-5-4"),
        ("claude-sonnet-4-6", KEY, "claude-sonnet-4-6"),
        ("databricks-llama3", KEY, "databricks-llama3"),
        # No provider: untouched.
        ("claude-sonnet-4-6", None, "claude-sonnet-4-6"),
        ("databricks-claude-sonnet-4-6", None, "databricks-claude-sonnet-4-6"),
    ],
)
def test_localisation(model: str, provider: Provider | None, expect: str) -> None:
    assert localise_model(model, provider) == expect


def test_a_gateway_without_a_prefix_leaves_ids_alone_and_configured_prefixes_are_stripped() -> None:
    plain = Provider("plain", "gateway")
    assert localise_model("claude-sonnet-4-6", plain) == "claude-sonnet-4-6"
    assert localise_model("corp-gpt-5", KEY, ("corp-",)) == "gpt-5"
    assert canonical_spelling("corp-gpt-5") == "corp-gpt-5"


def test_parsing_a_configuration() -> None:
    config = parse_provider_config(
        {
            "default_provider": "gw",
            "providers": [
                {
                    "name": "gw",
                    "kind": "gateway",
                    "base_url": "https://gw.example/v1/",
                    "model_prefix": "databricks-",
                    "models": ["databricks-gpt-5-4"],
                },
                {
                    "name": "anthropic",
                    "kind": "key",
                    "family": "anthropic",
                    "harnesses": ["claude-code"],
                },
            ],
            "other_section": {"left": "to its own reader"},
        }
    )
    assert config.default == "gw" and config.gateway_prefixes == ("databricks-",)
    assert config.for_worker("claude-code") is config.named("anthropic")
    assert config.for_worker("loop", "https://gw.example/v1") is config.named("gw")
    assert config.for_worker("loop") is config.named("gw")  # the default
    assert ProviderConfig().for_worker("loop") is None
    assert parse_provider_config(None).providers == ()


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ([], "$"),
        ({"providers": {"name": "x"}}, "providers.name"),  # the mapping form: x is no mapping
        ({"providers": [{"name": "x", "kind": "vendor"}]}, "providers[0].kind"),
        ({"providers": [{"name": "x", "kind": "key"}]}, "providers[0].family"),
        (
            {"providers": [{"name": "x", "kind": "gateway", "family": "openai"}]},
            "providers[0].family",
        ),
        (
            {"providers": [{"name": "x", "kind": "key", "family": "openai", "model_prefix": "p-"}]},
            "providers[0].model_prefix",
        ),
        (
            {"providers": [{"name": "x", "kind": "gateway", "api_key": "sk"}]},
            "providers[0].api_key",
        ),
        ({"providers": [{"name": "x", "kind": "gateway", "models": "gpt"}]}, "providers[0].models"),
        (
            {"providers": [{"name": "x", "kind": "gateway"}, {"name": "x", "kind": "gateway"}]},
            "providers[1].name",
        ),
        ({"providers": [{"name": " ", "kind": "gateway"}]}, "providers[0].name"),
        ({"default_provider": "missing"}, "default_provider"),
        (
            {"providers": [{"name": "g", "kind": "gateway", "api_key_env": "A KEY"}]},
            "providers[0].api_key_env",
        ),
        (
            {
                "providers": [
                    {
                        "name": "s",
                        "kind": "subscription",
                        "family": "openai",
                        "base_url": "http://x",
                    }
                ]
            },
            "providers[0].kind",
        ),
    ],
)
def test_bad_configurations_name_the_field(data: Any, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_provider_config(data)
    assert where in [d.loc for d in caught.value.details], caught.value.details


def test_the_provider_serving_a_harness_lists_it_or_is_a_catch_all_default() -> None:
    loop_gateway = Provider("gw", "gateway", base_url="http://gw", harnesses=("loop",))
    claude = Provider(
        "anthropic", "key", "anthropic", api_key_env="MY_KEY", harnesses=("claude-code",)
    )
    config = ProviderConfig((loop_gateway, claude), default="gw")
    assert config.serving("loop") == loop_gateway
    assert config.serving("claude-code") == claude
    # The default names other harnesses only: it is no endpoint for codex.
    assert config.serving("codex") is None
    catch_all = Provider("any", "gateway", base_url="http://any")
    assert ProviderConfig((loop_gateway, catch_all), default="any").serving("codex") == catch_all
    assert ProviderConfig().serving("loop") is None


def test_loading_the_file(tmp_path: Path) -> None:
    assert load_provider_config(tmp_path).providers == ()
    (tmp_path / "config.yaml").write_text(
        "providers:\n  - {name: a, kind: subscription, family: openai}\n"
    )
    assert load_provider_config(tmp_path).named("a") == Provider("a", "subscription", "openai")
    (tmp_path / "config.yaml").write_text("providers: [unclosed\n")
    with pytest.raises(ConfigError, match=r"invalid .*config\.yaml at line"):
        load_provider_config(tmp_path)
    (tmp_path / "config.yaml").write_text("a: &x [1]\nb: [*x, *x]\n" + "[" * 100 + "]" * 100)
    with pytest.raises(ConfigError):
        load_provider_config(tmp_path)
    (tmp_path / "config.yaml").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError):
        load_provider_config(tmp_path)
    (tmp_path / "config.yaml").write_text("#" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="larger than"):
        load_provider_config(tmp_path)


ORIGINAL_FORM = """
providers:
  workspace:
    kind: databricks
    profile: DEFAULT
    default: true
  anthropic:
    kind: key
    anthropic:
      base_url: https://api.anthropic.com
      api_key: $ANTHROPIC_API_KEY
      models: {sonnet: claude-sonnet-4-6}
  claude-login:
    kind: subscription
    cli: claude
  router:
    kind: gateway
    anthropic: {base_url: https://openrouter.ai/api, api_key_ref: "env:ROUTER_KEY"}
    openai: {base_url: https://openrouter.ai/api/v1, api_key: "${ROUTER_KEY}"}
  ollama:
    kind: local
    openai: {base_url: "http://127.0.0.1:11434/v1"}
"""


def test_the_originals_mapping_form_under_omnigent_config_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, config_home = tmp_path / "home", tmp_path / "config"
    home.mkdir()
    config_home.mkdir()
    (config_home / "config.yaml").write_text(ORIGINAL_FORM)
    (tmp_path / "databrickscfg").write_text(
        "[DEFAULT]\nhost = https://dbc-1.cloud.databricks.com/\ntoken = dapi-secret\n"
    )
    monkeypatch.setenv("OMNIGENT_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "databrickscfg"))
    config = load_provider_config(home)  # $OMNIGENT_CONFIG_HOME wins over the home
    assert config.source == str(config_home / "config.yaml")
    assert config.default == "workspace"
    assert config.providers == (
        Provider(
            "workspace",
            "gateway",
            base_url="https://dbc-1.cloud.databricks.com/serving-endpoints",
            model_prefix="databricks-",
            api_key_env="DATABRICKS_TOKEN",
        ),
        Provider(
            "anthropic",
            "key",
            "anthropic",
            base_url="https://api.anthropic.com",
            models=("claude-sonnet-4-6",),
            api_key_env="ANTHROPIC_API_KEY",
        ),
        Provider(
            "claude-login",
            "subscription",
            "anthropic",
            harnesses=("claude-sdk", "claude-native", "claude-code"),
        ),
        Provider(
            "router.anthropic",
            "gateway",
            base_url="https://openrouter.ai/api",
            api_key_env="ROUTER_KEY",
        ),
        Provider(
            "router.openai",
            "gateway",
            base_url="https://openrouter.ai/api/v1",
            api_key_env="ROUTER_KEY",
        ),
        Provider("ollama", "gateway", base_url="http://127.0.0.1:11434/v1"),
    )
    # A canonical id is spelled for the workspace's serving endpoints.
    assert localise_model("claude-sonnet-4-6", config.named("workspace"), ()) == (
        "databricks-claude-sonnet-4-6"
    )
    monkeypatch.delenv("OMNIGENT_CONFIG_HOME")
    assert load_provider_config(home).providers == ()  # back to $OMNIGENT_HOME's (none)


@pytest.mark.parametrize(
    ("entry", "loc"),
    [
        ("{kind: bedrock}", "providers.x.kind"),
        ("{kind: cli-config, cli: codex}", "providers.x.kind"),
        (
            "{kind: key, anthropic: {base_url: u, api_key: sk-inline}}",
            "providers.x.anthropic.api_key",
        ),
        (
            "{kind: key, openai: {base_url: u, api_key_ref: 'keychain:k'}}",
            "providers.x.openai.api_key_ref",
        ),
        (
            "{kind: key, openai: {base_url: u, auth_command: 'get-token'}}",
            "providers.x.openai.auth_command",
        ),
        ("{kind: subscription, cli: gemini}", "providers.x.cli"),
        ("{kind: databricks}", "providers.x.profile"),
        ("{kind: key}", "providers.x"),
    ],
)
def test_what_the_mapping_form_cannot_honour_is_refused(entry: str, loc: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_provider_config(load_yaml(f"providers: {{x: {entry}}}"))
    assert [d.loc for d in caught.value.details] == [loc]


def test_the_catalog() -> None:
    config = ProviderConfig(
        (
            Provider(
                "gw",
                "gateway",
                model_prefix="databricks-",
                models=("databricks-claude-x", "databricks-gpt-y"),
            ),
            Provider("empty", "key", family="openai", harnesses=("gptish",)),
        ),
        default="gw",
    )

    def only(word: str) -> Any:
        return lambda model: None if word in model else f"only runs {word} models"

    workers = [
        Worker("self", "loop"),
        Worker("claude", "claudeish", guard=only("claude")),
        Worker("gpt", "gptish", model="gpt-z", guard=only("gpt")),
        Worker("nothing", "gptish", guard=only("gpt")),
        Worker("named", "gptish", model="gpt-z", guard=only("gpt"), examples=("gpt-a", "gpt-z")),
        Worker("script", "scripted", accepts_model=False),
        Worker("gone", "native", unavailable="the 'native' CLI is not on PATH"),
    ]
    rows = list_models(config, workers)
    assert list(rows) == ["self", "claude", "gpt", "nothing", "named", "script", "gone"]
    assert {tuple(row) for row in rows.values()} == {("source", "verified", "models", "note")}
    assert rows["self"] == {
        "source": "static",
        "verified": False,
        "models": [
            {"id": "databricks-claude-x", "family": "claude"},
            {"id": "databricks-gpt-y", "family": "openai"},
        ],
        "note": "from provider 'gw' in the configuration",
    }
    assert rows["claude"]["models"] == [{"id": "databricks-claude-x", "family": "claude"}]
    assert "only the models harness 'claudeish' runs" in rows["claude"]["note"]
    assert rows["gpt"] == {
        "source": "static",
        "verified": False,
        "models": [{"id": "gpt-z", "family": "openai"}],
        "note": "only the spec's own model: provider 'empty' lists no models",
    }
    assert rows["nothing"]["source"] == "none" and rows["nothing"]["models"] == []
    assert rows["named"]["source"] == "static"
    assert [m["id"] for m in rows["named"]["models"]] == ["gpt-z", "gpt-a"]
    assert rows["script"]["source"] == "none" and "cannot apply" in rows["script"]["note"]
    assert rows["gone"] == {
        "source": "none",
        "verified": False,
        "models": [],
        "note": "the 'native' CLI is not on PATH",
    }
    assert list(list_models(config, workers, only=["gpt"])) == ["gpt"]
    cut = list_models(config, workers, model_ids=["databricks-gpt-y"])
    assert [m["id"] for m in cut["self"]["models"]] == ["databricks-gpt-y"]
