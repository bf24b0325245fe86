"""The OS sandbox around every process a session starts (``os_env.sandbox``).

:class:`SandboxPolicy` is one session's policy, resolved from its spec;
:func:`open_sandbox` opens it (checking it can be enforced here, starting the egress
proxy it needs) and yields a :class:`Sandbox`, whose :meth:`Sandbox.wrap` turns a
command into the :class:`Launch` that runs it confined. ``linux_bwrap`` is built on
bubblewrap (:mod:`._bwrap`); the egress rules (:mod:`omnigent.spec`'s, they are part of
the spec language) are enforced by
a proxy outside the sandbox (:mod:`._proxy`) that a bridge inside (:mod:`._bridge`)
is the only way to reach. See ``docs/sandbox.md``.
"""

from ._env import MINIMAL, sandbox_env
from ._hidden import HiddenEntries, Overflow, scan_hidden
from ._pane import open_pane_launch
from ._policy import Backend, SandboxPolicy, backend_for, block_policy
from ._probe import bwrap_problem, find_bwrap
from ._proxy import open_egress_proxy
from ._sandbox import Launch, Sandbox, open_sandbox

__all__ = [
    "MINIMAL",
    "Backend",
    "HiddenEntries",
    "Launch",
    "Overflow",
    "Sandbox",
    "SandboxPolicy",
    "backend_for",
    "block_policy",
    "bwrap_problem",
    "find_bwrap",
    "open_egress_proxy",
    "open_pane_launch",
    "open_sandbox",
    "sandbox_env",
    "scan_hidden",
]
