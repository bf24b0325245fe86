"""The HTTP + SSE transport: a Quart-Trio app over a runtime, and ``omnigent serve``.

:func:`create_app` builds the app (routes in the ``_*_routes`` modules, the SSE bodies,
the OpenAPI document, the cross-site fence, the WebSocket endpoint that speaks ACP);
:func:`run_serve` is ``omnigent serve``. It uses only the public names of
:mod:`omnigent.core`.
"""

from ._app import create_app
from ._serve import add_serve_parser, listen_error, run_serve
from ._serve_args import add_serve_arguments

__all__ = [
    "add_serve_arguments",
    "add_serve_parser",
    "create_app",
    "listen_error",
    "run_serve",
]
