"""A command line that fits a shell: global options anywhere, ``--json``, a prompt from
stdin, ``sessions show`` with failed turns, ``sessions delete`` and ``tail``, completion
scripts, and ``--version``/``--help`` that import no runtime."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from omnigent.cli import build_parser, main
from omnigent.cli._completion import completions, script
from omnigent.cli._parser import verbosity

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 60
SESSION_NOTE = re.compile(r"session (conv_\w+) \(continue it with --session \1\)")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OMNIGENT_DB", raising=False)
    monkeypatch.setenv("OMNIGENT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def spec_file(folder: Path, name: str = "bot", **config: Any) -> str:
    extra = config.pop("extra", {})
    spec = {"name": name, "executor": {"config": {"harness": "scripted", **config}}, **extra}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def session_of(err: str) -> str:
    match = SESSION_NOTE.fullmatch(err.splitlines()[-1])
    assert match is not None, err
    return match.group(1)


def cli(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omnigent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
        check=False,
    )


# -- global options ---------------------------------------------------------------------


def test_global_options_go_before_or_after_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    path = spec_file(tmp_path, script=[{"say": "hello"}])
    assert main(["--db", db, "agents", "add", path]) == 0
    assert main(["agents", "list", "--db", db]) == 0
    assert main(["--db", db, "agents", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert " bot v1" in out[0]
    assert out[1] == out[2] and " bot " in out[1]
    # The default store holds nothing: the --db given before the command was used.
    assert main(["agents", "list"]) == 0
    assert capsys.readouterr().out == "no agents\n"
    # Given after the command, it wins; -v before and after adds up.
    assert main(["--db", "sqlite:///elsewhere.db", "-v", "run", path, "hi", "--db", db]) == 0
    assert "INFO omnigent.cli: " in capsys.readouterr().err
    assert not (tmp_path / "elsewhere.db").exists()
    args = ["-v", "run", path, "hi", "-v"]
    assert verbosity(build_parser(args).parse_args(args)) == 2
    assert main(["sessions", "list", "--db", db]) == 0
    assert " bot " in capsys.readouterr().out


def test_a_bad_global_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db"]) == 2
    assert main(["--bogus", "agents", "list"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


# -- --json ------------------------------------------------------------------------------


def test_json_on_agents_and_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(
        tmp_path,
        script=[{"say": "hello"}],
        env={"TOKEN": "s3cret"},
        extra={"description": "says hello"},
    )
    assert main(["run", path, "first"]) == 0
    sid = session_of(capsys.readouterr().err)
    assert main(["agents", "list", "--json"]) == 0
    agents = json.loads(capsys.readouterr().out)
    assert agents["object"] == "list"
    [agent] = agents["data"]
    assert (agent["name"], agent["version"], agent["harness"]) == ("bot", 1, "scripted")
    assert main(["agents", "show", "bot", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == agent["id"]
    assert shown["spec"]["description"] == "says hello"
    assert shown["spec"]["executor"]["config"]["env"] == {"TOKEN": "<redacted>"}
    assert main(["agents", "show", agent["id"]]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{agent['id']}  bot  v1  scripted  -\nsays hello\nname: bot\n")
    assert "s3cret" not in text
    assert main(["sessions", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["has_more"] is False
    assert [s["id"] for s in listed["data"]] == [sid]
    assert listed["data"][0]["status"] == "idle"
    assert main(["sessions", "show", sid, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["session"]["id"] == sid
    assert [(i["type"], i["role"]) for i in shown["items"]] == [
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert shown["failed_turns"] == []
    assert main(["agents", "show", "nobody"]) == 2
    assert capsys.readouterr().err == "Error: agent 'nobody' not found\n"


# -- the prompt from stdin ----------------------------------------------------------------


def test_the_prompt_comes_from_stdin_with_a_dash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = spec_file(tmp_path, script=[{"say": "read it"}])
    monkeypatch.setattr(sys, "stdin", io.StringIO("a question\nover two lines\n"))
    assert main(["run", path, "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "read it\n"
    assert main(["sessions", "show", session_of(captured.err)]) == 0
    assert "user: a question\nover two lines\nassistant: read it" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO("  \n"))
    assert main(["run", path, "-"]) == 2
    assert capsys.readouterr().err == "Error: the prompt from stdin (-) is empty\n"


def test_a_prompt_from_stdin_leaves_no_stdin_for_approvals(tmp_path: Path) -> None:
    """The pipe held the prompt: a question meets the end of input, as documented."""
    write = [{"call": "sys_os_write", "args": {"path": "n.txt", "content": "x"}}]
    ask = {"policies": [{"name": "ask_w", "type": "ask_tools", "tools": ["sys_os_write"]}]}
    path = spec_file(tmp_path, script=[*write, {"say": "done"}], extra=ask)
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "omnigent", "run", path, "-"],
        input="y\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "(end of input: cancelled)" in done.stderr
    assert not (tmp_path / "n.txt").exists()
    yes = subprocess.run(
        [sys.executable, "-m", "omnigent", "run", path, "-", "--yes"],
        input="write it",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert yes.returncode == 0, yes.stderr
    assert (tmp_path / "n.txt").read_text() == "x"


# -- sessions show: failed turns ------------------------------------------------------------


def test_sessions_show_prints_a_failed_turn_where_it_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    read = {"call": "sys_os_read", "args": {"path": "missing.txt"}}
    turns = [
        [{"say": "first"}],
        [read, {"fail": "the model fell over"}],
        [{"fail": "again, at once"}],
        [{"say": "fine now"}],
    ]
    path = spec_file(tmp_path, turns=turns)
    assert main(["run", path, "one"]) == 0
    sid = session_of(capsys.readouterr().err)
    for prompt in ("two", "three", "four"):
        main(["run", path, prompt, "--session", sid])
    capsys.readouterr()
    assert main(["sessions", "show", sid]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        "user: one",
        "assistant: first",
        "user: two",
        '→ sys_os_read({"path": "missing.txt"})',
        "← Error: cannot read 'missing.txt': no such file; check the path",
        "✗ turn failed (harness_error): the model fell over",
        "user: three",
        "✗ turn failed (harness_error): again, at once",
        "user: four",
        "assistant: fine now",
    ]
    assert main(["sessions", "show", sid, "--json"]) == 0
    failed = json.loads(capsys.readouterr().out)["failed_turns"]
    assert [f["error"] for f in failed] == [
        {"code": "harness_error", "message": "the model fell over"},
        {"code": "harness_error", "message": "again, at once"},
    ]


# -- sessions delete and tail ---------------------------------------------------------------


def test_sessions_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, script=[{"say": "hi"}])
    assert main(["run", path, "one"]) == 0
    sid = session_of(capsys.readouterr().err)
    assert main(["sessions", "delete", sid]) == 0
    assert capsys.readouterr().out.startswith(f"deleted {sid} (and its sub-sessions) from ")
    assert main(["sessions", "list"]) == 0
    assert capsys.readouterr().out == "no sessions\n"
    assert main(["sessions", "delete", sid]) == 2
    assert capsys.readouterr().err == f"Error: session '{sid}' not found\n"


def test_sessions_tail_follows_a_session_another_process_runs(tmp_path: Path) -> None:
    """No server: ``tail`` reads the store again as an ``omnigent run`` writes it."""
    path = spec_file(tmp_path, turns=[[{"say": "first"}], [{"sleep": 0.2}, {"say": "second"}]])
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    first = subprocess.run(
        [sys.executable, "-m", "omnigent", "run", path, "one"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=True,
    )
    sid = session_of(first.stderr)
    tail = subprocess.Popen(
        [sys.executable, "-m", "omnigent", "sessions", "tail", sid, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert tail.stderr is not None and tail.stdout is not None
    try:
        assert tail.stderr.readline().startswith(f"following {sid} on the store ")
        subprocess.run(
            [sys.executable, "-m", "omnigent", "run", path, "two", "--session", sid],
            capture_output=True,
            timeout=TIMEOUT,
            env=env,
            check=True,
        )
        seen: list[dict[str, Any]] = []
        while not seen or seen[-1]["type"] != "session.status" or seen[-1]["status"] != "idle":
            line = tail.stdout.readline()
            assert line, tail.stderr.read()
            seen.append(json.loads(line))
        texts = [e["item"]["content"][0]["text"] for e in seen if e["type"].endswith("item.done")]
        assert texts == ["second"]  # from now on: the first turn was not replayed
        assert seen[0]["type"] == "session.status" and seen[0]["status"] == "running"
    finally:
        tail.send_signal(signal.SIGINT)
        code = tail.wait(timeout=TIMEOUT)
        tail.stdout.close()
        tail.stderr.close()
    assert code == 130


# -- completion --------------------------------------------------------------------------------


def complete_bash(tmp_path: Path, words: list[str]) -> list[str]:
    """What Tab offers after ``words`` (the last one being completed), in bash."""
    completion = tmp_path / "omnigent.bash"
    completion.write_text(script("bash", list(completions(build_parser(every=True)))))
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {completion}\n"
        f"COMP_WORDS=(omnigent {quoted}); COMP_CWORD={len(words)}\n"
        '_omnigent; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    return sorted(line for line in done.stdout.splitlines() if line)


def test_bash_completion(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("")
    assert complete_bash(tmp_path, ["se"]) == ["serve", "sessions"]
    assert complete_bash(tmp_path, ["sessions", ""]) == ["delete", "list", "show", "tail"]
    assert "--json" in complete_bash(tmp_path, ["sessions", "list", "--"])
    assert complete_bash(tmp_path, ["run", "ag"]) == ["agent.yaml"]
    assert complete_bash(tmp_path, ["serve", "--auth", ""]) == ["header", "none"]
    assert complete_bash(tmp_path, ["--db", "x", "completion", ""]) == ["bash", "fish", "zsh"]
    assert complete_bash(tmp_path, ["-v", "agents", "sh"]) == ["show"]


def test_completion_scripts_for_each_shell(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert "complete -o default -F _omnigent omnigent" in capsys.readouterr().out
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert zsh.startswith("#compdef omnigent\n")
    assert main(["completion", "fish"]) == 0
    fish = capsys.readouterr().out
    assert "complete -c omnigent -n __fish_use_subcommand -a run" in fish
    assert main(["completion", "tcsh"]) == 2


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_read_their_scripts(shell: str, tmp_path: Path) -> None:
    if shutil.which(shell) is None:
        pytest.fail(f"{shell} is not installed (.ci/run installs it)")
    path = tmp_path / f"omnigent.{shell}"
    path.write_text(script(shell, list(completions(build_parser(every=True)))))
    if shell == "fish":
        done = subprocess.run(
            ["fish", "-c", f"source {path}; complete -C 'omnigent sessions '"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        offered = {line.split("\t")[0] for line in done.stdout.splitlines()}
        assert {"list", "show", "tail", "delete"} <= offered, done
    else:
        program = (
            f"autoload -U compinit && compinit -u; source {path}; "
            # As zsh's bashcompinit calls it: bash's 0-based arrays.
            "setopt ksharrays; COMP_WORDS=(omnigent sessions ''); COMP_CWORD=2; _omnigent; "
            'print -l "${COMPREPLY[@]}"'
        )
        done = subprocess.run(
            ["zsh", "-f", "-c", program],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert sorted(done.stdout.split()) == ["delete", "list", "show", "tail"], done


# -- startup ------------------------------------------------------------------------------------


def test_version_and_help_import_no_runtime() -> None:
    program = (
        "import sys\n"
        "from omnigent.cli import main\n"
        "for argv in (['--version'], ['--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'attrs', 'httpx')"
        " or m.startswith(('omnigent.core', 'omnigent.errors', 'omnigent.model')))\n"
        "print('HEAVY', heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=TIMEOUT, check=True
    )
    assert done.stdout.splitlines()[0].startswith("omnigent ")
    assert "run one turn of an agent" in done.stdout
    assert done.stdout.splitlines()[-1] == "HEAVY []"


def test_a_command_help_declares_only_that_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "tail", "--help"]) == 0
    assert "--after N" in capsys.readouterr().out
    every = build_parser(every=True)
    assert every.parse_args(["--db", "x", "sessions", "list", "--json"]).json is True


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """``omnigent … | head``: stdout's reader is gone; no traceback, exit 141 (SIGPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "omnigent", "completion", "bash"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (141, "")
