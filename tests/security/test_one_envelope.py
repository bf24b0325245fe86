"""One error envelope, always (issue 9).

A ``SystemExit`` raised by code a route called — a policy function, a module imported
while a spec is registered — passed every ``except Exception`` and reached Hypercorn,
which answered ``500`` with an empty body; through a nursery it came back as Quart's
``InternalServerError``, whose slug was ``internal_server_error`` instead of the
documented ``internal_error``. Whatever the cause, the answer is the envelope and the
server keeps serving.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from ..http_helpers import HTTPX_GENERATORS, open_server, scripted

pytestmark = HTTPX_GENERATORS

EVENT = {"event": {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "x", "tool_input": {}}}}


def _is_internal_error(answer: Any) -> None:
    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "error": {"code": "internal_error", "message": "internal error; the cause was logged"}
    }


@pytest.mark.parametrize("raised", [SystemExit(3), SystemExit, ValueError("secret path /x")])
async def test_a_route_that_raises_anything_answers_the_envelope(
    raised: BaseException | type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            session_id = await server.session(scripted("bot"))

            async def explode(*args: Any, **kwargs: Any) -> Any:
                raise raised

            # Directly in the route (an import at registration), and inside the
            # nursery the policy route waits in (a policy function in its thread).
            monkeypatch.setattr(server.runtime, "create_agent", explode)
            monkeypatch.setattr(server.runtime, "evaluate_policy", explode)
            _is_internal_error(await server.client.post("/v1/agents", json=scripted("x")))
            evaluated = await server.client.post(
                f"/v1/sessions/{session_id}/policies/evaluate", json=EVENT
            )
            _is_internal_error(evaluated)
            assert (await server.client.get("/health")).json()["status"] == "ok"
            assert (await server.client.get(f"/v1/sessions/{session_id}")).status_code == 200
