"""The ``omnigent`` command line: rendering (pure), commands in-process, and subprocesses.

``main()`` calls ``trio.run`` itself, so the command tests are plain sync tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import yaml

import omnigent
from omnigent._cli_render import (
    Chunk,
    TurnRenderer,
    format_agents,
    format_error,
    format_sessions,
    iso_time,
    one_line,
)
from omnigent.cli import _report, default_db_url, main
from omnigent.errors import BadRequest, HarnessError, SpecError
from omnigent.model import (
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
    SessionStatus,
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
    assert render([SessionStatus(status="cancelled")])[2] == 130
    failed = SessionStatus(status="failed", error=ErrorInfo("gone", "x"))
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
        omnigent.Agent("agent_1", "a", 1, "", "scripted", None, 0.0),
        omnigent.Agent("agent_22", "bb", 12, "", "loop", "gpt-4o-mini", 0.0),
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


# -- commands, in process ---------------------------------------------------------------


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
    assert captured.err == ""
    assert (home / "omnigent.db").exists()


def test_run_failing_step_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, [{"say": "trying"}, {"fail": "the disk is on fire"}])
    assert main(["run", path, "hi"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "trying\n"
    assert captured.err == "Error: the disk is on fire\n"


def test_run_shows_tool_calls_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, [{"call": "add", "args": {"a": 1, "b": 2}}, {"say": "done"}])
    assert main(["run", path, "hi"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "done\n"
    call_line, output_line = captured.err.splitlines()
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
    assert capsys.readouterr().err == "Interrupted.\n"
    [session] = session_snapshots(db)
    assert session.status == "cancelled"


def test_agents_add_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agents", "list"]) == 0
    assert capsys.readouterr().out == "no agents\n"
    path = spec_file(tmp_path, [{"say": "hi"}], name="greeter")
    assert main(["agents", "add", path]) == 0
    agent_id, name, version = capsys.readouterr().out.split()
    assert agent_id.startswith("agent_")
    assert (name, version) == ("greeter", "v1")
    assert main(["agents", "add", path]) == 0
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
    assert result.stderr == ""


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
