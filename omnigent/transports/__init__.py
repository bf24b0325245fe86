"""Transports: the protocols that expose the core (HTTP + SSE here).

``create_app(runtime)`` builds the Quart-Trio app; :mod:`omnigent.transports.http._serve`
runs it under Hypercorn (``omnigent serve``).
"""

from .http import create_app

__all__ = ["create_app"]
