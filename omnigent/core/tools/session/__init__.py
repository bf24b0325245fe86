"""A session's tool set: :class:`SessionTools` — what a session is offered, and one call
through its policies — with the built-in and orchestration tools it offers.

Imported by the first session whose tools are built (the runtime's builder), not with
the runtime: a server needs none of it before its first answer
(``benchmarks/startup.py``). What every session's tools stand on,
:class:`~omnigent.core.tools.ToolServices`, and the parts the runtime uses itself
(policies, the registry, where tools act) are in :mod:`omnigent.core.tools`.
"""

from ._session_tools import SessionTools

__all__ = ["SessionTools"]
