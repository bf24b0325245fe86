"""The web console: ``GET /`` and its assets under ``/console/``, served by omnigent itself.

The console is a client of the public HTTP API and its event streams (``docs/console.md``):
this module only serves its files. They are package data (``console/`` beside this
module), read once when the app is built and kept in memory with a gzip copy, so a
request never touches the disk, and a name that is not one of those files is the
``404`` envelope — there is no path to traverse.

Every answer carries a strict ``Content-Security-Policy`` (scripts, styles, images and
connections from this origin only; no inline script, no ``eval``, no framing, no
plugins, no fonts fetched) and ``X-Content-Type-Options: nosniff``. The page and its
assets pass the same fence and identity check as the API (``install_fence`` and the
app's ``require_identity`` run before these routes): with ``--auth header`` the proxy
in front sets the identity for the page as it does for the API calls it makes.
Assets are revalidated on each load (``ETag``, ``304``), so an upgraded server is never
shown with a stale script.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from importlib import resources
from typing import Final

import attrs
from quart import Blueprint, Response, request

from ...errors import NotFound

__all__ = ["CONSOLE_CSP", "ConsoleAssets", "console_blueprint", "load_assets"]

CONSOLE_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
}
_INDEX: Final = "index.html"


@attrs.frozen
class Asset:
    """One file of the console, as served."""

    body: bytes
    gzipped: bytes
    content_type: str
    etag: str


@attrs.frozen
class ConsoleAssets:
    """Every file of the console by its path under ``console/`` (``vendor/preact.mjs``)."""

    files: dict[str, Asset]

    def get(self, name: str) -> Asset:
        """The file called ``name``. Raises NotFound."""
        found = self.files.get(name)
        if found is None:
            raise NotFound(f"the console has no file {name!r}")
        return found


@functools.cache
def load_assets() -> ConsoleAssets:
    """Read the console's files from the package (once per process: they never change)."""
    import gzip  # the first page's, not the server's start (issue 32)

    root = resources.files(__package__ or "omnigent.transports.http").joinpath("console")
    files: dict[str, Asset] = {}
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        for entry in folder.iterdir():
            name = f"{prefix}{entry.name}"
            if entry.is_dir():
                pending.append((entry, f"{name}/"))
                continue
            suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
            kind = _TYPES.get(suffix)
            if kind is None:
                continue  # not something the page loads
            body = entry.read_bytes()
            digest = hashlib.sha256(body).hexdigest()[:32]
            files[name] = Asset(body, gzip.compress(body, 9, mtime=0), kind, f'"{digest}"')
    return ConsoleAssets(files)


def _serve(asset: Asset) -> Response:
    if request.headers.get("If-None-Match") == asset.etag:
        response = Response(b"", status=304)
    elif "gzip" in request.headers.get("Accept-Encoding", "").lower():
        response = Response(asset.gzipped, status=200, content_type=asset.content_type)
        response.headers["Content-Encoding"] = "gzip"
    else:
        response = Response(asset.body, status=200, content_type=asset.content_type)
    response.headers["ETag"] = asset.etag
    response.headers["Vary"] = "Accept-Encoding"
    response.headers["Cache-Control"] = "no-cache"
    response.headers["Content-Security-Policy"] = CONSOLE_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
    response.headers["Cross-Origin-Resource-Policy"] = "same-origin"
    return response


def console_blueprint(assets: Callable[[], ConsoleAssets]) -> Blueprint:
    """The routes serving what ``assets()`` returns: ``GET /`` (the page) and ``GET
    /console/<name>``.

    ``assets`` (:func:`load_assets`) is called by the first request for the console:
    reading and compressing its files is not paid before a server's first answer.
    """
    blueprint = Blueprint("omnigent_console", __name__)

    @blueprint.get("/")
    async def index() -> Response:
        return _serve(assets().get(_INDEX))

    @blueprint.get("/console/<path:name>")
    async def asset(name: str) -> Response:
        return _serve(assets().get(name))

    return blueprint
