"""The built-in OS tools: contracts, containment, and the shell's process-group kill."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent.tools
from omnigent.tools import (
    OS_TOOL_SCHEMAS,
    ensure_dir,
    is_mutating,
    sys_os_edit,
    sys_os_read,
    sys_os_shell,
    sys_os_write,
    workspace_for,
)
from omnigent.tools import os as os_tools

Tool = Callable[[Path, Mapping[str, Any]], Awaitable[str]]
GRACE = 0.3  # short kill grace so the SIGKILL tests stay fast


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The working directory, with a sibling ``outside/`` that tools must not touch."""
    (tmp_path / "work").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return tmp_path / "work"


def ok(output: str) -> dict[str, Any]:
    assert not output.startswith("Error:"), output
    result = json.loads(output)
    assert isinstance(result, dict)
    return result


# -- public surface -------------------------------------------------------------------


def test_all_is_the_public_surface() -> None:
    # isort's order (constants, classes, functions), as ruff keeps it.
    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert omnigent.tools.__all__ == sorted(omnigent.tools.__all__, key=key)
    for name in omnigent.tools.__all__:
        assert hasattr(omnigent.tools, name)


def test_schemas_match_accepted_arguments() -> None:
    fields = {
        "sys_os_read": os_tools._READ_ARGS,
        "sys_os_write": os_tools._WRITE_ARGS,
        "sys_os_edit": os_tools._EDIT_ARGS,
        "sys_os_shell": os_tools._SHELL_ARGS,
    }
    assert set(OS_TOOL_SCHEMAS) == set(fields)
    for name, schema in OS_TOOL_SCHEMAS.items():
        assert schema["description"] and "\n" not in schema["description"]
        params = schema["parameters"]
        assert set(params["properties"]) == {f.name for f in fields[name]}
        assert set(params["required"]) == {f.name for f in fields[name] if f.required}
        assert params["additionalProperties"] is False


def test_is_mutating() -> None:
    assert [is_mutating(n) for n in ("sys_os_write", "sys_os_edit", "sys_os_shell")] == [
        True,
        True,
        True,
    ]
    assert not is_mutating("sys_os_read")
    assert not is_mutating("something_else")


@pytest.mark.parametrize(
    ("session_id", "component"),
    [("sess_01", "sess_01"), ("a/b c", "a_b_c"), ("..", "__"), (".", "_"), ("", "_")],
)
def test_workspace_for(tmp_path: Path, session_id: str, component: str) -> None:
    assert workspace_for(tmp_path, session_id) == tmp_path / "workspaces" / component / "workspace"


async def test_ensure_dir(tmp_path: Path) -> None:
    with trio.fail_after(5):
        target = workspace_for(tmp_path, "s1")
        assert await ensure_dir(target) == target
        assert target.is_dir()
        await ensure_dir(target)  # idempotent


# -- sys_os_read ----------------------------------------------------------------------


async def test_read_whole_file_keeps_line_endings(work: Path) -> None:
    (work / "a.txt").write_bytes(b"one\r\ntwo\nthree")
    with trio.fail_after(5):
        result = ok(await sys_os_read(work, {"path": "a.txt"}))
    assert result == {
        "path": "a.txt",
        "content": "one\r\ntwo\nthree",
        "encoding": "utf-8",
        "offset": 0,
        "limit": 2000,
        "returned_lines": 3,
        "total_lines": 3,
    }


async def test_read_window(work: Path) -> None:
    (work / "n.txt").write_text("".join(f"{i}\n" for i in range(10)))
    with trio.fail_after(5):
        result = ok(await sys_os_read(work, {"path": "n.txt", "offset": 3, "limit": 2}))
        past_end = ok(await sys_os_read(work, {"path": "n.txt", "offset": 50}))
    assert result["content"] == "3\n4\n"
    assert (result["returned_lines"], result["total_lines"]) == (2, 10)
    assert (past_end["content"], past_end["returned_lines"]) == ("", 0)


async def test_read_absolute_path_inside(work: Path) -> None:
    (work / "sub").mkdir()
    (work / "sub" / "f").write_text("x")
    with trio.fail_after(5):
        result = ok(await sys_os_read(work, {"path": str(work / "sub" / "f")}))
    assert (result["path"], result["content"]) == (str(work / "sub" / "f"), "x")


async def test_read_undecodable_is_lossy(work: Path) -> None:
    (work / "bin").write_bytes(b"ok\xff\n")
    with trio.fail_after(5):
        result = ok(await sys_os_read(work, {"path": "bin"}))
    assert (result["content"], result["encoding"]) == ("ok\ufffd\n", "utf-8 (lossy)")


async def test_read_missing_and_directory(work: Path) -> None:
    (work / "d").mkdir()
    with trio.fail_after(5):
        missing = await sys_os_read(work, {"path": "nope.txt"})
        directory = await sys_os_read(work, {"path": "d"})
    assert missing.startswith("Error: cannot read 'nope.txt': no such file")
    assert directory.startswith("Error: cannot read 'd': it is a directory")


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({}, "'path' is required"),
        ({"path": 3}, "'path' must be a string, got integer"),
        ({"path": ""}, "'path' must not be empty"),
        ({"path": "a", "offset": -1}, "'offset' must be a non-negative integer"),
        ({"path": "a", "offset": True}, "'offset' must be a non-negative integer"),
        ({"path": "a", "limit": 0}, "'limit' must be a positive integer"),
        ({"path": "a", "limit": 1.5}, "'limit' must be a positive integer"),
        ({"path": "a", "mode": "r"}, "unknown argument 'mode' (expected: path, offset, limit)"),
    ],
)
async def test_read_invalid_arguments(work: Path, args: dict[str, Any], problem: str) -> None:
    with trio.fail_after(5):
        output = await sys_os_read(work, args)
    assert output.startswith("Error: invalid arguments for sys_os_read: ")
    assert problem in output


async def test_invalid_arguments_reports_every_problem(work: Path) -> None:
    with trio.fail_after(5):
        output = await sys_os_read(work, {"offset": "x", "extra": 1})
    assert "'path' is required" in output
    assert "'offset' must be" in output
    assert "unknown argument 'extra'" in output


async def test_arguments_must_be_an_object(work: Path) -> None:
    with trio.fail_after(5):
        output = await sys_os_read(work, ["path"])  # type: ignore[arg-type]
    assert output == (
        "Error: invalid arguments for sys_os_read: arguments must be an object, got array"
    )


# -- sys_os_write ---------------------------------------------------------------------


async def test_write_creates_parents_then_overwrites(work: Path) -> None:
    with trio.fail_after(5):
        first = ok(await sys_os_write(work, {"path": "a/b/c.txt", "content": "héllo\n"}))
        second = ok(await sys_os_write(work, {"path": "a/b/c.txt", "content": "x"}))
    assert first == {"path": "a/b/c.txt", "bytes_written": 7, "created": True}
    assert second == {"path": "a/b/c.txt", "bytes_written": 1, "created": False}
    assert (work / "a" / "b" / "c.txt").read_text() == "x"


async def test_write_through_symlink_inside_is_allowed(work: Path) -> None:
    (work / "real.txt").write_text("old")
    (work / "link.txt").symlink_to(work / "real.txt")
    with trio.fail_after(5):
        ok(await sys_os_write(work, {"path": "link.txt", "content": "new"}))
    assert (work / "real.txt").read_text() == "new"
    assert (work / "link.txt").is_symlink()


async def test_write_refuses_directories(work: Path) -> None:
    (work / "d").mkdir()
    with trio.fail_after(5):
        root = await sys_os_write(work, {"path": ".", "content": "x"})
        directory = await sys_os_write(work, {"path": "d", "content": "x"})
        missing = await sys_os_write(work, {"path": "a"})
    assert root.startswith("Error: cannot write '.': it is the working directory")
    assert directory.startswith("Error: cannot write 'd': it is a directory")
    assert missing == "Error: invalid arguments for sys_os_write: 'content' is required"


async def test_missing_working_directory(tmp_path: Path) -> None:
    with trio.fail_after(5):
        output = await sys_os_write(tmp_path / "gone", {"path": "a", "content": "x"})
    assert output.startswith(f"Error: the working directory {tmp_path / 'gone'} is not available")


# -- containment (read, write, edit) --------------------------------------------------


def _escape_path(work: Path, kind: str) -> str:
    outside = work.parent / "outside"
    if kind == "dotdot":
        return "../outside/secret.txt"
    if kind == "absolute":
        return str(outside / "secret.txt")
    if kind == "file_symlink":
        (work / "link.txt").symlink_to(outside / "secret.txt")
        return "link.txt"
    if kind == "dangling_symlink":
        (work / "link.txt").symlink_to(outside / "new.txt")
        return "link.txt"
    assert kind == "dir_symlink"
    (work / "linkdir").symlink_to(outside, target_is_directory=True)
    return "linkdir/secret.txt"


ESCAPES = ["dotdot", "absolute", "file_symlink", "dangling_symlink", "dir_symlink"]
TOOLS_ARGS: list[tuple[Tool, dict[str, Any]]] = [
    (sys_os_read, {}),
    (sys_os_write, {"content": "pwned\n"}),
    (sys_os_edit, {"oldText": "secret", "newText": "pwned"}),
]


@pytest.mark.parametrize("kind", ESCAPES)
@pytest.mark.parametrize(("tool", "extra"), TOOLS_ARGS, ids=["read", "write", "edit"])
async def test_escape_refused(work: Path, kind: str, tool: Tool, extra: dict[str, Any]) -> None:
    path = _escape_path(work, kind)
    outside = work.parent / "outside"
    before = sorted(p.name for p in outside.iterdir())
    with trio.fail_after(5):
        output = await tool(work, {"path": path, **extra})
    assert output.startswith(f"Error: path {path!r} is outside the working directory")
    assert "secret" not in output.split("(it resolves")[0].replace(path, "")
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert sorted(p.name for p in outside.iterdir()) == before


async def test_write_under_symlinked_dir_creates_nothing_outside(work: Path) -> None:
    outside = work.parent / "outside"
    (work / "linkdir").symlink_to(outside, target_is_directory=True)
    with trio.fail_after(5):
        output = await sys_os_write(work, {"path": "linkdir/deep/new.txt", "content": "x"})
    assert "is outside the working directory" in output
    assert not (outside / "deep").exists()


# -- sys_os_edit ----------------------------------------------------------------------


async def test_edit_single(work: Path) -> None:
    (work / "f.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    with trio.fail_after(5):
        result = ok(await sys_os_edit(work, {"path": "f.py", "oldText": "b = 2", "newText": "b=3"}))
    assert result == {"path": "f.py", "replacements": 1, "bytes_written": 12}
    assert (work / "f.py").read_bytes() == b"a = 1\r\nb=3\r\n"


async def test_edit_list_applies_in_order(work: Path) -> None:
    (work / "f").write_text("alpha beta\n")
    edits = [{"oldText": "alpha", "newText": "gamma"}, {"oldText": "gamma beta", "newText": "z"}]
    with trio.fail_after(5):
        result = ok(await sys_os_edit(work, {"path": "f", "edits": edits}))
    assert result["replacements"] == 2
    assert (work / "f").read_text() == "z\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"oldText": "missing", "newText": "x"}, "Error: oldText not found in f: 'missing'"),
        ({"oldText": "dup", "newText": "x"}, "Error: ambiguous: 2 matches of oldText in f"),
        (
            {"edits": [{"oldText": "one", "newText": "1"}, {"oldText": "nope", "newText": "2"}]},
            "Error: oldText not found in f (edit 1): 'nope'",
        ),
        (
            {"edits": [{"oldText": "one", "newText": "dup"}, {"oldText": "dup", "newText": "2"}]},
            "Error: ambiguous: 3 matches of oldText in f (edit 1)",
        ),
    ],
)
async def test_edit_failure_writes_nothing(work: Path, args: dict[str, Any], expected: str) -> None:
    (work / "f").write_text("one dup dup\n")
    with trio.fail_after(5):
        output = await sys_os_edit(work, {"path": "f", **args})
    assert output.startswith(expected), output
    assert "nothing was written" in output
    assert (work / "f").read_text() == "one dup dup\n"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"oldText": "a"}, "give oldText and newText together"),
        ({"oldText": "a", "newText": "b", "edits": [{"oldText": "a", "newText": "b"}]}, "not both"),
        ({"edits": []}, "'edits' must be a non-empty array"),
        ({"edits": [{"oldText": "a"}]}, "'edits' item 0 must be an object"),
        ({"edits": [{"oldText": "", "newText": "b"}]}, "'edits' item 0 needs a non-empty"),
        ({"oldText": "", "newText": "b"}, "'oldText' must not be empty"),
    ],
)
async def test_edit_invalid_arguments(work: Path, args: dict[str, Any], problem: str) -> None:
    (work / "f").write_text("a\n")
    with trio.fail_after(5):
        output = await sys_os_edit(work, {"path": "f", **args})
    assert output.startswith("Error: invalid arguments for sys_os_edit: ")
    assert problem in output
    assert (work / "f").read_text() == "a\n"


async def test_edit_refuses_non_utf8(work: Path) -> None:
    (work / "b").write_bytes(b"\xff\xfe")
    with trio.fail_after(5):
        output = await sys_os_edit(work, {"path": "b", "oldText": "a", "newText": "b"})
    assert output.startswith("Error: cannot edit 'b': it is not valid UTF-8")


# -- sys_os_shell ---------------------------------------------------------------------


async def test_shell_result(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIGENT_TEST_VAR", "inherited")
    command = 'pwd; echo "$OMNIGENT_TEST_VAR"; cat; echo oops >&2; exit 3'
    with trio.fail_after(10):
        result = ok(await sys_os_shell(work, {"command": command}))
    assert result == {
        "stdout": f"{work}\ninherited\n",  # tmp_path is already resolved
        "stderr": "oops\n",
        "exit_code": 3,
        "timed_out": False,
        "shell": "/bin/sh",
        "cwd": str(work),
    }


async def test_shell_timeout(work: Path) -> None:
    with trio.fail_after(10):
        result = ok(await sys_os_shell(work, {"command": "echo start; sleep 30", "timeout": 0.3}))
    assert (result["timed_out"], result["exit_code"], result["stdout"]) == (True, None, "start\n")


async def test_shell_output_cap(work: Path) -> None:
    command = "head -c 5000 /dev/zero | tr '\\0' a; head -c 30 /dev/zero | tr '\\0' b >&2"
    with trio.fail_after(10):
        result = ok(await sys_os_shell(work, {"command": command}, output_cap=1000))
    assert result["stdout"] == "a" * 1000 + "\n[… truncated 4000 bytes]"
    assert result["stderr"] == "b" * 30


async def test_shell_background_job_is_killed_at_exit(work: Path) -> None:
    # The background sleep holds stdout open; the call must not wait for it.
    command = "sleep 30 & echo $! > bg.pid; echo done"
    with trio.fail_after(5):
        result = ok(await sys_os_shell(work, {"command": command}))
    assert result["stdout"] == "done\n"
    assert _gone(int((work / "bg.pid").read_text()))


@pytest.mark.parametrize(
    "timeout", [0, -1, "5", True, 1e9, float("inf")], ids=["0", "-1", "str", "bool", "big", "inf"]
)
async def test_shell_invalid_timeout(work: Path, timeout: Any) -> None:
    with trio.fail_after(5):
        output = await sys_os_shell(work, {"command": "touch ran", "timeout": timeout})
    assert output.startswith("Error: invalid arguments for sys_os_shell: 'timeout' must be")
    assert not (work / "ran").exists()


def _gone(pid: int) -> bool:
    """Whether ``pid`` is dead: no such process, or a zombie waiting for its reaper."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


# The inner shell and its grandchild both ignore SIGTERM, so only the SIGKILL to the
# whole group (after the grace period) ends them.
STUBBORN = "sh -c 'trap \"\" TERM; echo $$ > sh.pid; sleep 1000 & echo $! > sleep.pid; wait'"


async def _wait_for_pids(work: Path) -> list[int]:
    while not all((work / f).exists() and (work / f).read_text() for f in ("sh.pid", "sleep.pid")):
        await trio.sleep(0.02)
    return [int((work / f).read_text()) for f in ("sh.pid", "sleep.pid")]


async def test_shell_cancel_kills_stubborn_group(work: Path) -> None:
    returned = False

    async def run() -> None:
        nonlocal returned
        await sys_os_shell(work, {"command": STUBBORN}, kill_grace=GRACE)
        returned = True

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            pids = await _wait_for_pids(work)
            assert not any(_gone(pid) for pid in pids)
            start = trio.current_time()
            nursery.cancel_scope.cancel()
        assert trio.current_time() - start >= GRACE  # SIGTERM was ignored: SIGKILL ended it
    assert not returned  # Cancelled propagated out of the tool
    assert all(_gone(pid) for pid in pids), pids


async def test_shell_timeout_kills_stubborn_group(work: Path) -> None:
    args = {"command": STUBBORN, "timeout": 0.5}
    with trio.fail_after(10):
        result = ok(await sys_os_shell(work, args, kill_grace=GRACE))
    assert (result["timed_out"], result["exit_code"]) == (True, None)
    pids = [int((work / f).read_text()) for f in ("sh.pid", "sleep.pid")]
    assert all(_gone(pid) for pid in pids), pids


@pytest.mark.parametrize(("tool", "extra"), TOOLS_ARGS, ids=["read", "write", "edit"])
async def test_fifo_is_refused_without_blocking(
    work: Path, tool: Tool, extra: dict[str, Any]
) -> None:
    os.mkfifo(work / "pipe")
    with trio.fail_after(5):
        output = await tool(work, {"path": "pipe", **extra})
    assert output.startswith("Error: cannot ")
    assert "'pipe': not a regular file" in output


async def test_the_directory_a_client_or_the_command_line_chose_wins_over_an_absolute_spec_cwd(
    tmp_path: Path,
) -> None:
    from omnigent.core.tools import ToolPlace, working_directory
    from omnigent.spec import AgentSpec

    chosen, spec_dir, started = tmp_path / "chosen", tmp_path / "spec", tmp_path / "started"
    for folder in (chosen, spec_dir, started):
        folder.mkdir()
    absolute = AgentSpec.from_dict({"name": "a", "os_env": {"cwd": str(spec_dir)}})
    relative = AgentSpec.from_dict({"name": "a", "os_env": {"cwd": "sub"}})
    place = ToolPlace(workspace=started, home=tmp_path / "home")
    cli = ToolPlace(workspace=started, home=tmp_path / "home", default_cwd=chosen)
    assert await working_directory(absolute, chosen, place, "conv_1") == chosen
    assert await working_directory(absolute, None, cli, "conv_1") == chosen
    assert await working_directory(absolute, None, place, "conv_1") == spec_dir  # nobody chose
    assert await working_directory(relative, chosen, place, "conv_1") == chosen / "sub"
