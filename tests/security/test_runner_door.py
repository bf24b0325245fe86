"""The runner door and the runner's workspace: the two fences a runner adds.

``GET /v1/runners/connect`` admits a runner only with a token the operator set, after
the cross-site fence; a runner keeps every session's directory inside its workspace,
whatever ``os_env.cwd`` the spec (the operator's own included) names. The attack probe
(``python -m tests.security.attack_probe``, its runner row) tries both against a real
runner; these pin the rules.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import trio

from omnigent.runner import open_runner_place
from omnigent.tools import ToolError

from .serve_helpers import open_serve

TOKEN = "door-token-0123456789abcdef"
UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
}
CONNECT = "/v1/runners/connect?name=probe"


async def _upgrade(url: str, headers: dict[str, str]) -> int:
    async with httpx.AsyncClient(timeout=10) as one:  # a refused upgrade closes it
        return (await one.get(url + CONNECT, headers={**UPGRADE, **headers})).status_code


async def test_the_door_admits_only_the_operators_token_after_the_fence(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with open_serve(tmp_path, "--runner-token", TOKEN) as served:
            for authorization in (
                None,
                "Bearer wrong",
                f"Bearer {TOKEN}x",
                f"Bearer {TOKEN[:-1]}",
                f"Basic {TOKEN}",
                TOKEN,
            ):
                headers = {} if authorization is None else {"Authorization": authorization}
                assert await _upgrade(served.url, headers) == 401, authorization
            good = {"Authorization": f"Bearer {TOKEN}"}
            assert await _upgrade(served.url, {**good, "Origin": "http://evil.example"}) == 403
            assert await _upgrade(served.url, {**good, "Host": "attacker.example"}) == 421
        (tmp_path / "none").mkdir()
        async with open_serve(tmp_path / "none") as served:
            assert await _upgrade(served.url, good) == 401


async def test_a_runner_keeps_every_directory_inside_its_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "out").symlink_to("/")
    escapes = ["/", "/etc", "..", "../..", "a/../../..", "/proc/self/root/etc", "out", "out/etc"]
    with trio.fail_after(30):
        async with open_runner_place(workspace, tmp_path / "home") as place:
            for cwd in escapes:
                with pytest.raises(ToolError, match="outside the working directory"):
                    await place.workdir(cwd)
            inside = await place.workdir("a/b")
            assert inside == workspace.resolve() / "a" / "b" and inside.is_dir()
