"""A runtime that is killed mid-turn (``kill -9``) by ``test_recovery``.

Usage: ``python crash_script.py DB_URL WORKDIR``. It starts a turn that runs a shell in
the background (``sys_call_async``) and one in the foreground, buffers a second
message, prints ``READY <session id>`` and waits to be killed. Each shell writes its
pid to ``WORKDIR/{bg,fg}.pid`` and then becomes ``sleep 1000``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

import omnigent
from omnigent.testing import probe


def spec(workdir: Path) -> dict[str, object]:
    background = f"echo $$ > {workdir}/bg.pid; exec sleep 1000"
    foreground = f"echo $$ > {workdir}/fg.pid; exec sleep 1000"
    first = [
        {
            "call": "sys_call_async",
            "args": {"tool": "sys_os_shell", "args": {"command": background}},
        },
        {"say": "started"},
        {"call": "sys_os_shell", "args": {"command": foreground, "timeout": 900}},
    ]
    return {
        "name": "crasher",
        "async_enabled": True,
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "turns": [first, [{"say": "answered"}]]},
        },
    }


async def main(db: str, workdir: Path) -> None:
    async with omnigent.open_runtime(db=db, workspace=workdir) as rt:
        agent = await rt.create_agent(spec(workdir))
        session = (await rt.create_session(agent.id)).id
        async with rt.subscribe(session) as events:
            await rt.send_message(session, "go")
            async for event in events:
                item = getattr(event, "item", None)
                if (
                    getattr(item, "name", None) == "sys_os_shell"
                    and item.status == "action_required"
                ):
                    break
        with trio.fail_after(10):
            while not ((workdir / "fg.pid").exists() and (workdir / "bg.pid").exists()):
                await trio.sleep(0.01)
        accepted = await rt.send_message(session, "and this?")
        assert accepted.status == "buffered", accepted
        await probe(rt).bus.flush()
        print("READY", session, flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1], Path(sys.argv[2]))
