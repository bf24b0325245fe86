"""Terminals over tmux, the pure part: names, argument vectors, screens, idleness.

Nothing here starts a process or touches a file; :mod:`._tmux_server` runs what these
functions build. Keeping the argv construction pure is what lets it be checked in
isolation, and it has one trap worth a module of its own: tmux reads its *command
line* as a command sequence, and an argument that **ends** in ``;`` ends a command
(``tmux send-keys -l "ls;"`` would type ``ls``). :func:`literal` escapes every argument
that reaches tmux from a spec or a model, so text arrives exactly as written.

A terminal is named by the spec (``terminals: {bash: …}``) and launched under a
*session key* the model picks (``s1``); the pair is the terminal's identity within one
omnigent session, and its resource id is ``terminal_<name>_<key>``. Names may not
contain ``_``, so an id splits back into one pair only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

__all__ = [
    "HISTORY_LIMIT",
    "MAX_KEYS",
    "MAX_SCREEN_CHARS",
    "MAX_TEXT_CHARS",
    "PANE_HEIGHT",
    "PANE_WIDTH",
    "IdleDetector",
    "NewPane",
    "capture_argv",
    "check_key",
    "check_session_key",
    "kill_session_argv",
    "list_panes_argv",
    "literal",
    "new_session_argv",
    "parse_keys",
    "parse_new_pane",
    "parse_pane_pids",
    "reports_gone",
    "resource_id",
    "screen_digest",
    "send_keys_argv",
    "send_text_argv",
    "trim_screen",
    "visible_rows",
]

PANE_WIDTH = 120
PANE_HEIGHT = 40
HISTORY_LIMIT = 10_000
MAX_TEXT_CHARS = 32_768
MAX_KEYS = 64
MAX_SCREEN_CHARS = 100_000

_KEY = re.compile(r"[!-~]{1,32}")  # printable ASCII, no spaces: one tmux key name
_SESSION_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# What tmux prints when the server, the session or the pane no longer exists.
_GONE = (
    "no server running",
    "can't find pane",
    "can't find session",
    "can't find window",
    "session not found",
    "error connecting to",
    "server exited",
    "lost server",
)

# ``exec "$0" "$@"``: tmux runs a command given as *several* arguments directly, but a
# single argument through ``sh -c`` (where ``bash -l`` would be split and ``;`` would
# be a separator). Going through ``sh -c`` ourselves, with the command and its
# arguments as positional parameters, always passes several arguments and execs the
# command exactly as the spec wrote it.
_EXEC = ("/bin/sh", "-c", 'exec "$0" "$@"')


def literal(arg: str) -> str:
    """``arg`` escaped so that tmux's command-line parser passes it through unchanged.

    tmux strips a trailing ``;`` (it separates commands) and turns a trailing ``\\;``
    into ``;``. So an argument ending in ``;`` gets its last ``;`` written as ``\\;``,
    which the parser turns back into exactly ``arg``. Nothing else is special there.
    """
    return arg[:-1] + "\\;" if arg.endswith(";") else arg


def resource_id(terminal: str, key: str) -> str:
    """The resource id of terminal ``terminal`` under session key ``key``."""
    return f"terminal_{terminal}_{key}"


def check_session_key(key: str) -> str | None:
    """``None`` if ``key`` is a valid session key, else what it must look like."""
    if _SESSION_KEY.fullmatch(key):
        return None
    return (
        "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit, "
        f"got {key!r}"
    )


def check_key(token: str) -> str | None:
    """``None`` if ``token`` may be a tmux key name, else why not."""
    if _KEY.fullmatch(token):
        return None
    return f"{token!r} is not a key name (printable ASCII without spaces, at most 32)"


def parse_keys(keys: str) -> list[str]:
    """The key names in a space-separated ``keys`` string (``"C-c Enter"``).

    Raises:
        ValueError: a token is not a key name, or there are more than MAX_KEYS.
    """
    tokens = keys.split()
    if len(tokens) > MAX_KEYS:
        raise ValueError(f"at most {MAX_KEYS} keys at once, got {len(tokens)}")
    for token in tokens:
        problem = check_key(token)
        if problem:
            raise ValueError(problem)
    return tokens


# -- argument vectors (after ``tmux -f /dev/null -S <socket>``) -------------------------


def new_session_argv(
    session_name: str,
    cwd: Path,
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
) -> list[str]:
    """Configure the server (if new) and start a detached session running ``command``.

    Prints ``<pane id> <pane pid>`` (see :func:`parse_new_pane`). The options come
    first so they hold for the new pane: a history deep enough for ``scrollback``,
    no status line (the pane is the whole window). ``env`` is set with ``env(1)``
    rather than ``new-session -e``, which older tmux lacks.
    """
    assignments = [literal(f"{name}={value}") for name, value in env.items()]
    return [
        "start-server",
        ";",
        "set-option",
        "-g",
        "history-limit",
        str(HISTORY_LIMIT),
        ";",
        "set-option",
        "-g",
        "status",
        "off",
        ";",
        "new-session",
        "-d",
        "-P",
        "-F",
        "#{pane_id} #{pane_pid}",
        "-s",
        session_name,
        "-x",
        str(PANE_WIDTH),
        "-y",
        str(PANE_HEIGHT),
        "-c",
        # tmux expands formats in a start directory: "#" is written "##".
        literal(str(cwd).replace("#", "##")),
        "--",
        "env",
        *assignments,
        *_EXEC,
        literal(command),
        *[literal(a) for a in args],
    ]


def send_text_argv(pane_id: str, text: str) -> list[str]:
    """Type ``text`` literally (no key-name lookup) into the pane."""
    return ["send-keys", "-t", pane_id, "-l", "--", literal(text)]


def send_keys_argv(pane_id: str, keys: Sequence[str]) -> list[str]:
    """Press the key names ``keys`` (``Enter``, ``C-c``, ``Up``…) in the pane."""
    return ["send-keys", "-t", pane_id, "--", *[literal(k) for k in keys]]


def capture_argv(pane_id: str, scrollback: int = 0) -> list[str]:
    """Print the pane's visible rows, preceded by up to ``scrollback`` history lines."""
    argv = ["capture-pane", "-p", "-t", pane_id]
    if scrollback > 0:
        argv += ["-S", str(-scrollback)]
    return argv


def kill_session_argv(session_name: str) -> list[str]:
    # ``=name`` matches the name exactly, never a prefix of another session's.
    return ["kill-session", "-t", f"={session_name}"]


def list_panes_argv(session_name: str | None = None) -> list[str]:
    """Print the pid of every pane (of the server, or of one session)."""
    target = ["-a"] if session_name is None else ["-s", "-t", f"={session_name}"]
    return ["list-panes", *target, "-F", "#{pane_pid}"]


# -- reading what tmux prints -----------------------------------------------------------


@attrs.frozen
class NewPane:
    """The pane a new session runs in: tmux's pane id and the pid of its process."""

    pane_id: str
    pid: int


def parse_new_pane(stdout: str) -> NewPane:
    """Parse ``new-session -P -F '#{pane_id} #{pane_pid}'`` output.

    Raises:
        ValueError: the output is not one ``%N PID`` line.
    """
    parts = stdout.split()
    if len(parts) != 2 or not parts[0].startswith("%") or not parts[1].isdigit():
        raise ValueError(f"unexpected output from tmux new-session: {stdout!r}")
    return NewPane(parts[0], int(parts[1]))


def parse_pane_pids(stdout: str) -> list[int]:
    """The pids in ``list-panes -F '#{pane_pid}'`` output (malformed lines skipped)."""
    return [int(line) for line in stdout.split() if line.isdigit()]


def reports_gone(stderr: str) -> bool:
    """Whether tmux's error says the server, session or pane no longer exists."""
    lowered = stderr.lower()
    return any(marker in lowered for marker in _GONE)


def visible_rows(capture: str) -> str:
    """The last PANE_HEIGHT rows of a capture: what is on the screen right now."""
    rows = capture.split("\n")
    if rows and rows[-1] == "":
        rows.pop()  # the newline that ends the last row
    return "\n".join(rows[-PANE_HEIGHT:])


def screen_digest(capture: str) -> str:
    """A short fingerprint of the visible screen, for telling screens apart."""
    return hashlib.blake2b(visible_rows(capture).encode(), digest_size=16).hexdigest()


def trim_screen(capture: str, limit: int = MAX_SCREEN_CHARS) -> tuple[str, bool]:
    """The capture without trailing blank rows, keeping its *last* ``limit`` characters.

    Returns the text and whether anything was cut (the oldest lines go first: the
    bottom of a terminal is where the news is).
    """
    text = capture.rstrip("\n ")
    if len(text) <= limit:
        return text, False
    cut = text[-limit:]
    newline = cut.find("\n")
    return (cut[newline + 1 :] if 0 <= newline < len(cut) - 1 else cut), True


# -- idleness ---------------------------------------------------------------------------


@attrs.define
class IdleDetector:
    """Decides when a terminal has gone quiet after activity its agent has not read.

    Feed it a digest of the visible screen at each poll (:meth:`observe`) and tell it
    what the agent read (:meth:`mark_seen`). It fires — once per settled screen — when
    the screen has not changed for ``idle_after`` seconds and differs from what the
    agent last read: the output stopped, and there is something new to look at. A
    screen that never settles (a clock, a spinner) never fires, and neither does one
    the agent has already read.

    Pure: times are passed in, so it is tested without a clock.
    """

    idle_after: float
    _last: str | None = None
    _changed_at: float = 0.0
    _seen: str | None = None
    _notified: str | None = None

    def observe(self, digest: str, now: float) -> bool:
        """Record one poll; True when the agent should be told the terminal is idle."""
        if digest != self._last:
            self._last, self._changed_at = digest, now
            return False
        if now - self._changed_at < self.idle_after:
            return False
        if digest in (self._seen, self._notified):
            return False
        self._notified = digest
        return True

    def mark_seen(self, digest: str) -> None:
        """The agent has read this screen: no idle notice for it."""
        self._seen = digest
