"""A runtime killed (``kill -9``) while it stores the message that carries its inbox.

Usage: ``python crash_notice_script.py DB_URL WORKDIR``. A turn starts a background
shell; when its result arrives the idle session is woken, and the store is made to
hang on the wake-up message (as a slow disk would). Once every task has gone quiet
the script prints ``READY <session id>`` and waits to be killed. Used by
``test_recovery``: wherever the wake-up was cut, the result must reach the session
after the restart.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

import omnigent
from omnigent.testing import probe

SPEC = {
    "name": "notified",
    "async_enabled": True,
    "executor": {
        "type": "omnigent",
        "config": {
            "harness": "scripted",
            "turns": [
                [
                    {
                        "call": "sys_call_async",
                        "args": {"tool": "sys_os_shell", "args": {"command": "echo quick"}},
                    }
                ],
                [{"say": "noted"}],
            ],
        },
    },
}


async def main(db: str, workdir: Path) -> None:
    async with omnigent.open_runtime(db=db, workspace=workdir) as rt:
        session = (await rt.create_session((await rt.create_agent(SPEC)).id)).id
        store = probe(rt).store
        put = store.put_items
        held = trio.Event()

        async def hanging(session_id: str, items: Sequence[dict[str, Any]], **kw: Any) -> None:
            if any("[System: task" in str(i.get("content")) for i in items):
                held.set()
                await trio.sleep_forever()
            await put(session_id, items, **kw)

        store.put_items = hanging  # type: ignore[method-assign]
        await rt.send_message(session, "go")
        await held.wait()
        await trio.testing.wait_all_tasks_blocked(cushion=0.2)
        print("READY", session, flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], Path(sys.argv[2]))
