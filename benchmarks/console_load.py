"""The web console's two numbers: first-load bytes, and main-thread blocking on a
5,000-event session (followed live, then replayed on a reload).

    python benchmarks/console_load.py            # needs Debian's chromium + playwright

A real ``omnigent serve`` (scripted agents, SQLite) and a real headless Chromium, as in
``tests/console/``. The first load is what the browser's Resource Timing reports
(``transferSize``: compressed bytes on the wire, headers included) for the page and
everything it loads. Blocking is the DevTools Long Tasks API (``PerformanceObserver``
on ``longtask``: every main-thread task over 50 ms, with its duration): the page is
opened on a new session of the ``bulk`` agent, a message starts its ~5,000-event turn,
the page follows it to its last word; then the page is reloaded and replays the whole
log. Each phase reports its longest task. Baseline in the same run: the same page on
an empty session (what loading the app itself costs).
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.console.console_helpers import (
    LAPTOP,
    api,
    running_browser,
    running_server,
)

OBSERVE = """
window.__longtasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longtasks.push(entry.duration);
}).observe({ type: "longtask", buffered: true });
"""
LAST_WORD = re.compile("w108x44$")


def longest(page: object) -> tuple[float, int]:
    tasks = page.evaluate("window.__longtasks.splice(0)")  # type: ignore[attr-defined]
    return (max(tasks) if tasks else 0.0), len(tasks)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as base:
        agents = {a["name"]: a["id"] for a in api(base, "GET", "/agents")["data"]}
        with running_browser() as browser:
            context = browser.new_context(base_url=base, viewport=LAPTOP)
            context.set_default_timeout(60_000)
            context.add_init_script(OBSERVE)
            page = context.new_page()

            empty = api(base, "POST", "/sessions", json={"agent_id": agents["greeter"]})["id"]
            page.goto(f"/#/s/{empty}")
            page.get_by_role("textbox", name="Message").wait_for()
            page.wait_for_timeout(300)
            entries = page.evaluate(
                """() => [...performance.getEntriesByType('navigation'),
                          ...performance.getEntriesByType('resource')]
                         .map((e) => [e.name, e.transferSize, e.decodedBodySize])"""
            )
            wire = sum(e[1] for e in entries)
            decoded = sum(e[2] for e in entries)
            base_task, _ = longest(page)

            bulk = api(base, "POST", "/sessions", json={"agent_id": agents["bulk"]})["id"]
            page.goto(f"/#/s/{bulk}")
            page.reload()
            page.get_by_role("textbox", name="Message").wait_for()
            longest(page)
            started = time.perf_counter()
            box = page.get_by_role("textbox", name="Message")
            box.fill("go long")
            box.press("Enter")
            page.get_by_role("log", name="Conversation").get_by_text(LAST_WORD).wait_for()
            live_s = time.perf_counter() - started
            live_task, live_count = longest(page)
            events = api(base, "GET", f"/sessions/{bulk}")["last_event_id"]

            started = time.perf_counter()
            page.reload()
            page.get_by_role("log", name="Conversation").get_by_text(LAST_WORD).wait_for()
            replay_s = time.perf_counter() - started
            replay_task, replay_count = longest(page)
            context.close()

    print(
        f"first load: {len(entries)} requests, {wire / 1024:.1f} KB on the wire "
        f"({decoded / 1024:.1f} KB decoded); budget 300 KB"
    )
    print(f"baseline (empty session): longest task {base_task:.0f} ms")
    print(
        f"follow live, {events} events: {live_s:.2f} s to the last word, "
        f"longest task {live_task:.0f} ms ({live_count} over 50 ms); budget 200 ms"
    )
    print(
        f"reload + replay, {events} events: {replay_s:.2f} s to the last word, "
        f"longest task {replay_task:.0f} ms ({replay_count} over 50 ms); budget 200 ms"
    )


if __name__ == "__main__":
    main()
