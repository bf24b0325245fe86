"""The ``omnigent`` command line: rendering (pure), commands in-process, and subprocesses.

``main()`` calls ``trio.run`` itself, so the command tests are plain sync tests.
"""

from __future__ import annotations

import io
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
import yaml

import omnigent
from omnigent._config import default_db_url
from omnigent.cli import main
from omnigent.cli._prompt import Approvals as _Approvals
from omnigent.cli._prompt import Lines as _Lines
from omnigent.cli._render import (
    Chunk,
    ElicitationDialog,
    Reply,
    TurnRenderer,
    auto_reply,
    describe_request,
    elicitation_owner,
    format_agents,
    format_error,
    format_sessions,
    iso_time,
    one_line,
    parse_approval,
    questions_of,
    withdrawn_note,
)
from omnigent.cli._report import report as _report
from omnigent.errors import BadRequest, HarnessError, SpecError
from omnigent.model import (
    ElicitationParams,
    ElicitationRequest,
    ErrorInfo,
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    OutputItemDone,
    OutputText,
    OutputTextDelta,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    ResponseInfo,
    SessionStatusChanged,
)

REPO = Path(__file__).resolve().parent.parent
SUBPROCESS_TIMEOUT = 60


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every command uses a fresh default database under ``tmp_path``."""
    monkeypatch.delenv("OMNIGENT_DB", raising=False)
    monkeypatch.setenv("OMNIGENT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def spec_file(tmp_path: Path, script: list[Any], name: str = "bot", **extra: Any) -> str:
    spec = {
        "name": name,
        "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": script}},
        **extra,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def session_snapshots(db: str) -> list[omnigent.SessionSnapshot]:
    async def read() -> list[omnigent.SessionSnapshot]:
        async with omnigent.open_runtime(db=db) as rt:
            return list((await rt.list_sessions()).data)

    return trio.run(read)


# -- rendering (pure) -------------------------------------------------------------------

RESPONSE = ResponseInfo(id="resp_1", status="completed")


def delta(text: str, item_id: str = "item_1") -> OutputTextDelta:
    return OutputTextDelta(response_id="resp_1", item_id=item_id, delta=text)


def render(events: list[Any]) -> tuple[str, str, int]:
    renderer = TurnRenderer()
    chunks: list[Chunk] = []
    for event in events:
        chunks += renderer.feed(event)
    chunks += renderer.finish()
    out = "".join(c.text for c in chunks if c.stream == "stdout")
    err = "".join(c.text for c in chunks if c.stream == "stderr")
    return out, err, renderer.exit_code


def test_render_streams_text_and_ends_the_line() -> None:
    out, err, code = render([delta("Hello "), delta("world"), ResponseCompleted(response=RESPONSE)])
    assert (out, err, code) == ("Hello world\n", "", 0)


def test_render_adds_no_newline_after_text_that_ends_in_one() -> None:
    out, _, _ = render([delta("done\n"), ResponseCompleted(response=RESPONSE)])
    assert out == "done\n"


def test_render_separates_messages_and_tool_lines() -> None:
    call = FunctionCallItem(call_id="c1", name="add", arguments='{"a": 1, "b": 2}')
    output = FunctionCallOutputItem(call_id="c1", output="3")
    message = MessageItem(role="assistant", content=(OutputText("thinking"),))
    out, err, code = render(
        [
            delta("thinking", "item_1"),
            OutputItemDone(item=message),
            OutputItemDone(item=call),
            OutputItemDone(item=attrs.evolve(call, status="completed")),
            OutputItemDone(item=output),
            delta("the answer is 3", "item_2"),
            ResponseCompleted(response=RESPONSE),
        ]
    )
    assert out == "thinking\nthe answer is 3\n"
    assert err == '→ add({"a": 1, "b": 2})\n← 3\n'
    assert code == 0


def test_render_two_messages_without_a_tool_in_between_get_their_own_lines() -> None:
    out, _, _ = render([delta("one", "a"), delta("two", "b"), ResponseCompleted(response=RESPONSE)])
    assert out == "one\ntwo\n"


def test_render_failed_turn() -> None:
    failed = ResponseFailed(
        response=ResponseInfo(id="resp_1", status="failed"), error=ErrorInfo("boom", "x")
    )
    out, err, code = render([delta("partial"), failed])
    assert (out, err, code) == ("partial\n", "Error: boom\n", 1)


def test_render_cancelled_turn() -> None:
    cancelled = ResponseCancelled(response=ResponseInfo(id="resp_1", status="cancelled"))
    assert render([cancelled]) == ("", "Interrupted.\n", 130)


def test_render_a_dropped_message_ends_on_the_session_status() -> None:
    assert render([SessionStatusChanged(status="cancelled")])[2] == 130
    failed = SessionStatusChanged(status="failed", error=ErrorInfo("gone", "x"))
    assert render([failed])[1:] == ("Error: gone\n", 1)


def test_render_a_stream_without_an_ending_is_a_failure() -> None:
    assert render([delta("hi")]) == ("hi\n", "Error: the turn ended without a result\n", 1)


def test_render_interrupted_reader() -> None:
    renderer = TurnRenderer()
    renderer.feed(delta("hi"))
    renderer.note_interrupted()
    assert renderer.finish() == [Chunk("stdout", "\n"), Chunk("stderr", "Interrupted.\n")]
    assert renderer.exit_code == 130


def test_one_line_collapses_whitespace_and_truncates() -> None:
    assert one_line('{\n  "a": 1\n}') == '{ "a": 1 }'
    long = one_line("x" * 500)
    assert len(long) == 200
    assert long.endswith("…")


def test_listings() -> None:
    assert format_agents([]) == ["no agents"]
    assert format_sessions([]) == ["no sessions"]
    assert iso_time(0) == "1970-01-01T00:00:00Z"
    agents = [
        omnigent.Agent("agent_1", "a", 1, "", "scripted", None, 0.0).to_dict(),
        omnigent.Agent("agent_22", "bb", 12, "", "loop", "gpt-4o-mini", 0.0).to_dict(),
    ]
    assert format_agents(agents) == [
        "agent_1   a   v1   scripted  -",
        "agent_22  bb  v12  loop      gpt-4o-mini",
    ]


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (KeyboardInterrupt(), 130, "Interrupted."),
        (BaseExceptionGroup("g", [KeyboardInterrupt(), KeyboardInterrupt()]), 130, "Interrupted."),
        (ExceptionGroup("g", [ExceptionGroup("h", [BadRequest("no")])]), 2, "Error: no"),
        (HarnessError("down"), 1, "Error: down"),
    ],
)
def test_report_maps_errors_to_exit_codes(
    error: BaseException, code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _report(error) == code
    assert capsys.readouterr().err == message + "\n"


def test_report_reraises_bugs() -> None:
    bug = ExceptionGroup("g", [ValueError("bug"), BadRequest("no")])
    with pytest.raises(ExceptionGroup):
        _report(bug)


def test_format_error_lists_spec_details() -> None:
    with pytest.raises(SpecError) as info:
        omnigent.AgentSpec.from_dict({"name": "Bad Name", "bogus": 1})
    lines = format_error(info.value)
    assert lines[0].startswith("Error: ")
    assert "  bogus: " in "\n".join(lines)
    assert any(line.startswith("  name: ") for line in lines)


# -- approvals: rendering and parsing (pure) --------------------------------------------


def approval_request(**params: Any) -> ElicitationRequest:
    fields: dict[str, Any] = {"mode": "form", "message": "ask_add: read a file?", "phase": "x"}
    return ElicitationRequest(
        elicitation_id="elicit_1", params=ElicitationParams(**(fields | params))
    )


TOOL_REQUEST = approval_request(
    tool_name="sys_os_read", tool_input={"path": "x.txt"}, policy_name="ask_add"
)
QUESTIONS = {
    "questions": [
        {
            "question": "Which store?",
            "header": "Store",
            "options": [{"label": "SQLite", "description": "simple"}, {"label": "Redis"}],
        },
        {
            "question": "Which extras?",
            "options": ["logs", "metrics", "traces"],
            "multiSelect": True,
        },
        {"header": "no question text: skipped"},
    ]
}


def test_describe_request_shows_message_tool_policy_and_owner() -> None:
    assert describe_request(TOOL_REQUEST) == (
        '? ask_add: read a file?\n  tool:    sys_os_read({"path": "x.txt"})\n  policy:  ask_add\n'
    )
    mirrored = approval_request(message="may I?", target_session_id="conv_child")
    assert describe_request(mirrored) == "? may I?\n  session: conv_child (a sub-session)\n"
    big = approval_request(tool_name="t", tool_input={"text": "x " * 500})
    assert len(describe_request(big).splitlines()[1]) < 220


def test_elicitation_owner_is_the_target_session_if_mirrored() -> None:
    assert elicitation_owner(TOOL_REQUEST, "conv_me") == "conv_me"
    mirrored = approval_request(target_session_id="conv_child")
    assert elicitation_owner(mirrored, "conv_me") == "conv_child"


@pytest.mark.parametrize(
    ("line", "action"),
    [
        ("y", "accept"),
        (" YES ", "accept"),
        ("n", "decline"),
        ("No", "decline"),
        ("", "decline"),
        (None, "cancel"),
        ("maybe", None),
    ],
)
def test_parse_approval(line: str | None, action: str | None) -> None:
    assert parse_approval(line) == action


def test_approval_dialog_asks_again_until_it_understands() -> None:
    dialog = ElicitationDialog(TOOL_REQUEST)
    assert dialog.opening() == describe_request(TOOL_REQUEST)
    assert dialog.next_prompt() == "Approve? [y/N] "
    assert dialog.answer("maybe") == "Please answer y or n.\n"
    assert dialog.next_prompt() == "Approve? [y/N] "
    assert dialog.answer("y") == ""
    assert (dialog.reply, dialog.next_prompt()) == (Reply("accept"), None)


def test_approval_dialog_end_of_input_cancels() -> None:
    dialog = ElicitationDialog(TOOL_REQUEST)
    assert dialog.answer(None) == "(end of input: cancelled)\n"
    assert dialog.reply == Reply("cancel")


def test_questions_of_reads_claude_code_questions_and_skips_malformed_ones() -> None:
    first, second = questions_of(QUESTIONS)
    assert (first.text, first.header, first.multi) == ("Which store?", "Store", False)
    assert first.options == (("SQLite", "simple"), ("Redis", ""))
    assert second.options == (("logs", ""), ("metrics", ""), ("traces", ""))
    assert second.multi
    assert questions_of(None) == questions_of({"questions": "nope"}) == []


def test_question_dialog_shows_options_and_collects_answers() -> None:
    dialog = ElicitationDialog(approval_request(message="Questions", ask_user_question=QUESTIONS))
    assert dialog.next_prompt() == (
        "  [Store] Which store?\n    1. SQLite — simple\n    2. Redis\nChoose 1-2: "
    )
    assert dialog.answer("3") == "Please choose 1-2, or type your own answer.\n"
    assert dialog.next_prompt() == "Choose 1-2: "  # the question is not shown again
    assert dialog.answer("1,2") != ""  # one option only
    assert dialog.answer("2") == ""
    assert dialog.next_prompt() == (
        "  Which extras?\n    1. logs\n    2. metrics\n    3. traces\nChoose one or more of 1-3: "
    )
    assert dialog.answer("3, 1") == ""
    assert dialog.reply == Reply(
        "accept", {"Which store?": "Redis", "Which extras?": "traces, logs"}
    )


@pytest.mark.parametrize(
    ("line", "reply"),
    [
        ("Postgres, please", Reply("accept", {"Which store?": "Postgres, please"})),
        ("", Reply("decline")),
        (None, Reply("cancel")),
    ],
)
def test_question_dialog_own_answer_empty_and_end_of_input(line: str | None, reply: Reply) -> None:
    one = {"questions": QUESTIONS["questions"][:1]}
    dialog = ElicitationDialog(approval_request(ask_user_question=one))
    dialog.next_prompt()
    dialog.answer(line)
    assert dialog.reply == reply


def test_auto_reply() -> None:
    question = approval_request(
        message="Pick one",
        tool_name="AskUserQuestion",
        tool_input=QUESTIONS,
        ask_user_question=QUESTIONS,
    )
    assert auto_reply(TOOL_REQUEST, "yes") == (
        Reply("accept"),
        '✓ approved (--yes): sys_os_read({"path": "x.txt"})\n',
    )
    assert auto_reply(TOOL_REQUEST, "no-input") == (
        Reply("decline"),
        '✗ declined (--no-input): sys_os_read({"path": "x.txt"})\n',
    )
    # --yes approves; it does not make up answers.
    assert auto_reply(question, "yes") == (Reply("decline"), "✗ declined (--yes): Pick one\n")


def test_withdrawn_note() -> None:
    assert withdrawn_note("accept") == "(answered elsewhere: accept)\n"
    assert withdrawn_note("expired") == "(withdrawn)\n"
    assert withdrawn_note(None) == "(already answered or withdrawn)\n"


def test_renderer_breaks_a_line_of_text_for_a_prompt() -> None:
    renderer = TurnRenderer()
    renderer.feed(delta("Let me look"))
    assert renderer.break_line() == [Chunk("stdout", "\n")]
    assert renderer.break_line() == []
    assert renderer.feed(delta(" again")) == [Chunk("stdout", " again")]


# -- commands, in process ---------------------------------------------------------------


SESSION_NOTE = re.compile(r"session (conv_\w+) \(continue it with --session \1\)\n")


def without_session_note(err: str) -> str:
    """A ``run``'s stderr without its last line, which names the session it used."""
    lines = err.splitlines(keepends=True)
    assert lines and SESSION_NOTE.fullmatch(lines[-1]), err
    return "".join(lines[:-1])


def test_default_db_url(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    assert default_db_url() == f"sqlite:///{home / 'omnigent.db'}"
    monkeypatch.setenv("OMNIGENT_DB", "sqlite:///elsewhere.db")
    assert default_db_url() == "sqlite:///elsewhere.db"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"omnigent {omnigent.__version__}"


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: omnigent" in capsys.readouterr().err


def test_run_streams_scripted_text(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = spec_file(tmp_path, [{"say": "Hello there, friend."}])
    assert main(["run", path, "hi"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Hello there, friend.\n"
    assert without_session_note(captured.err) == ""
    assert (home / "omnigent.db").exists()


def test_run_failing_step_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, [{"say": "trying"}, {"fail": "the disk is on fire"}])
    assert main(["run", path, "hi"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "trying\n"
    assert without_session_note(captured.err) == "Error: the disk is on fire\n"


def test_run_shows_tool_calls_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, [{"call": "add", "args": {"a": 1, "b": 2}}, {"say": "done"}])
    assert main(["run", path, "hi"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "done\n"
    call_line, output_line = without_session_note(captured.err).splitlines()
    assert call_line == '→ add({"a": 1, "b": 2})'
    assert output_line.startswith("← Error: unknown tool 'add'")


def test_run_model_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    path = spec_file(tmp_path, [{"say": "ok"}])
    assert main(["run", path, "hi", "--db", db, "--model", "my-model"]) == 0
    [session] = session_snapshots(db)
    assert session.model_override == "my-model"
    assert main(["run", path, "hi", "--db", db, "--model", "bad model!"]) == 2
    assert "model_override" in capsys.readouterr().err


def test_run_verbose_logs_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, [{"say": "ok"}])
    assert main(["-v", "run", path, "hi"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "ok\n"
    assert "INFO omnigent.cli: session conv_" in captured.err


ASK_READ = {
    "name": "ask_add",
    "type": "ask_tools",
    "tools": ["sys_os_read"],
    "reason": "read a file?",
}
READ_X = [{"call": "sys_os_read", "args": {"path": "x.txt"}}, {"say": "done"}]


def asking_spec(tmp_path: Path, script: list[Any] = READ_X) -> str:
    """An agent that reads ``x.txt`` (``hello from x``) under an ``ask_tools`` policy."""
    (tmp_path / "x.txt").write_text("hello from x\n", encoding="utf-8")
    return spec_file(
        tmp_path, script, name="asker", os_env={"cwd": str(tmp_path)}, policies=[ASK_READ]
    )


def test_run_yes_approves_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where `omnigent run` runs is where its tools act
    assert main(["run", asking_spec(tmp_path), "hi", "--yes"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "done\n"
    call, approved, output = without_session_note(captured.err).splitlines()
    assert call == '→ sys_os_read({"path": "x.txt"})'
    assert approved == '✓ approved (--yes): sys_os_read({"path": "x.txt"})'
    assert output.startswith("← {") and "hello from x" in output


def test_run_no_input_declines_without_asking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", _ExplodingStdin())
    assert main(["run", asking_spec(tmp_path), "hi", "--no-input"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "done\n"
    _, declined, output = without_session_note(captured.err).splitlines()
    assert declined == '✗ declined (--no-input): sys_os_read({"path": "x.txt"})'
    assert output.startswith("← Error: denied by policy ask_add")


def test_run_works_where_it_is_run_not_in_an_absolute_spec_cwd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The directory the command line chose wins over an absolute ``os_env.cwd`` (the
    original's "absolute spec cwds are session-create-time boundaries")."""
    here = tmp_path / "here"
    here.mkdir()
    (here / "x.txt").write_text("hello from here\n", encoding="utf-8")
    monkeypatch.chdir(here)
    assert main(["run", asking_spec(tmp_path), "hi", "--yes"]) == 0  # spec cwd: tmp_path
    assert "hello from here" in capsys.readouterr().err


class _ExplodingStdin:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"stdin.{name} used")


def test_run_yes_and_no_input_exclude_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", asking_spec(tmp_path), "hi", "--yes", "--no-input"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_run_without_stdin_cancels_the_approval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stdin with no file descriptor is at its end: the prompt cancels, nothing hangs."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    # The approval is asked after text of the same turn: that line is closed first.
    path = asking_spec(tmp_path, [{"say": "Let me look."}, *READ_X])
    assert main(["run", path, "hi"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "Let me look.\ndone\n"
    assert "Approve? [y/N] \n(end of input: cancelled)\n← Error: denied by policy" in captured.err


class _InterruptOnWrite:
    """A stdout that presses Ctrl-C ``presses`` times once the turn has printed something."""

    def __init__(self, presses: int) -> None:
        self.presses = presses
        self.text = ""

    def write(self, text: str) -> int:
        if not self.text:
            for _ in range(self.presses):
                signal.raise_signal(signal.SIGINT)
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="SIGINT is not Python's to handle here",
)
@pytest.mark.parametrize("presses", [1, 2], ids=["interrupt", "give-up"])
def test_ctrl_c_interrupts_the_turn(
    presses: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One Ctrl-C interrupts the turn; a second stops waiting (the runtime still closes)."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    # If the interrupt were lost, the sleep bounds the test and "never" fails it.
    path = spec_file(tmp_path, [{"say": "start"}, {"sleep": 20}, {"say": "never"}])
    stdout = _InterruptOnWrite(presses)
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["run", path, "hi", "--db", db]) == 130
    assert stdout.text == "start\n"
    assert without_session_note(capsys.readouterr().err) == "Interrupted.\n"
    [session] = session_snapshots(db)
    assert session.status == "cancelled"


class _InterruptAtPrompt:
    """A stderr that presses Ctrl-C when the approval prompt is printed."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        if text == "Approve? [y/N] ":
            signal.raise_signal(signal.SIGINT)
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="SIGINT is not Python's to handle here",
)
def test_ctrl_c_at_the_prompt_withdraws_it_and_interrupts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompt waits on a pipe nobody writes to; Ctrl-C must still end the turn."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    read_fd, write_fd = os.pipe()
    monkeypatch.setattr("omnigent.cli._run._stdin_lines", lambda: _Lines(read_fd))
    stderr = _InterruptAtPrompt()
    monkeypatch.setattr(sys, "stderr", stderr)
    try:
        assert main(["run", asking_spec(tmp_path), "hi", "--db", db]) == 130
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert without_session_note(stderr.text).endswith(
        "Approve? [y/N] \n(withdrawn)\nInterrupted.\n"
    )
    [session] = session_snapshots(db)
    assert session.status == "cancelled"


async def _child_turn_answered_from_its_parent(
    tmp_path: Path, typed: bytes, *, resolve_elsewhere: str | None = None
) -> list[str]:
    """A child session asks; ``_Approvals`` on its *parent's* stream answers.

    ``typed`` is what the terminal receives; with ``resolve_elsewhere`` the test
    answers for the child itself once the prompt is open. Returns the child's tool
    outputs.
    """
    spec = omnigent.AgentSpec.load(asking_spec(tmp_path))
    read_fd, write_fd = os.pipe()
    os.write(write_fd, typed)
    outputs: list[str] = []
    try:
        async with omnigent.open_runtime(db=None) as rt:
            agent = await rt.create_agent(spec)
            parent = await rt.create_session(agent.id)
            child = await rt.create_session(agent.id, parent_session_id=parent.id)
            approvals = _Approvals(rt, parent.id, TurnRenderer(), "ask", lambda: _Lines(read_fd))
            with trio.fail_after(10):
                async with (
                    rt.subscribe(parent.id) as parent_events,
                    rt.open_turn_stream(child.id, "hi") as (_, child_events),
                    trio.open_nursery() as nursery,
                ):
                    nursery.start_soon(_feed_forever, parent_events, approvals)
                    nursery.start_soon(approvals.run)
                    async for event in child_events:
                        if isinstance(event, ElicitationRequest) and resolve_elsewhere:
                            await trio.testing.wait_all_tasks_blocked()
                            await rt.resolve_elicitation(
                                child.id, event.elicitation_id, resolve_elsewhere
                            )
                        if isinstance(event, OutputItemDone) and isinstance(
                            event.item, FunctionCallOutputItem
                        ):
                            outputs.append(event.item.output)
                    nursery.cancel_scope.cancel()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    return outputs


async def _feed_forever(events: Any, approvals: _Approvals) -> None:
    async for event in events:
        approvals.feed(event)


async def test_a_sub_session_prompt_is_answered_under_its_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [output] = await _child_turn_answered_from_its_parent(tmp_path, b"y\n")
    assert "hello from x" in output
    err = capsys.readouterr().err
    assert "  session: conv_" in err
    assert err.endswith("Approve? [y/N] y\n")


async def test_a_prompt_answered_elsewhere_is_abandoned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [output] = await _child_turn_answered_from_its_parent(
        tmp_path, b"", resolve_elsewhere="decline"
    )
    assert output.startswith("Error: denied by policy ask_add")
    assert capsys.readouterr().err.endswith("Approve? [y/N] \n(answered elsewhere: decline)\n")


async def test_lines_of_a_pipe_a_file_and_dev_null(tmp_path: Path) -> None:
    """Pipes are polled (cancellable); files and devices that never block are read."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"yes\r\nn\xffo\nlast")
    os.close(write_fd)
    answers = tmp_path / "answers"
    answers.write_bytes(b"y\n")
    file_fd = os.open(answers, os.O_RDONLY)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    try:
        with trio.fail_after(5):
            pipe = _Lines(read_fd)
            assert [await pipe.readline() for _ in range(4)] == ["yes", "n\ufffdo", "last", None]
            assert await pipe.readline() is None
            file = _Lines(file_fd)
            assert [await file.readline(), await file.readline()] == ["y", None]
            assert await _Lines(null_fd).readline() is None
            assert await _Lines(None).readline() is None
    finally:
        for fd in (read_fd, file_fd, null_fd):
            os.close(fd)


def test_agents_add_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "list"]) == 0
    assert capsys.readouterr().out == "no agents\n"
    path = spec_file(tmp_path, [{"say": "hi"}], name="greeter")
    assert main(["agents", "add", path]) == 0
    agent_id, name, version = capsys.readouterr().out.split()
    assert agent_id.startswith("agent_")
    assert (name, version) == ("greeter", "v1")
    assert main(["agents", "add", path]) == 0  # unchanged: the same version
    assert capsys.readouterr().out.split() == [agent_id, "greeter", "v1"]
    changed = spec_file(tmp_path, [{"say": "hello"}], name="greeter")
    assert main(["agents", "add", changed]) == 0
    assert capsys.readouterr().out.split() == [agent_id, "greeter", "v2"]
    assert main(["agents", "list"]) == 0
    assert capsys.readouterr().out.split() == [agent_id, "greeter", "v2", "scripted", "-"]


def test_sessions_list_after_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "list"]) == 0
    assert capsys.readouterr().out == "no sessions\n"
    first = spec_file(tmp_path, [{"say": "one"}], name="first")
    second = spec_file(tmp_path, [{"fail": "nope"}], name="second")
    assert main(["run", first, "first question"]) == 0
    assert main(["run", second, "second question"]) == 1
    capsys.readouterr()

    assert main(["sessions", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    newest, oldest = (line.split(maxsplit=3) for line in lines)
    assert newest[0].startswith("conv_")
    assert newest[1:3] == ["second", "failed"]
    assert oldest[1:3] == ["first", "idle"]
    title, created = oldest[3].rsplit(maxsplit=1)
    assert title == "first question"
    assert created.endswith("Z")
    assert "T" in created

    assert main(["sessions", "list", "--agent", "first"]) == 0
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == ["first"]
    assert main(["sessions", "list", "--limit", "1"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 1
    assert "--limit" in captured.err
    assert main(["sessions", "list", "--limit", "0"]) == 2
    assert "limit" in capsys.readouterr().err


def test_bad_spec_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = spec_file(tmp_path, [{"sleep": -1}], bogus_key=True)
    for argv in (["run", path, "hi"], ["agents", "add", path]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("Error: ")
        assert "\n  bogus_key: " in err
        assert "\n  executor.config.script[0].sleep: " in err
        assert "Traceback" not in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "missing.yaml")
    assert main(["run", missing, "hi"]) == 2
    assert capsys.readouterr().err == (
        f"Error: cannot read agent spec {missing!r}: No such file or directory\n"
    )


def test_unknown_harness_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: x\nexecutor: {config: {harness: nosuch}}\n", encoding="utf-8")
    assert main(["agents", "add", str(path)]) == 2
    assert capsys.readouterr().err.startswith("Error: unknown harness 'nosuch'")


# -- real subprocesses ------------------------------------------------------------------


def _subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OMNIGENT_DB", None)
    return env


def test_python_m_omnigent_runs_the_hello_example(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "omnigent", "run", "examples/hello-scripted.yaml", "hi", "--db", db],
        cwd=REPO,
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello! I am a scripted omnigent agent. Nice to meet you.\n"
    assert without_session_note(result.stderr) == ""


def test_library_example_runs(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "library_example.py")],
        cwd=tmp_path,
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Hello from the library!" in result.stdout
    assert "[session.status: idle]" in result.stdout
    assert list(tmp_path.iterdir()) == []  # in memory: nothing left behind


def _run_asker(tmp_path: Path, **options: Any) -> subprocess.CompletedProcess[str]:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    return subprocess.run(
        [sys.executable, "-m", "omnigent", "run", asking_spec(tmp_path), "hi", "--db", db],
        cwd=tmp_path,  # where `omnigent run` runs is where its tools act
        env=_subprocess_env(),
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
        **options,
    )


@pytest.mark.parametrize(
    ("typed", "transcript", "output"),
    [
        ("y\n", "Approve? [y/N] y\n", '← {"path": "x.txt", "content": "hello from x'),
        ("n\n", "Approve? [y/N] n\n", "← Error: denied by policy ask_add"),
        ("", "Approve? [y/N] \n(end of input: cancelled)\n", "← Error: denied by policy ask_add"),
    ],
    ids=["accept", "decline", "end-of-input"],
)
def test_run_asks_on_piped_stdin(typed: str, transcript: str, output: str, tmp_path: Path) -> None:
    result = _run_asker(tmp_path, input=typed)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    assert "? ask_add: read a file?\n" in result.stderr
    assert transcript in result.stderr
    assert without_session_note(result.stderr).splitlines()[-1].startswith(output)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and select")
def test_ctrl_c_at_a_real_prompt(tmp_path: Path) -> None:
    """Waiting on a stdin pipe that stays open is cancellable: Ctrl-C ends the turn."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    argv = [sys.executable, "-m", "omnigent", "run", asking_spec(tmp_path), "hi", "--db", db]
    with subprocess.Popen(
        argv,
        cwd=REPO,
        env=_subprocess_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stderr is not None
        err = _read_until(process.stderr.fileno(), b"Approve? [y/N] ")
        process.send_signal(signal.SIGINT)
        # stdin stays open (communicate() would close it: an end of input, not a Ctrl-C).
        process.wait(timeout=SUBPROCESS_TIMEOUT)
        rest = process.stderr.read()
    assert process.returncode == 130, err + rest
    text = without_session_note((err + rest).decode())
    assert text.endswith("Approve? [y/N] \n(withdrawn)\nInterrupted.\n")


def _read_until(fd: int, marker: bytes) -> bytes:
    """What ``fd`` gives until ``marker`` has been seen (bounded by the subprocess limit)."""
    seen = b""
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT
    while marker not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {marker!r} in time: {seen!r}"
        chunk = os.read(fd, 4096)
        assert chunk, f"stream ended before {marker!r}: {seen!r}"
        seen += chunk
    return seen
