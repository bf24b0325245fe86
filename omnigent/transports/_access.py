"""Who the caller is, and what they may touch: the HTTP side of sharing.

With ``--auth none`` everyone is ``local`` and may do everything. With ``--auth
header`` the caller is the ``X-Forwarded-Email`` header and:

- every session route checks the caller's level (:mod:`omnigent.core._permissions`):
  below read the session does not exist for them (``404``), below what the route needs
  it is ``403``;
- session lists hold only what the caller may read (:func:`viewer`);
- a file is its uploader's alone: to anyone else it does not exist (``404``), and an
  ``input_image`` block naming it is refused as an unknown file (``422``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..core._permissions import EDIT, MANAGE, READ
from ..errors import FileNotFound, Forbidden, InvalidInput, SessionNotFound
from ..model import ContentBlock, InputImage
from ..stores import FileRow, SessionRow
from ._params import owner, state

__all__ = [
    "EDIT",
    "MANAGE",
    "READ",
    "check_block_files",
    "check_initial_item_files",
    "file_access",
    "session_access",
    "viewer",
]

_VERBS = {READ: "read", EDIT: "change", MANAGE: "manage"}


async def session_access(session_id: str, need: int) -> SessionRow:
    """The session's row, if the caller may act on it at level ``need``.

    Raises:
        Unauthorized (401) without an identity under ``--auth header``;
        SessionNotFound (404) when the session is missing or the caller cannot read
        it; Forbidden (403) when they can read it but ``need`` is higher.
    """
    app = state()
    caller = owner()
    row = await app.runtime.session_row(session_id)
    if app.auth == "none":
        return row
    level = await app.runtime.permissions.level(row, caller)
    if level < READ:
        raise SessionNotFound(session_id)
    if level < need:
        raise Forbidden(f"you may read session {session_id!r} but not {_VERBS[need]} it")
    return row


def viewer() -> str | None:
    """Whose read access limits a session list: the caller, or nobody's (``none``)."""
    return None if state().auth == "none" else owner()


async def file_access(file_id: str) -> FileRow:
    """The file's row, if the caller may see it (its owner; anyone under ``none``).

    Raises:
        FileNotFound (404) when the file is missing or belongs to someone else.
    """
    app = state()
    row = await app.runtime.files.row(file_id)
    if app.auth != "none" and row.owner != owner():
        raise FileNotFound(file_id)
    return row


async def check_block_files(blocks: Sequence[ContentBlock], *, root: str) -> None:
    """Refuse an ``input_image`` naming a file the caller may not see.

    Such a block is answered as the core answers an unknown file (``422`` at
    ``{root}[i].file_id``), so a refusal does not tell whether the file exists. A file
    that does not exist at all is left for the core's own check.
    """
    await _check_files(
        (f"{root}[{i}].file_id", b.file_id)
        for i, b in enumerate(blocks)
        if isinstance(b, InputImage) and b.file_id is not None
    )


async def check_initial_item_files(initial_items: Sequence[Any]) -> None:
    """:func:`check_block_files` over the raw ``initial_items`` of a new session.

    The items are still wire dicts here (the core structures them); anything that is
    not shaped like an image block is left for the core to refuse.
    """
    refs: list[tuple[str, str]] = []
    for i, item in enumerate(initial_items):
        data = item.get("data") if isinstance(item, dict) else None
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if (
                isinstance(block, dict)
                and block.get("type") == "input_image"
                and isinstance(block.get("file_id"), str)
            ):
                refs.append((f"initial_items[{i}].data.content[{j}].file_id", block["file_id"]))
    await _check_files(refs)


async def _check_files(refs: Iterable[tuple[str, str]]) -> None:
    app = state()
    if app.auth == "none":
        return
    caller = owner()
    for loc, file_id in refs:
        try:
            row = await app.runtime.files.row(file_id)
        except FileNotFound:
            continue
        if row.owner != caller:
            raise InvalidInput.at(loc, f"unknown file {file_id!r}")
