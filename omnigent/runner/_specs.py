"""The specs a link's sessions run here, and the sandbox each confines them in.

:class:`SessionSpecs` keeps, per session, the spec the server last sent on the link
(``turn/run``, ``mcp/start``: checked by the runner first). The server sends it with
the sandbox the session runs in — its own ``os_env.sandbox``, or its nearest sandboxed
ancestor's — and everything the runner starts for the session (its harness's
processes, its shells and file tools, its terminals, its stdio MCP servers) is
confined by that sandbox, resolved against the session's working directory inside the
workspace, with the runner's ``$OMNIGENT_HOME`` hidden whole (as a server hides its
own).
"""

from __future__ import annotations

import functools

import trio

from ..processes.sandbox import SandboxPolicy, block_policy
from ..spec import AgentSpec
from ..tools import ToolError
from ._place import RunnerPlace

__all__ = ["SessionSpecs"]


class SessionSpecs:
    """The sessions' specs on one link (see the module docstring)."""

    def __init__(self, place: RunnerPlace) -> None:
        self._place = place
        self._specs: dict[str, AgentSpec] = {}
        self._policies: dict[str, SandboxPolicy | None] = {}

    def remember(self, session_id: str, spec: AgentSpec) -> None:
        """The session's spec from now on (a checked one)."""
        if self._specs.get(session_id) != spec:
            self._specs[session_id] = spec
            self._policies.pop(session_id, None)

    def get(self, session_id: str) -> AgentSpec | None:
        return self._specs.get(session_id)

    def forget(self, session_id: str) -> None:
        self._specs.pop(session_id, None)
        self._policies.pop(session_id, None)

    async def sandbox(self, session_id: str, *, required: bool = False) -> SandboxPolicy | None:
        """The sandbox the session's processes run in here (None: none), resolved once
        per spec.

        Raises:
            ToolError: ``required`` (the server says the session is sandboxed) but no
                spec with a sandbox was sent for it on this link: nothing runs
                unconfined. Or its working directory leads out of the workspace.
            SandboxUnavailable: ``type: auto`` on a platform with no sandbox.
        """
        spec = self._specs.get(session_id)
        os_env = spec.os_env if spec is not None else None
        if os_env is None or not os_env.sandbox.confined:
            if required:
                raise ToolError(
                    f"session {session_id} runs in a sandbox this runner was not given; "
                    "nothing was run"
                )
            return None
        if session_id not in self._policies:
            root = await self._place.workdir(os_env.cwd)
            resolve = functools.partial(
                block_policy, os_env.sandbox, root, hide=(self._place.home,)
            )
            policy = await trio.to_thread.run_sync(resolve)
            if self._specs.get(session_id) is spec:  # not replaced meanwhile
                self._policies[session_id] = policy
            return policy
        return self._policies[session_id]
