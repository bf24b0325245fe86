"""Messages are bounded in bytes, and so is the memory kept for histories.

Found by the third attack probe (issue 23, defect 5): the history cache was bounded by
item count only, so each 20 MiB message kept ~25 MiB of memory (62 → 1,284 MiB after
40 messages, unchanged when idle). Now a message over ``max_message_bytes`` (8 MiB by
default; ``serve --max-message-bytes``) is ``413`` and nothing is stored, and the kept
histories are bounded by bytes too — a session over the bound is read again rather
than held.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import omnigent
from omnigent.core.session import HistoryCache
from omnigent.errors import PayloadTooLarge
from omnigent.testing import probe, run_turn

from .serve_helpers import open_serve, scripted

MIB = 1024 * 1024


async def test_a_message_over_the_limit_is_413_and_stores_nothing(tmp_path: Path) -> None:
    text = [{"type": "input_text", "text": "é" * 600}]  # 1,200 bytes of UTF-8
    with trio.fail_after(30):
        async with open_serve(tmp_path, "--max-message-bytes", "1000") as served:
            agent = await served.agent(scripted("a"))
            session = await served.session(agent_id=agent)
            body = {"type": "message", "data": {"role": "user", "content": text}}
            answer = await served.client.post(f"/v1/sessions/{session}/events", json=body)
            assert answer.status_code == 413, answer.text
            assert answer.json()["error"]["code"] == "request_entity_too_large"
            items = await served.client.get(f"/v1/sessions/{session}/items")
            assert items.json()["data"] == []
            initial = [{"type": "message", "data": {"role": "user", "content": text}}]
            made = await served.client.post(
                "/v1/sessions", json={"agent_id": agent, "initial_items": initial}
            )
            assert made.status_code == 413, made.text
            assert "initial_items[0].data.content" in made.text
            fine = [{"type": "input_text", "text": "x" * 1000}]
            body = {"type": "message", "data": {"role": "user", "content": fine}}
            answer = await served.client.post(f"/v1/sessions/{session}/events", json=body)
            assert answer.status_code == 202, answer.text


async def test_the_library_limit_and_inline_images_count() -> None:
    image = {"type": "input_image", "image_url": "data:image/png;base64," + "A" * 2000}
    with trio.fail_after(30):
        async with omnigent.open_runtime(max_message_bytes=1500) as rt:
            agent = await rt.create_agent(scripted("a"))
            session = await rt.create_session(agent.id)
            with pytest.raises(PayloadTooLarge):
                await rt.send_message(session.id, [image])
            assert not (await rt.list_items(session.id)).data


async def test_kept_histories_are_bounded_by_bytes(tmp_path: Path) -> None:
    big = "x" * MIB
    with trio.fail_after(60):
        async with omnigent.open_runtime(f"sqlite:///{tmp_path / 'o.db'}") as rt:
            agent = await rt.create_agent(scripted("a", [{"say": "ok"}]))
            sessions = []
            for _ in range(3):
                session = await rt.create_session(agent.id)
                for _ in range(3):
                    await run_turn(rt, session.id, big)
                sessions.append(session.id)
            store = probe(rt).store
            # Over the bound alone: answered, not kept.
            small = HistoryCache(store, max_bytes=2 * MIB)
            history = await small.get(sessions[0])
            assert len(history) == 6 and history.bytes > 3 * MIB
            assert small.statistics()["sessions"] == 0 and small.statistics()["bytes"] == 0
            # Two fit, the third evicts the oldest.
            cache = HistoryCache(store, max_bytes=7 * MIB)
            for session_id in sessions:
                await cache.get(session_id)
            stats = cache.statistics()
            assert stats["sessions"] == 2 and 6 * MIB < stats["bytes"] <= 7 * MIB, stats
            # A history that grows past the bound while kept is let go too.
            kept = await cache.get(sessions[2])
            kept.record(
                omnigent.model.MessageItem(role="user", content=(omnigent.model.InputText(big),))
            )
            assert cache.statistics()["bytes"] <= 7 * MIB
            # The runtime's own cache never holds more than its bound.
            assert probe(rt).history_statistics()["bytes"] <= 128 * MIB
