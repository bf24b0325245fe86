"""The web console behind ``--auth header``: each user sees only their own sessions.

The identity header is what a proxy in front would set; here each browser context sets
it on every request it makes (the page, its API calls and its event streams).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .console_helpers import LAPTOP, api, running_browser, running_server, watched
from .test_console import conversation, say, start_session

pytestmark = pytest.mark.timeout(60)

ALICE = {"X-Forwarded-Email": "alice@example.com"}
BOB = {"X-Forwarded-Email": "bob@example.com"}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("console-auth"), "--auth", "header") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with running_browser() as found:
        yield found


def test_each_user_sees_only_their_sessions(browser: Any, base: str) -> None:
    with (
        watched(browser, base, viewport=LAPTOP, extra_http_headers=ALICE) as alice,
        watched(browser, base, viewport=LAPTOP, extra_http_headers=BOB) as bob,
    ):
        alice_page = alice.page("/")
        hers = start_session(alice_page, "greeter")
        say(alice_page, "for alice only")
        conversation(alice_page).get_by_text("Hello from the greeter").wait_for()
        bob_page = bob.page("/")
        his = start_session(bob_page, "asker")
        bob_page.get_by_role("link", name="Sessions", exact=True).click()
        bob_page.locator(f'[data-session="{his}"]').wait_for()
        alice_page.get_by_role("link", name="Sessions", exact=True).click()
        alice_page.locator(f'[data-session="{hers}"]').wait_for()
        assert bob_page.locator(f'[data-session="{hers}"]').count() == 0
        assert alice_page.locator(f'[data-session="{his}"]').count() == 0
        # Sharing is the API's: once alice grants bob read, his feed shows hers, live.
        grant = {"user_id": "bob@example.com", "level": 1}
        api(base, "PUT", f"/sessions/{hers}/permissions", json=grant, headers=ALICE)
        bob_page.locator(f'[data-session="{hers}"]').wait_for()
        # A session bob may not read is "not found" to him, as the API says.
        bob_page.goto(f"/#/s/{his}")
        conversation(bob_page).wait_for()
        alice.problems.clear()
        alice_page.goto(f"/#/s/{his}")
        alice_page.get_by_role("heading", name="Session not found").wait_for()
        # The 404 a browser logs for that refused read is the expected one, no other.
        assert all("404" in problem for problem in alice.problems), alice.problems
        alice.problems.clear()
