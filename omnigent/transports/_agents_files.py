"""Routes for agents (``/v1/agents``) and files (``/v1/files``).

Agents are readable by every caller; a name belongs to whoever registered it first
(another caller posting it is ``403``, from the core). Files are their uploader's
alone: to anyone else they do not exist (``404``), except under ``--auth none``.
"""

from __future__ import annotations

from typing import Any

import trio
from quart import Blueprint, Response, request

from ..core import MAX_FILE_BYTES
from ..errors import InvalidInput
from ..spec import AgentSpec
from ._access import file_access, viewer
from ._params import json_body, owner, state

__all__ = ["YAML_TYPES", "blueprint"]

blueprint = Blueprint("omnigent_agents_files", __name__)

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


@blueprint.post("/agents")
async def create_agent() -> tuple[dict[str, Any], int]:
    caller = owner()
    if request.mimetype in YAML_TYPES:
        raw = await request.get_data()
        try:
            text = raw if isinstance(raw, str) else raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput.at("body", "the YAML body must be UTF-8") from exc
        spec: AgentSpec | dict[str, Any] = AgentSpec.from_yaml(text)
    else:
        spec = await json_body()
    agent = await state().runtime.create_agent(spec, owner=caller)
    return agent.to_dict(), 201


@blueprint.get("/agents")
async def list_agents() -> dict[str, Any]:
    agents = await state().runtime.list_agents()
    return {"object": "list", "data": [a.to_dict() for a in agents]}


@blueprint.get("/agents/<agent_id>")
async def get_agent(agent_id: str) -> dict[str, Any]:
    return (await state().runtime.get_agent(agent_id)).to_dict()


@blueprint.post("/files")
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
    return Response(content, status=200, content_type=info.content_type)
