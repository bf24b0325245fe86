"""The built-in OS tools: ``sys_os_read``, ``sys_os_write``, ``sys_os_edit``, ``sys_os_shell``.

Each tool is a plain async function over an explicit working directory ``cwd`` and the
model's argument object; it returns the tool's output string — JSON on success,
``Error: <what and how to fix it>`` for a failure the model can act on. They know
nothing about sessions or the runtime: the core binds ``cwd`` (see ``docs/tools.md``).

Every path is opened beneath ``cwd``, one component at a time relative to a directory
descriptor, so a symlink swapped in mid-call cannot lead out; see :mod:`._beneath`.
Each file tool opens its file once and works on that descriptor. The shell runs in
its own process group that is killed as a whole on timeout and on cancellation; see
:mod:`omnigent.processes._groups`.

Error handling: bad arguments, escaping paths, missing files, unmatched edits and the
like come back as ``Error: …`` strings, never exceptions. Anything unexpected raises.

Cancellation: the file tools do their I/O in worker threads (a cancelled call waits
for the current thread call to return; none of them is long). The shell kills its
process group before ``trio.Cancelled`` propagates.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec

import trio

from .._private import private_dir
from ..errors import SandboxUnavailable
from ..processes import SessionTrees, TrackedGroups, run_in_group
from ._args import (
    ArgField,
    ToolError,
    check_args,
    non_empty_string,
    non_negative_int,
    positive_int,
    positive_number,
    string,
)
from ._beneath import OpenMode, WorkingDirectory, open_beneath
from ._grants import FileGrants, locate
from ._paths import resolve_root
from ._schemas import DEFAULT_READ_LIMIT, MAX_SHELL_TIMEOUT, OS_TOOL_SCHEMAS

if TYPE_CHECKING:
    from ..processes.sandbox import SandboxPolicy

__all__ = [
    "DEFAULT_READ_LIMIT",
    "MAX_SHELL_TIMEOUT",
    "OS_TOOL_SCHEMAS",
    "ensure_dir",
    "is_mutating",
    "sys_os_edit",
    "sys_os_read",
    "sys_os_shell",
    "sys_os_write",
]

_MUTATING = frozenset({"sys_os_write", "sys_os_edit", "sys_os_shell"})
_SNIPPET = 80
_NOT_REGULAR = "not a regular file (a FIFO, socket or device)"

_P = ParamSpec("_P")


def _reports_tool_errors(
    fn: Callable[Concatenate[Path, _P], Awaitable[str]],
) -> Callable[Concatenate[str | os.PathLike[str], _P], Awaitable[str]]:
    """Turn a :class:`ToolError` raised inside ``fn`` into its ``Error: …`` output.

    The working directory may be given as a ``str`` or any path-like object; the
    tool itself always sees a :class:`~pathlib.Path`.
    """

    @functools.wraps(fn)
    async def wrapper(cwd: str | os.PathLike[str], /, *args: _P.args, **kwargs: _P.kwargs) -> str:
        try:
            return await fn(Path(cwd), *args, **kwargs)
        except ToolError as exc:
            return exc.render()

    return wrapper


def _json(**fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False)


def is_mutating(tool_name: str) -> bool:
    """Whether the OS tool ``tool_name`` can change the filesystem (write, edit, shell)."""
    return tool_name in _MUTATING


async def ensure_dir(path: str | os.PathLike[str], *, private: bool = False) -> Path:
    """Create ``path`` (a ``str`` or a path) and its parents if missing; return it.

    ``private``: each directory created is ``0700`` whatever the umask (a per-session
    workspace under ``$OMNIGENT_HOME``); else the umask decides (the user's own trees).
    """
    folder = Path(path)
    if private:
        await trio.to_thread.run_sync(private_dir, folder)
        return folder
    await trio.to_thread.run_sync(functools.partial(folder.mkdir, parents=True, exist_ok=True))
    return folder


def _encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Only a lone surrogate (from a JSON "\\ud800" escape) gets here.
        raise ToolError(f"{what} is not valid Unicode text ({exc.reason}); fix the text") from exc


def _os_failure(action: str, raw: str, exc: OSError) -> ToolError:
    reason = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return ToolError(f"cannot {action} {raw!r}: no such file; check the path")
    if isinstance(exc, IsADirectoryError):
        return ToolError(f"cannot {action} {raw!r}: it is a directory; name a file")
    if isinstance(exc, NotADirectoryError | FileExistsError):
        return ToolError(f"cannot {action} {raw!r}: a parent of it is not a directory")
    return ToolError(f"cannot {action} {raw!r}: {reason}")


# -- sys_os_read ----------------------------------------------------------------------

_READ_ARGS = (
    ArgField("path", non_empty_string, required=True),
    ArgField("offset", non_negative_int),
    ArgField("limit", positive_int),
)


def _require_regular(fd: int) -> None:
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    if not stat.S_ISREG(mode):
        raise OSError(errno.ENODEV, _NOT_REGULAR)


def _open_regular(
    cwd: Path,
    raw: str,
    mode: OpenMode,
    *,
    make_parents: bool = False,
    grants: FileGrants | None = None,
) -> tuple[int, bool]:
    """Open ``raw`` beneath ``cwd`` (or a sandbox's grant) if it is a regular file.

    Returns ``(fd, created)``.

    Raises:
        ToolError: the path leads outside ``cwd`` and every grant, or to a name the
            sandbox hides (see :func:`open_beneath`, :func:`locate`).
        OSError: missing, a directory, not a regular file, and the like.
    """
    where = locate(cwd, raw, mode, grants)
    root = resolve_root(where.cwd)
    hidden = grants.hidden if grants is not None else None
    try:
        fd, created = open_beneath(
            where.cwd, root, where.raw, mode, make_parents=make_parents, hidden=hidden
        )
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # a FIFO opened for writing with no reader
            raise
        raise OSError(errno.ENODEV, _NOT_REGULAR) from exc
    try:
        _require_regular(fd)
    except OSError:
        os.close(fd)
        raise
    return fd, created


def _read_window(
    cwd: Path, raw: str, offset: int, limit: int, grants: FileGrants | None
) -> tuple[bytes, int, int]:
    """The bytes of lines ``[offset, offset + limit)``, how many, and the total count."""
    selected: list[bytes] = []
    total = 0
    fd, _ = _open_regular(cwd, raw, "read", grants=grants)
    with os.fdopen(fd, "rb") as file:
        for line in file:  # splits on b"\n" and keeps it, so "\r\n" survives
            if offset <= total < offset + limit:
                selected.append(line)
            total += 1
    return b"".join(selected), len(selected), total


@_reports_tool_errors
async def sys_os_read(
    cwd: Path, args: Mapping[str, Any], *, sandbox: SandboxPolicy | None = None
) -> str:
    """Read lines ``[offset, offset + limit)`` of a text file inside ``cwd``.

    Undecodable bytes are replaced (U+FFFD) and ``encoding`` says ``"utf-8 (lossy)"``.
    With ``sandbox``, what it grants and hides applies (see :mod:`._grants`).
    """
    check_args("sys_os_read", args, _READ_ARGS)
    raw: str = args["path"]
    offset: int = args.get("offset", 0)
    limit: int = args.get("limit", DEFAULT_READ_LIMIT)
    try:
        data, returned, total = await trio.to_thread.run_sync(
            _read_window, cwd, raw, offset, limit, FileGrants.of(sandbox)
        )
    except OSError as exc:
        raise _os_failure("read", raw, exc) from exc
    try:
        content, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = data.decode("utf-8", errors="replace"), "utf-8 (lossy)"
    return _json(
        path=raw,
        content=content,
        encoding=encoding,
        offset=offset,
        limit=limit,
        returned_lines=returned,
        total_lines=total,
    )


# -- sys_os_write ---------------------------------------------------------------------

_WRITE_ARGS = (
    ArgField("path", non_empty_string, required=True),
    ArgField("content", string, required=True),
)


def _write_all(fd: int, data: bytes) -> None:
    """Replace the file's content with ``data`` through its descriptor."""
    os.ftruncate(fd, 0)
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)


def _write_file(cwd: Path, raw: str, data: bytes, grants: FileGrants | None) -> bool:
    """Write ``data`` to ``raw`` beneath ``cwd`` (parents made); whether it was created."""
    fd, created = _open_regular(cwd, raw, "write", make_parents=True, grants=grants)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    return created


@_reports_tool_errors
async def sys_os_write(
    cwd: Path, args: Mapping[str, Any], *, sandbox: SandboxPolicy | None = None
) -> str:
    """Create or overwrite a file inside ``cwd`` with UTF-8 ``content``.

    Missing parent directories (inside ``cwd``) are created. With ``sandbox``, what it
    grants and hides applies (see :mod:`._grants`).
    """
    check_args("sys_os_write", args, _WRITE_ARGS)
    raw: str = args["path"]
    data = _encode(args["content"], "content")
    try:
        created = await trio.to_thread.run_sync(_write_file, cwd, raw, data, FileGrants.of(sandbox))
    except WorkingDirectory as exc:
        raise ToolError(f"cannot write {raw!r}: it is the working directory; name a file") from exc
    except OSError as exc:
        raise _os_failure("write", raw, exc) from exc
    return _json(path=raw, bytes_written=len(data), created=created)


# -- sys_os_edit ----------------------------------------------------------------------


def _edit_item(value: Any) -> str | None:
    if not isinstance(value, Mapping) or set(value) != {"oldText", "newText"}:
        return "must be an object with exactly the keys 'oldText' and 'newText'"
    if non_empty_string(value["oldText"]) or string(value["newText"]):
        return "needs a non-empty string 'oldText' and a string 'newText'"
    return None


def _edit_list(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return "must be a non-empty array of {oldText, newText} objects"
    for index, item in enumerate(value):
        problem = _edit_item(item)
        if problem:
            return f"item {index} {problem}"
    return None


_EDIT_ARGS = (
    ArgField("path", non_empty_string, required=True),
    ArgField("oldText", non_empty_string),
    ArgField("newText", string),
    ArgField("edits", _edit_list),
)


def _edits_from(args: Mapping[str, Any]) -> list[tuple[str, str]]:
    single = "oldText" in args or "newText" in args
    if single and "edits" in args:
        raise ToolError(
            "invalid arguments for sys_os_edit: give either oldText/newText or edits, not both"
        )
    if "edits" in args:
        return [(e["oldText"], e["newText"]) for e in args["edits"]]
    if "oldText" not in args or "newText" not in args:
        raise ToolError(
            "invalid arguments for sys_os_edit: give oldText and newText together, "
            "or a list of edits [{oldText, newText}]"
        )
    return [(args["oldText"], args["newText"])]


def _snippet(text: str) -> str:
    return repr(text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…")


def _apply_edits(raw: str, text: str, edits: list[tuple[str, str]]) -> str:
    for index, (old, new) in enumerate(edits):
        where = f" (edit {index})" if len(edits) > 1 else ""
        matches = text.count(old)
        if matches == 0:
            raise ToolError(
                f"oldText not found in {raw}{where}: {_snippet(old)}; copy the exact text "
                "from the file, whitespace included (nothing was written)"
            )
        if matches > 1:
            raise ToolError(
                f"ambiguous: {matches} matches of oldText in {raw}{where}; include more "
                "context so it matches exactly once (nothing was written)"
            )
        text = text.replace(old, new, 1)
    return text


def _edit_file(cwd: Path, raw: str, edits: list[tuple[str, str]], grants: FileGrants | None) -> int:
    """Apply ``edits`` to ``raw`` beneath ``cwd`` through one descriptor; bytes written.

    The file is opened once, read, and rewritten in place only if every edit matched,
    so the file checked is the file changed.
    """
    fd, _ = _open_regular(cwd, raw, "edit", grants=grants)
    try:
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        try:
            text = b"".join(chunks).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ToolError(
                f"cannot edit {raw!r}: it is not valid UTF-8 text; rewrite it with sys_os_write"
            ) from exc
        data = _encode(_apply_edits(raw, text, edits), "newText")
        _write_all(fd, data)
    finally:
        os.close(fd)
    return len(data)


@_reports_tool_errors
async def sys_os_edit(
    cwd: Path, args: Mapping[str, Any], *, sandbox: SandboxPolicy | None = None
) -> str:
    """Replace exact text in a file inside ``cwd``; all edits apply, or none.

    Each ``oldText`` must occur exactly once in the text as it stands after the edits
    before it. The file is written once, after every edit has matched. With
    ``sandbox``, what it grants and hides applies (see :mod:`._grants`).
    """
    check_args("sys_os_edit", args, _EDIT_ARGS)
    edits = _edits_from(args)
    raw: str = args["path"]
    try:
        written = await trio.to_thread.run_sync(_edit_file, cwd, raw, edits, FileGrants.of(sandbox))
    except OSError as exc:
        raise _os_failure("edit", raw, exc) from exc
    return _json(path=raw, replacements=len(edits), bytes_written=written)


# -- sys_os_shell ---------------------------------------------------------------------

_SHELL_ARGS = (
    ArgField("command", non_empty_string, required=True),
    ArgField("timeout", positive_number(MAX_SHELL_TIMEOUT)),
)


@asynccontextmanager
async def _no_tree() -> AsyncIterator[None]:
    yield None


@_reports_tool_errors
async def sys_os_shell(
    cwd: Path,
    args: Mapping[str, Any],
    *,
    default_timeout: float = 120.0,
    output_cap: int = 100_000,
    kill_grace: float = 2.0,
    tracker: TrackedGroups | None = None,
    sandbox: SandboxPolicy | None = None,
    trees: SessionTrees | None = None,
) -> str:
    """Run ``command`` with ``/bin/sh -c`` in ``cwd``, in its own process group.

    stdin is ``/dev/null``; the environment is inherited — or, with ``sandbox``, the
    command runs inside it (``docs/sandbox.md``) with its minimal environment. Each
    output stream keeps its first ``output_cap`` bytes. On timeout the group is killed
    and ``exit_code`` is ``null``. Processes the command leaves in the background are
    killed when it exits. ``tracker`` records the group while it lives (so a crash can
    be cleaned up after); with ``trees``, the command (its sandbox launcher included)
    runs in a process tree of its own (:func:`~omnigent.processes.open_process_trees`),
    so a process that leaves the group — ``setsid``, ``nohup`` in a subshell, GNU
    ``timeout`` — is killed too.

    A sandbox that cannot be created here is an ``Error: …`` naming why; the command
    is never run without it.

    Cancellation: the process group gets SIGTERM, then SIGKILL after ``kill_grace``
    seconds if anything survives; ``trio.Cancelled`` propagates once it is gone.
    """
    from ..processes.sandbox import open_sandbox  # with the first command

    check_args("sys_os_shell", args, _SHELL_ARGS)
    timeout = float(args.get("timeout", default_timeout))
    root = await trio.to_thread.run_sync(resolve_root, cwd)
    try:
        async with (
            open_sandbox(sandbox) as box,
            trees.open_command(grace=kill_grace) if trees is not None else _no_tree() as tree,
        ):
            launch = await box.wrap(["/bin/sh", "-c", args["command"]], cwd=root)
            outcome = await run_in_group(
                launch.argv,
                root,
                timeout=timeout,
                output_cap=output_cap,
                grace=kill_grace,
                tracker=tracker,
                env=launch.env,
                tree=tree,
            )
    except SandboxUnavailable as exc:
        raise ToolError(f"cannot run the command: {exc.message}") from exc
    except OSError as exc:
        raise ToolError(f"cannot start /bin/sh: {exc.strerror or exc}") from exc
    fields: dict[str, Any] = {"sandbox": sandbox.backend.value} if sandbox is not None else {}
    return _json(
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        exit_code=outcome.exit_code,
        timed_out=outcome.timed_out,
        shell="/bin/sh",
        cwd=str(cwd),
        **fields,
    )
