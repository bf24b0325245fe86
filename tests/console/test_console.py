"""The web console in a real headless Chromium against a real ``omnigent serve``.

Driven by role and accessible name, as the contract in docs/console.md names them
("Message", "Send", "Interrupt", "Stop", "New session", "Agent", "Approve", "Deny").
One server and one browser for the module; every context checks that no request left
127.0.0.1 and that the page logged no error (:class:`~.console_helpers.Watched`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .console_helpers import LAPTOP, api, running_browser, running_server, watched

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("console")) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with running_browser() as found:
        yield found


def start_session(page: Any, agent: str) -> str:
    """Pick ``agent`` and press New session; the id of the session it opens."""
    before = page.url
    page.get_by_role("combobox", name="Agent", exact=True).select_option(label=agent)
    page.get_by_role("button", name="New session").click()
    page.wait_for_url(lambda url: url != before and re.search(r"#/s/conv_", url) is not None)
    session_id = str(page.url.rsplit("/", 1)[1])
    page.locator(f'main[data-session="{session_id}"]').wait_for()  # the new view is up
    return session_id


def say(page: Any, text: str) -> None:
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")  # Enter sends


def conversation(page: Any) -> Any:
    return page.get_by_role("log", name="Conversation")


def test_a_new_session_streams_its_answer_without_a_reload(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        session_id = start_session(page, "greeter")
        say(page, "hello there")
        log = conversation(page)
        log.get_by_text("hello there").wait_for()
        log.get_by_text("Hello from the greeter, streamed word by word.").wait_for()
        page.get_by_text("idle", exact=True).first.wait_for()
        # The Sessions view lists it (from the feed), and the answer stayed in place.
        page.get_by_role("link", name="Sessions", exact=True).click()
        row = page.locator(f'[data-session="{session_id}"]')
        row.get_by_text("greeter", exact=True).wait_for()
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def test_approve_runs_the_tool_and_deny_does_not(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        start_session(page, "asker")
        say(page, "run it")
        page.get_by_role("button", name="Approve").click()
        log = conversation(page)
        log.get_by_text("The shell step is over.").wait_for()
        tool = log.locator("details.tool").first
        tool.locator("summary").click()
        tool.get_by_text("tool-ran-42").wait_for()  # the command ran: $((6*7)) expanded

        page.goto("/")
        start_session(page, "asker")
        say(page, "do not run it")
        page.get_by_role("button", name="Deny").click()
        log.get_by_text("The shell step is over.").wait_for()
        tool = log.locator("details.tool").first
        tool.locator("summary").click()
        tool.get_by_text(re.compile("Error: denied by policy")).wait_for()
        assert "tool-ran-42" not in tool.inner_text()
        # Escape closes the open detail.
        tool.locator("summary").focus()
        page.keyboard.press("Escape")
        assert tool.get_attribute("open") is None


def test_a_child_is_nested_under_its_parent_and_its_status_changes_live(
    browser: Any, base: str
) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        parent_id = start_session(page, "parent")
        say(page, "delegate")
        conversation(page).get_by_text("Dispatched the chore.").wait_for()
        side = page.get_by_role("complementary")
        side.get_by_role("link", name="kid:chore").wait_for()
        page.get_by_role("link", name="Sessions", exact=True).click()
        parent_row = page.locator(f'[data-session="{parent_id}"]')
        child = parent_row.locator("ul.tree li.tree-item").first
        child.get_by_text("kid:chore").wait_for()
        child.locator(".badge.status-running").wait_for()
        child.locator(".badge.status-idle").wait_for(timeout=15_000)  # no reload


def test_a_reload_restores_the_conversation_from_replay(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        start_session(page, "failer")
        say(page, "first")
        log = conversation(page)
        log.get_by_role("alert").get_by_text("harness_error").wait_for()
        before = log.inner_text()
        page.reload()
        log.get_by_role("alert").get_by_text("harness_error").wait_for()
        log.get_by_text("first").wait_for()
        assert log.inner_text() == before
        assert "the scripted step failed on purpose" in before
        assert before.index("first") < before.index("About to fail.")


def test_interrupt_and_stop_end_a_running_turn(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        start_session(page, "sleeper")
        say(page, "take your time")
        page.get_by_role("button", name="Interrupt").click()
        conversation(page).get_by_text("Turn cancelled").wait_for()
        page.get_by_role("button", name="Interrupt").wait_for(state="detached")
        say(page, "again")
        page.get_by_role("button", name="Stop").click()
        conversation(page).get_by_text("Turn cancelled").nth(1).wait_for()
        page.get_by_role("button", name="Stop").wait_for(state="detached")


def test_two_pages_update_together_and_an_answer_leaves_both(browser: Any, base: str) -> None:
    with (
        watched(browser, base, viewport=LAPTOP) as one,
        watched(browser, base, viewport=LAPTOP) as other,
    ):
        first = one.page("/")
        session_id = start_session(first, "asker")
        second = other.page(f"/#/s/{session_id}")
        conversation(second).wait_for()
        approvals = other.page("/#/approvals")
        say(first, "from the first page")
        # The other page hears of the message (a turn started) and of the approval.
        conversation(second).get_by_text("from the first page").wait_for()
        second.get_by_role("button", name="Approve").wait_for()
        approvals.get_by_role("button", name="Approve").wait_for()
        first.get_by_role("button", name="Approve").click()
        conversation(second).get_by_text("The shell step is over.").wait_for()
        second.get_by_role("button", name="Approve").wait_for(state="detached")
        approvals.get_by_text("Nothing is waiting for an answer.").wait_for()
        assert api(base, "GET", f"/sessions/{session_id}")["pending_elicitations"] == []


def test_the_sessions_view_filters_by_status_and_agent(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        start_session(page, "sleeper")
        say(page, "hold on")
        page.get_by_role("button", name="Interrupt").wait_for()
        page.get_by_role("link", name="Sessions", exact=True).click()
        page.get_by_role("combobox", name="Status filter").select_option("active")
        rows = page.locator("ul.tree.root > li")
        rows.first.wait_for()
        assert all("sleeper" in text for text in rows.all_inner_texts())
        page.get_by_role("combobox", name="Status filter").select_option("")
        page.get_by_role("combobox", name="Agent filter").select_option("greeter")
        rows.first.wait_for()
        assert all("greeter" in text for text in rows.all_inner_texts())


def test_the_agents_view_shows_each_spec_read_only(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/#/agents")
        page.get_by_role("main").get_by_text("asker", exact=True).click()
        spec = page.get_by_label("Spec of asker")
        spec.get_by_text('"ask_shell"').wait_for()
        assert page.get_by_role("combobox", name="Version of asker").input_value() == "1"


def test_a_five_thousand_event_session_renders_and_follows(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        session_id = start_session(page, "bulk")
        say(page, "go long")
        log = conversation(page)
        log.get_by_text(re.compile("w108x44$")).wait_for(timeout=30_000)
        events = api(base, "GET", f"/sessions/{session_id}")["last_event_id"]
        assert events >= 5000
        page.reload()  # the whole log replayed
        log.get_by_text(re.compile("w108x44$")).wait_for(timeout=30_000)
        assert log.locator("article.assistant").count() == 109  # each answer once
        say(page, "and then?")
        log.get_by_text("Following the stream after five thousand events.").wait_for()


def test_the_first_load_is_small_and_strict(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        page.get_by_role("button", name="New session").wait_for()
        total = page.evaluate(
            """() => [...performance.getEntriesByType('navigation'),
                      ...performance.getEntriesByType('resource')]
                     .reduce((sum, entry) => sum + entry.transferSize, 0)"""
        )
        assert 0 < total <= 300 * 1024
        response = page.request.get("/")
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe" not in policy
        # No inline script: the policy would block it, and the page has none.
        assert page.locator("script:not([src])").count() == 0


def test_each_view_reads_well_on_a_laptop_and_a_phone(
    browser: Any, base: str, tmp_path: Path
) -> None:
    """Screenshots of every view at 1280x800 and 390x844 (docs/console.md embeds them)."""
    import os

    folder = Path(os.environ.get("OMNIGENT_CONSOLE_SHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        start_session(page, "parent")
        say(page, "delegate the chore")
        conversation(page).get_by_text("Dispatched the chore.").wait_for()
        asking = start_session(page, "asker")
        say(page, "list the files")
        page.get_by_role("button", name="Approve").wait_for()
        views = {
            "sessions": "/#/",
            "session": f"/#/s/{asking}",
            "approvals": "/#/approvals",
            "agents": "/#/agents",
        }
        for size_name, size in (("laptop", LAPTOP), ("phone", {"width": 390, "height": 844})):
            page.set_viewport_size(size)
            for name, path in views.items():
                page.goto(path)
                page.get_by_role("main").wait_for()
                if name == "agents":
                    page.get_by_role("main").get_by_text("asker", exact=True).click()
                    page.get_by_label("Spec of asker").get_by_text('"ask_shell"').wait_for()
                elif name == "sessions":
                    page.locator("ul.tree.root > li").first.wait_for()
                else:
                    page.get_by_role("button", name="Approve").wait_for()
                page.screenshot(path=str(folder / f"{name}-{size_name}.png"))
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= size["width"], (name, size_name, width)
        page.goto("/#/approvals")
        page.get_by_role("button", name="Approve").click()
        page.get_by_text("Nothing is waiting for an answer.").wait_for()


def test_a_form_elicitation_is_answered_with_its_fields(browser: Any, base: str) -> None:
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        session_id = start_session(page, "greeter")
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Your name"},
                "age": {"type": "integer", "title": "Age"},
            },
            "required": ["name"],
        }
        body = {
            "type": "mcp_elicitation",
            "data": {"message": "Who are you?", "requestedSchema": schema},
        }
        asked = api(base, "POST", f"/sessions/{session_id}/events", json=body)
        page.get_by_role("link", name="Approvals").click()
        card = page.get_by_role("region", name="Question: Who are you?")
        card.get_by_role("textbox", name="Your name").fill("Ada")
        card.get_by_role("spinbutton", name="Age").fill("36")
        card.get_by_role("button", name="Approve").click()
        page.get_by_text("Nothing is waiting for an answer.").wait_for()
        with httpx.stream(
            "GET", f"{base}/v1/sessions/{session_id}/stream?after=0", timeout=10
        ) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: ") and "elicitation_resolved" in line:
                    resolved = json.loads(line[6:])
                    break
        assert resolved["elicitation_id"] == asked["elicitation_id"]
        assert resolved["action"] == "accept"
        assert resolved["content"] == {"name": "Ada", "age": 36}


def test_a_page_that_was_offline_catches_up_with_each_message_once(browser: Any, base: str) -> None:
    """While the browser is offline a message arrives (from a program); back online,
    the page shows it and its answer, each once (the history read the turn's start
    asked for is made again; a stream that was cut resumes with Last-Event-ID)."""
    with watched(browser, base, viewport=LAPTOP) as context:
        page = context.page("/")
        session_id = start_session(page, "greeter")
        say(page, "one")
        log = conversation(page)
        answer = "Hello from the greeter, streamed word by word."
        log.get_by_text(answer).wait_for()
        context.context.set_offline(True)
        text = {"type": "message", "data": {"content": [{"type": "input_text", "text": "two"}]}}
        api(base, "POST", f"/sessions/{session_id}/events", json=text)
        log.get_by_text(answer).nth(1).wait_for()
        context.context.set_offline(False)
        log.get_by_text("two", exact=True).wait_for()
        assert log.get_by_text(answer).count() == 2
        assert log.get_by_text("one", exact=True).count() == 1
        text = log.inner_text()
        assert text.index("one") < text.index("two") < text.rindex(answer)
        # What the browser reports for requests made while offline; nothing else.
        assert all("ERR_INTERNET_DISCONNECTED" in p for p in context.problems), context.problems
        context.problems.clear()
