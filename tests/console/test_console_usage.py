"""The console's Usage panel: what the snapshot's ``usage`` and ``tree_usage`` hold,
live, for a ``loop`` agent on a real ``omnigent mock-llm`` (which reports usage: one
token per 4 characters, :func:`omnigent.testing.mock_tokens`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from .console_helpers import api, running_browser, running_mock_llm, running_server, watched
from .test_console import say, start_session

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("console-usage")
    (tmp / "home").mkdir()
    (tmp / "home" / "config.yaml").write_text(
        "prices:\n  mock-model: {input_per_mtok: 1.5, output_per_mtok: 4}\n"
    )
    with running_mock_llm() as llm:
        config = {"harness": "loop", "model": "mock-model", "base_url": llm, "api_key": "k"}
        counter = {"name": "counter", "executor": {"type": "omnigent", "config": config}}
        with running_server(tmp, extra_agents=[counter]) as url:
            yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with running_browser() as found:
        yield found


def test_the_usage_panel_shows_the_snapshots_usage_live(browser: Any, base: str) -> None:
    with watched(browser, base) as context:
        page = context.page("/")
        session_id = start_session(page, "counter")
        panel = page.get_by_role("region", name="Usage")
        assert panel.count() == 0  # nothing used yet
        say(page, "count these words for me")
        page.get_by_text("You said: count these words for me").wait_for()
        own = panel.get_by_label("This session")
        own.locator('[data-usage="model_calls"]').filter(has_text=re.compile("^1$")).wait_for()
        usage = api(base, "GET", f"/sessions/{session_id}")["usage"]
        assert usage["model_calls"] == 1 and usage["input_tokens"] > 0

        def shown(name: str) -> str:
            return str(own.locator(f'[data-usage="{name}"]').inner_text())

        assert shown("input_tokens") == f"{usage['input_tokens']:,}"
        assert shown("output_tokens") == f"{usage['output_tokens']:,}"
        assert shown("context_tokens") == f"{usage['context_tokens']:,}"
        assert shown("cost_usd") == f"${usage['cost_usd']:.6f}"
        say(page, "again")
        own.locator('[data-usage="model_calls"]').filter(has_text=re.compile("^2$")).wait_for()
        assert panel.get_by_label("With sub-sessions").count() == 0
