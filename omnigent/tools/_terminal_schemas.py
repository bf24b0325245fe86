"""What the model is told about the terminal tools: a description and a JSON Schema each.

A test checks that each schema names exactly the arguments its tool accepts.
"""

from __future__ import annotations

from typing import Any

from ..processes import MAX_KEYS, MAX_TEXT_CHARS

__all__ = ["TERMINAL_TOOL_SCHEMAS"]

_TERMINAL = {
    "type": "string",
    "description": "The terminal's name, as declared in the agent's spec (e.g. 'bash').",
}
_SESSION = {
    "type": "string",
    "description": (
        "A key you choose for one instance of that terminal (e.g. 's1', 'server'); "
        "different keys are independent terminals. Letters, digits, '.', '_', '-'."
    ),
}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TERMINAL_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "sys_terminal_launch": {
        "description": (
            "Start a terminal declared in your spec (a long-lived tmux pane running its "
            "command). Launching a (terminal, session) that is already running changes "
            "nothing and answers status 'already_running'. Then type into it with "
            "sys_terminal_send and look at it with sys_terminal_read; close it with "
            "sys_terminal_close. When its output settles after activity you have not "
            "read, you are told so."
        ),
        "parameters": _object(
            {
                "terminal": _TERMINAL,
                "session": _SESSION,
                "cwd": {
                    "type": "string",
                    "description": (
                        "Directory to start in, relative to the working directory or "
                        "absolute inside it (default: the terminal's own cwd, else the "
                        "working directory)."
                    ),
                },
            },
            ["terminal", "session"],
        ),
    },
    "sys_terminal_send": {
        "description": ("Type text into a running terminal, then press keys (default: Enter)."),
        "parameters": _object(
            {
                "terminal": _TERMINAL,
                "session": _SESSION,
                "text": {
                    "type": "string",
                    "maxLength": MAX_TEXT_CHARS,
                    "description": "Text typed literally, before the keys.",
                },
                "keys": {
                    "type": "string",
                    "description": (
                        "tmux key names pressed after the text, separated by spaces "
                        f"(at most {MAX_KEYS}): 'Enter' (the default), 'C-c', 'Tab', "
                        "'Escape', 'Up', 'C-d'… An empty string presses nothing."
                    ),
                },
            },
            ["terminal", "session"],
        ),
    },
    "sys_terminal_read": {
        "description": "Read a running terminal's screen, optionally with lines above it.",
        "parameters": _object(
            {
                "terminal": _TERMINAL,
                "session": _SESSION,
                "scrollback": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Lines of history above the screen to include (default 0).",
                },
            },
            ["terminal", "session"],
        ),
    },
    "sys_terminal_list": {
        "description": "List this session's running terminals.",
        "parameters": _object({}, []),
    },
    "sys_terminal_close": {
        "description": "Close a terminal: its pane and every process started in it end.",
        "parameters": _object(
            {"terminal": _TERMINAL, "session": _SESSION}, ["terminal", "session"]
        ),
    },
}
