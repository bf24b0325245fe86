"""The Agent Client Protocol (ACP v1) on the core, for editors.

:func:`serve_acp` runs one ACP connection (stdio or one WebSocket) over the runtime;
:func:`run_stdio` is ``omnigent stdio``. The mapping modules (params, content, updates,
outcomes) are pure.
"""

from ._agent import serve_acp
from ._stdio import (
    add_stdio_arguments,
    add_stdio_parser,
    default_agent_spec,
    load_agent_spec,
    protocol_fds,
    run_stdio,
)

__all__ = [
    "add_stdio_arguments",
    "add_stdio_parser",
    "default_agent_spec",
    "load_agent_spec",
    "protocol_fds",
    "run_stdio",
    "serve_acp",
]
