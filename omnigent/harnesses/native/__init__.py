"""What the native harnesses (Claude Code, Codex, pi, the OpenAI Agents SDK) share.

Finding the CLI (or the Python package), the model guard and endpoint, the spec keys
they refuse (:mod:`._cli`); the live process and how a failed or cancelled turn ends
(:mod:`._process`); the relay of their actions into session events (:mod:`._relay`);
the history preamble and input blocks (:mod:`._input`); JSON lines over pipes
(:mod:`._ndjson`).
"""

from ._cli import (
    AGENTS_SDK,
    CLAUDE_CLI,
    CLAUDE_MODELS,
    CODEX_CLI,
    GPT_MODELS,
    PI_CLI,
    ModelEndpoint,
    ModelRule,
    NativeCli,
    OptionCheck,
    Program,
    PythonPackage,
    model_endpoint,
    native_spec_problems,
    positive_number,
)
from ._input import input_blocks, preamble, split_data_url
from ._ndjson import ChannelClosed
from ._process import NativeHarness, NativeProcess, drive_turn
from ._relay import (
    Action,
    Call,
    CallOutput,
    EndMessage,
    Finished,
    ItemRelay,
    Say,
    Used,
    merge_text,
    reported_usage,
)

__all__ = [
    "AGENTS_SDK",
    "CLAUDE_CLI",
    "CLAUDE_MODELS",
    "CODEX_CLI",
    "GPT_MODELS",
    "PI_CLI",
    "Action",
    "Call",
    "CallOutput",
    "ChannelClosed",
    "EndMessage",
    "Finished",
    "ItemRelay",
    "ModelEndpoint",
    "ModelRule",
    "NativeCli",
    "NativeHarness",
    "NativeProcess",
    "OptionCheck",
    "Program",
    "PythonPackage",
    "Say",
    "Used",
    "drive_turn",
    "input_blocks",
    "merge_text",
    "model_endpoint",
    "native_spec_problems",
    "positive_number",
    "preamble",
    "reported_usage",
    "split_data_url",
]
