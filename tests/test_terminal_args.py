"""Terminals, the pure parts: tmux argument vectors, screens, idleness, tool arguments.

No tmux and no session here: the tool functions run over an in-memory
:class:`TerminalControl` double that records what it was asked to do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from omnigent.processes import _tmux as tmux
from omnigent.spec import AgentSpec, TerminalSpec
from omnigent.tools import terminals as term
from omnigent.tools.terminals import (
    TERMINAL_TOOL_SCHEMAS,
    Screen,
    TerminalInfo,
    ToolError,
    start_directory,
    sys_terminal_close,
    sys_terminal_launch,
    sys_terminal_list,
    sys_terminal_read,
    sys_terminal_send,
)

# -- tmux's command line ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "escaped"),
    [
        ("ls", "ls"),
        ("ls;", "ls\\;"),
        (";", "\\;"),
        ("a\\;", "a\\\\;"),  # tmux turns "a\\\;" back into "a\;"
        ("a; b", "a; b"),  # only a *trailing* ";" is special
        ("", ""),
    ],
)
def test_literal_escapes_only_a_trailing_semicolon(arg: str, escaped: str) -> None:
    assert tmux.literal(arg) == escaped


def test_new_session_argv_runs_the_command_exactly_as_written(tmp_path: Path) -> None:
    argv = tmux.new_session_argv(
        "omnigent_x", tmp_path / "a#b", "bash", ["-c", "echo hi;"], {"FOO": "x;"}
    )
    # The options are set before the session exists, in the same command sequence.
    assert argv.index("history-limit") < argv.index("new-session")
    assert argv[argv.index("-c") + 1] == str(tmp_path / "a##b")  # tmux formats "#"
    tail = argv[argv.index("--") + 1 :]
    assert tail == [
        "env",
        "FOO=x\\;",
        "/bin/sh",
        "-c",
        'exec "$0" "$@"',
        "bash",
        "-c",
        "echo hi\\;",
    ]
    assert argv.count(";") == 3  # only our own separators, before new-session
    assert argv.index("new-session") > max(i for i, a in enumerate(argv) if a == ";")


def test_send_and_capture_argv() -> None:
    assert tmux.send_text_argv("%3", "-x;") == ["send-keys", "-t", "%3", "-l", "--", "-x\\;"]
    assert tmux.send_keys_argv("%3", ["C-c", "Enter"]) == [
        "send-keys",
        "-t",
        "%3",
        "--",
        "C-c",
        "Enter",
    ]
    assert tmux.capture_argv("%3") == ["capture-pane", "-p", "-t", "%3"]
    assert tmux.capture_argv("%3", 50)[-2:] == ["-S", "-50"]
    assert tmux.kill_session_argv("omnigent_x") == ["kill-session", "-t", "=omnigent_x"]
    assert tmux.list_panes_argv()[:2] == ["list-panes", "-a"]


def test_parsing_what_tmux_prints() -> None:
    assert tmux.parse_new_pane("%12 4567\n") == tmux.NewPane("%12", 4567)
    for bad in ("", "%1", "12 34", "%1 x", "%1 2 3"):
        with pytest.raises(ValueError):
            tmux.parse_new_pane(bad)
    assert tmux.parse_pane_pids("12\n34\njunk\n") == [12, 34]
    assert tmux.reports_gone("can't find pane: %4")
    assert tmux.reports_gone("no server running on /tmp/x/tmux.sock")
    assert not tmux.reports_gone("unknown key: Bogus")


def test_keys_and_session_keys() -> None:
    assert tmux.parse_keys("C-c  Enter") == ["C-c", "Enter"]
    assert tmux.parse_keys("") == []
    with pytest.raises(ValueError, match="at most"):
        tmux.parse_keys("a " * (tmux.MAX_KEYS + 1))
    with pytest.raises(ValueError, match="not a key name"):
        tmux.parse_keys("Entér")
    assert tmux.check_session_key("s1.a-b_c") is None
    for bad in ("", "-s", "a b", "a/b", "x" * 65):
        assert tmux.check_session_key(bad) is not None
    assert tmux.resource_id("bash", "s_1") == "terminal_bash_s_1"


def test_terminal_names_cannot_make_ambiguous_resource_ids() -> None:
    with pytest.raises(Exception, match=r"terminals\.a_b"):
        AgentSpec.from_dict({"name": "x", "terminals": {"a_b": {"command": "sh"}}})
    with pytest.raises(Exception, match=r"terminals\.t\.env\.1X"):
        AgentSpec.from_dict({"name": "x", "terminals": {"t": {"command": "sh", "env": {"1X": ""}}}})
    spec = AgentSpec.from_dict(
        {"name": "x", "terminals": {"t": {"command": "sh", "idle_after": 0}}}
    )
    assert spec.terminals["t"].idle_seconds is None
    assert AgentSpec.from_dict(spec.to_dict()) == spec
    assert TerminalSpec(command="sh").idle_seconds == 5.0


# -- screens --------------------------------------------------------------------------------


def test_trim_screen_drops_blank_rows_and_keeps_the_newest_text() -> None:
    assert tmux.trim_screen("$ ls\na\n\n\n") == ("$ ls\na", False)
    text, cut = tmux.trim_screen("\n".join(f"line {i}" for i in range(100)), limit=30)
    assert cut and text.endswith("line 99") and len(text) <= 30
    assert text.startswith("line")  # cut at a line boundary


def test_digest_looks_at_the_visible_rows_only() -> None:
    screen = "".join(f"row {i}\n" for i in range(tmux.PANE_HEIGHT))
    with_history = "old 1\nold 2\n" + screen
    assert tmux.screen_digest(with_history) == tmux.screen_digest(screen)
    assert tmux.screen_digest(screen) != tmux.screen_digest(screen.replace("row 3", "row x"))


def test_idle_fires_once_after_unread_activity_settles() -> None:
    idle = tmux.IdleDetector(idle_after=2.0)
    assert not idle.observe("a", 0.0)  # first sight counts as a change
    assert not idle.observe("a", 1.9)
    assert idle.observe("a", 2.0)
    assert not idle.observe("a", 10.0)  # once per settled screen
    assert not idle.observe("b", 11.0)
    assert not idle.observe("c", 12.0)  # still changing
    assert not idle.observe("c", 13.9)
    assert idle.observe("c", 14.0)


def test_idle_does_not_fire_for_a_screen_the_agent_read() -> None:
    idle = tmux.IdleDetector(idle_after=1.0)
    idle.observe("a", 0.0)
    idle.mark_seen("a")
    assert not idle.observe("a", 5.0)
    assert not idle.observe("b", 6.0)
    assert idle.observe("b", 7.0)


def test_a_screen_that_never_settles_never_fires() -> None:
    idle = tmux.IdleDetector(idle_after=1.0)
    assert not any(idle.observe(str(t), t * 0.5) for t in range(100))


# -- the tools' arguments, over a double ----------------------------------------------------


@attrs.define
class FakeControl:
    """A TerminalControl in memory: one declared terminal ``bash``."""

    root: Path
    specs: Mapping[str, TerminalSpec] = attrs.field(
        factory=lambda: {"bash": TerminalSpec(command="bash", cwd="sub")}
    )
    calls: list[tuple[Any, ...]] = attrs.field(factory=list)
    live: set[tuple[str, str]] = attrs.field(factory=set)

    async def start_directory(self, spec_cwd: str | None, raw: str | None) -> Path:
        return await trio.to_thread.run_sync(start_directory, self.root, spec_cwd, raw)

    async def launch(self, terminal: str, session: str, cwd: Path) -> tuple[TerminalInfo, bool]:
        self.calls.append(("launch", terminal, session, cwd))
        already = (terminal, session) in self.live
        self.live.add((terminal, session))
        return TerminalInfo(terminal, session, "bash", str(cwd)), already

    async def send(self, terminal: str, session: str, text: str, keys: Sequence[str]) -> None:
        if (terminal, session) not in self.live:
            raise ToolError("not running")
        self.calls.append(("send", terminal, session, text, list(keys)))

    async def read(self, terminal: str, session: str, scrollback: int) -> Screen:
        self.calls.append(("read", terminal, session, scrollback))
        return Screen("$ ", scrollback, False)

    def running(self) -> list[TerminalInfo]:
        return [TerminalInfo(t, s, "bash", "/") for t, s in sorted(self.live)]

    async def close(self, terminal: str, session: str) -> bool:
        self.calls.append(("close", terminal, session))
        was_running = (terminal, session) in self.live
        self.live.discard((terminal, session))
        return was_running


@pytest.fixture
def control(tmp_path: Path) -> FakeControl:
    (tmp_path / "sub").mkdir()
    (tmp_path / "other").mkdir()
    return FakeControl(tmp_path)


def test_schemas_name_exactly_the_accepted_arguments() -> None:
    fields = {
        "sys_terminal_launch": term._LAUNCH_ARGS,
        "sys_terminal_send": term._SEND_ARGS,
        "sys_terminal_read": term._READ_ARGS,
        "sys_terminal_list": (),
        "sys_terminal_close": term._TARGET,
    }
    assert set(TERMINAL_TOOL_SCHEMAS) == set(fields) == set(term.TERMINAL_TOOLS)
    for name, schema in TERMINAL_TOOL_SCHEMAS.items():
        assert schema["description"] and "\n" not in schema["description"]
        params = schema["parameters"]
        assert set(params["properties"]) == {f.name for f in fields[name]}
        assert set(params["required"]) == {f.name for f in fields[name] if f.required}
        assert params["additionalProperties"] is False


async def test_launch_resolves_the_start_directory(control: FakeControl) -> None:
    out = json.loads(await sys_terminal_launch(control, {"terminal": "bash", "session": "s1"}))
    assert out["status"] == "launched" and out["resource_id"] == "terminal_bash_s1"
    assert control.calls[-1][3] == (control.root / "sub").resolve()  # the spec's cwd
    again = {"terminal": "bash", "session": "s1", "cwd": "other"}
    out = json.loads(await sys_terminal_launch(control, again))
    assert out["status"] == "already_running"
    assert control.calls[-1][3] == (control.root / "other").resolve()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"terminal": "zsh", "session": "s1"},
            "unknown terminal 'zsh' (declared in the spec: bash)",
        ),
        ({"terminal": "bash"}, "'session' is required"),
        ({"terminal": "bash", "session": "a b"}, "'session' must be 1-64 letters"),
        ({"terminal": "bash", "session": "s", "cwd": "/"}, "is outside the working directory"),
        ({"terminal": "bash", "session": "s", "cwd": "../.."}, "is outside the working directory"),
        ({"terminal": "bash", "session": "s", "cwd": "missing"}, "not an existing directory"),
        ({"terminal": "bash", "session": "s", "cwd": 3}, "'cwd' must be a string"),
        ({"terminal": "bash", "session": "s", "shell": "x"}, "unknown argument 'shell'"),
    ],
)
async def test_launch_refuses_bad_arguments(
    control: FakeControl, args: dict[str, Any], message: str
) -> None:
    output = await sys_terminal_launch(control, args)
    assert output.startswith("Error: ") and message in output, output
    assert control.calls == []  # nothing was started


async def test_a_spec_cwd_outside_the_workspace_is_refused(control: FakeControl) -> None:
    control.specs = {"bash": TerminalSpec(command="bash", cwd="/")}
    output = await sys_terminal_launch(control, {"terminal": "bash", "session": "s"})
    assert output.startswith("Error: the terminal's cwd in the spec '/' is not usable")
    assert control.calls == []


async def test_send_defaults_to_enter_and_checks_text_and_keys(control: FakeControl) -> None:
    target = {"terminal": "bash", "session": "s1"}
    assert (await sys_terminal_send(control, {**target, "text": "ls"})).startswith("Error: ")
    await sys_terminal_launch(control, target)
    assert json.loads(await sys_terminal_send(control, {**target, "text": "ls"}))["status"] == (
        "sent"
    )
    await sys_terminal_send(control, {**target, "keys": ""})
    await sys_terminal_send(control, {**target, "text": "q", "keys": "C-c Up"})
    sends = [c[3:] for c in control.calls if c[0] == "send"]
    assert sends == [("ls", ["Enter"]), ("", []), ("q", ["C-c", "Up"])]
    for bad, message in [
        ({"text": 5}, "'text' must be a string"),
        ({"text": "x" * (tmux.MAX_TEXT_CHARS + 1)}, "'text' must be at most"),
        ({"text": "a\x00b"}, "NUL"),
        ({"text": "\ud800"}, "lone surrogate"),
        ({"keys": "Entér"}, "not a key name"),
        ({"keys": ["Enter"]}, "'keys' must be a string"),
    ]:
        output = await sys_terminal_send(control, {**target, **bad})
        assert output.startswith("Error: invalid arguments for sys_terminal_send") and message in (
            output
        ), output
    assert len([c for c in control.calls if c[0] == "send"]) == 3


async def test_read_list_close(control: FakeControl) -> None:
    target = {"terminal": "bash", "session": "s1"}
    await sys_terminal_launch(control, target)
    read = json.loads(await sys_terminal_read(control, {**target, "scrollback": 10}))
    assert read == {
        "terminal": "bash",
        "session": "s1",
        "screen": "$ ",
        "scrollback_lines": 10,
        "truncated": False,
    }
    too_far = await sys_terminal_read(control, {**target, "scrollback": tmux.HISTORY_LIMIT + 1})
    assert too_far.startswith("Error: ") and "at most" in too_far
    negative = await sys_terminal_read(control, {**target, "scrollback": -1})
    assert negative.startswith("Error: ")
    listed = json.loads(await sys_terminal_list(control, {}))
    assert [t["resource_id"] for t in listed] == ["terminal_bash_s1"]
    assert (await sys_terminal_list(control, {"x": 1})).startswith("Error: ")
    closed = json.loads(await sys_terminal_close(control, target))
    assert closed["status"] == "closed"
    unknown = await sys_terminal_close(control, {"terminal": "nope", "session": "s1"})
    assert unknown.startswith("Error: unknown terminal 'nope'")
    assert (await sys_terminal_close(control, "not an object")).startswith(  # type: ignore[arg-type]
        "Error: invalid arguments for sys_terminal_close: arguments must be an object"
    )
