"""A fork is its forker's own session, and reading a session is no right to write where
its tree works.

Found by the attack probe's fork door (issue 23, round three's re-run): ``POST
/v1/sessions/{id}/fork`` needs only read on its source, and the fork kept the source's
working directory. A sub-agent's session works in its parent's per-session workspace
(``$OMNIGENT_HOME/workspaces/<parent>/workspace``), so a user with read on another
user's tree forked a child, sent the fork a message, and its tools read and wrote in
the owner's workspace — a directory no client may name. Now a fork by anyone but the
source's owner works in a workspace of its own; the owner's own fork keeps it.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from ..http_helpers import HTTPX_GENERATORS
from .serve_helpers import ALICE, BOB, open_serve, scripted

pytestmark = HTTPX_GENERATORS

SECRET = "alice-workspace-secret-0042"
HELLO = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}


def _boss() -> dict[str, object]:
    """A parent that dispatches ``kid``, which reads ``secret.txt`` where it works."""
    kid = scripted("kid", [{"call": "sys_os_read", "args": {"path": "secret.txt"}}])
    send = {"call": "sys_session_send", "args": {"agent": "kid", "title": "t", "args": "x"}}
    return {**scripted("boss", [send]), "sub_agents": [kid], "tools": {"agents": ["kid"]}}


async def _turn(client: httpx.AsyncClient, session_id: str) -> list[str]:
    """Send a message as ``client``'s user; the session's tool outputs."""
    async with client.stream(
        "POST", f"/v1/sessions/{session_id}/events?stream=true", json=HELLO
    ) as answer:
        assert answer.status_code == 200
        async for _ in answer.aiter_bytes():
            pass
    return await _outputs(client, session_id)


async def _outputs(client: httpx.AsyncClient, session_id: str) -> list[str]:
    items = (await client.get(f"/v1/sessions/{session_id}/items")).json()["data"]
    return [i["output"] for i in items if i["type"] == "function_call_output"]


async def test_another_users_fork_works_in_a_workspace_of_its_own(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with (
            open_serve(tmp_path, "--auth", "header") as served,
            served.as_user(ALICE) as alice,
            served.as_user(BOB) as bob,
        ):
            parent = await served.session(alice, agent_id=await served.agent(_boss(), alice))
            # Without a grant, the fork route answers as for a missing session.
            assert (await bob.post(f"/v1/sessions/{parent}/fork", json={})).status_code == 404
            await alice.put(f"/v1/sessions/{parent}/permissions", json={"user_id": BOB, "level": 1})
            await _turn(alice, parent)
            kid = ""
            while not kid:  # the child's turn runs after the parent's ends
                children = (await alice.get(f"/v1/sessions/{parent}/child_sessions")).json()
                ready = [c for c in children["data"] if c["status"] == "idle"]
                if ready and await _outputs(alice, ready[0]["id"]):
                    kid = ready[0]["id"]
                else:
                    await trio.sleep(0.05)
            workspace = served.home / "workspaces" / parent / "workspace"
            (workspace / "secret.txt").write_text(SECRET)

            answer = await bob.post(f"/v1/sessions/{kid}/fork", json={})
            assert answer.status_code == 201, answer.text
            fork = answer.json()
            assert fork["parent_session_id"] is None
            *_copied, output = await _turn(bob, fork["id"])
            assert SECRET not in output and output.startswith("Error"), output
            # Reading alice's tree gave bob nothing more on it, nor her his fork.
            assert (await bob.delete(f"/v1/sessions/{kid}")).status_code == 403
            assert (await alice.get(f"/v1/sessions/{fork['id']}")).status_code == 404

            # The owner's own fork goes on where the child worked.
            mine = (await alice.post(f"/v1/sessions/{kid}/fork", json={})).json()
            *_copied, output = await _turn(alice, mine["id"])
            assert SECRET in output, output
