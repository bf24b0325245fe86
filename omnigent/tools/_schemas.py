"""What the model is told about the OS tools: a description and a JSON Schema each.

Kept apart from the implementations so the wording can be read (and reviewed) as one
piece. A test checks that each schema names exactly the arguments its tool accepts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_READ_LIMIT", "MAX_SHELL_TIMEOUT", "OS_TOOL_SCHEMAS"]

DEFAULT_READ_LIMIT = 2000
MAX_SHELL_TIMEOUT = 3600.0

_PATH = {
    "type": "string",
    "description": "File path, relative to the working directory (or absolute inside it).",
}
_OLD_TEXT = {"type": "string", "description": "Exact text to replace; must occur once."}
_NEW_TEXT = {"type": "string", "description": "Replacement text."}
_EDIT = {
    "type": "object",
    "properties": {"oldText": _OLD_TEXT, "newText": _NEW_TEXT},
    "required": ["oldText", "newText"],
    "additionalProperties": False,
}

OS_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "sys_os_read": {
        "description": "Read lines of a text file in the working directory.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": _PATH,
                "offset": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "First line to return, 0-based (default 0).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"Maximum lines to return (default {DEFAULT_READ_LIMIT}).",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    "sys_os_write": {
        "description": "Create or overwrite a file in the working directory.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": _PATH,
                "content": {"type": "string", "description": "The whole new file content."},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    },
    "sys_os_edit": {
        "description": (
            "Replace exact text in a file: oldText/newText, or a list of edits applied in "
            "order; each oldText must match exactly once, else nothing is written."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": _PATH,
                "oldText": _OLD_TEXT,
                "newText": _NEW_TEXT,
                "edits": {
                    "type": "array",
                    "items": _EDIT,
                    "minItems": 1,
                    "description": "Several replacements, applied in order (instead of "
                    "oldText/newText).",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    "sys_os_shell": {
        "description": (
            "Run a /bin/sh command in the working directory and return its stdout, stderr "
            "and exit code."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command line."},
                "timeout": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": MAX_SHELL_TIMEOUT,
                    "description": "Seconds before the command is killed (default 120).",
                },
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
}
