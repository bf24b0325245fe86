"""A runtime killed (``kill -9``) while its event writer holds a turn's ``running`` status.

Usage: ``python crash_take_script.py DB_URL``. One turn is answered; then the store is
made to hang on the batch that holds the second turn's ``session.status running``
(as a slow disk would), a second message is sent, and once every task has gone
quiet the script prints ``READY <session id> <message id>`` and waits to be killed.
Used by ``test_recovery``: whatever the turn did meanwhile, the message must be
answered after the restart.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import trio
import trio.testing

import omnigent
from omnigent.stores import StoredEvent
from omnigent.testing import probe

SPEC = {
    "name": "taker",
    "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": [{"say": "ok"}]}},
}


async def main(db: str) -> None:
    async with omnigent.open_runtime(db=db) as rt:
        session = (await rt.create_session((await rt.create_agent(SPEC)).id)).id
        async with rt.subscribe(session) as events:
            await rt.send_message(session, "first")
            async for event in events:
                if getattr(event, "status", None) == "idle":
                    break
        await probe(rt).bus.flush()
        store = probe(rt).store
        write = store.append_events
        held = trio.Event()

        async def hanging(rows: Sequence[StoredEvent], **options: Any) -> None:
            if any(r.session_id == session and r.status == "running" for r in rows):
                held.set()
                await trio.sleep_forever()
            await write(rows, **options)

        store.append_events = hanging  # type: ignore[method-assign]
        accepted = await rt.send_message(session, "second")
        await held.wait()
        # Whatever the turn can do while its start is not yet durable, it has done.
        await trio.testing.wait_all_tasks_blocked(cushion=0.2)
        print("READY", session, accepted.item_id, flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
