"""Routes for agents (``/v1/agents``) and files (``/v1/files``).

Agents are readable by every caller (their specs too, with their credentials redacted:
:func:`omnigent.spec.redact_secrets`); a name belongs
to whoever registered it first (another caller posting it is ``403``, from the core).
A spec is at most :data:`MAX_SPEC_BYTES` (``413`` past it), JSON or YAML; YAML is
parsed in a worker thread with aliases refused and nesting bounded
(:func:`omnigent.spec.load_yaml`).

Files are their uploader's alone: to anyone else they do not exist (``404``), except
under ``--auth none``. Their content is served so that it can never run as a page of
this server: ``X-Content-Type-Options: nosniff`` and a ``sandbox`` CSP always, and
anything but a raster image as an attachment (an uploaded HTML or SVG file is
downloaded, not rendered).
"""

from __future__ import annotations

import functools
from typing import Any, Final
from urllib.parse import quote

import trio
from quart import Blueprint, Response, request

from ...core import MAX_FILE_BYTES
from ...errors import InvalidInput, PayloadTooLarge
from ...spec import AgentSpec, redact_secrets
from ._access import file_access, viewer
from ._fence import JSON, accepts
from ._params import json_body, owner, query_int, state

__all__ = [
    "INLINE_TYPES",
    "MAX_SPEC_BYTES",
    "YAML_TYPES",
    "blueprint",
]

blueprint = Blueprint("omnigent_agents_files", __name__)

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
MAX_SPEC_BYTES: Final = 1 << 20
"""The largest agent spec ``POST /v1/agents`` takes (JSON or YAML)."""
INLINE_TYPES: Final = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"}
)
"""Uploads served inline; everything else (SVG included: it can hold scripts) is an
attachment."""


@blueprint.post("/agents")
@accepts(*JSON, *YAML_TYPES)
async def create_agent() -> tuple[dict[str, Any], int]:
    caller = owner()
    length = request.content_length
    if length is not None and length > MAX_SPEC_BYTES:
        raise PayloadTooLarge(f"an agent spec is at most {MAX_SPEC_BYTES} bytes")
    raw = await request.get_data()
    if len(raw) > MAX_SPEC_BYTES:
        raise PayloadTooLarge(f"an agent spec is at most {MAX_SPEC_BYTES} bytes")
    if request.mimetype in YAML_TYPES:
        try:
            text = raw if isinstance(raw, str) else raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput.at("body", "the YAML body must be UTF-8") from exc
        # Parsing is CPU-bound: off the event loop, so /health and every stream keep
        # being answered; aliases refused (a client's YAML has no use for them).
        parse = functools.partial(AgentSpec.from_yaml, text, aliases=False)
        spec: AgentSpec | dict[str, Any] = await trio.to_thread.run_sync(parse)
    else:
        spec = await json_body()
    agent = await state().runtime.create_agent(spec, owner=caller, from_client=True)
    return agent.to_dict(), 201


@blueprint.get("/agents")
async def list_agents() -> dict[str, Any]:
    from ._answers import AgentList  # imported by the first answer: see _answers

    agents = await state().runtime.list_agents()
    return AgentList(tuple(agents)).to_dict()


@blueprint.get("/agents/<agent_id>")
async def get_agent(agent_id: str) -> dict[str, Any]:
    return (await state().runtime.get_agent(agent_id)).to_dict()


@blueprint.get("/agents/<agent_id>/spec")
async def get_agent_spec(agent_id: str) -> dict[str, Any]:
    from ._answers import AgentSpecAnswer  # imported by the first answer: see _answers

    runtime = state().runtime
    agent = await runtime.get_agent(agent_id)  # AgentNotFound
    version = query_int("version", low=1, high=agent.version)
    spec = await runtime.get_agent_spec(agent.id, version)
    shown = redact_secrets(spec.to_dict())
    return AgentSpecAnswer(agent.id, version or agent.version, shown).to_dict()


@blueprint.post("/files")
@accepts("multipart/form-data")
async def upload_file() -> tuple[dict[str, Any], int]:
    caller = owner()
    files = await request.files
    upload = files.get("file")
    if upload is None:
        raise InvalidInput.at("file", "a multipart field named 'file' is required")
    # The upload may be spooled to a temporary file: read it off the event loop.
    content = await trio.to_thread.run_sync(upload.read, MAX_FILE_BYTES + 1)
    info = await state().runtime.upload_file(
        content,
        filename=upload.filename or "upload",
        content_type=upload.mimetype or None,
        owner=caller,
    )
    return info.to_dict(), 201


@blueprint.get("/files/<file_id>")
async def get_file(file_id: str) -> dict[str, Any]:
    return (await file_access(file_id)).to_dict()


@blueprint.get("/files/<file_id>/content")
async def get_file_content(file_id: str) -> Response:
    info = await file_access(file_id)
    content = await state().runtime.read_file(file_id, viewer=viewer())
    response = Response(content, status=200, content_type=info.content_type)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response.headers["Cache-Control"] = "private"
    if response.mimetype not in INLINE_TYPES:
        response.headers["Content-Disposition"] = _attachment(info.filename)
    return response


def _attachment(filename: str) -> str:
    """``Content-Disposition: attachment`` naming the file (RFC 6266, UTF-8 aware)."""
    plain = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in filename
    )
    encoded = quote(filename, safe="")
    return f"attachment; filename=\"{plain or 'download'}\"; filename*=UTF-8''{encoded}"
