"""The ``omnigent`` command line: ``main(argv)`` and its parser.

Implementation in private modules: ``_main`` (the parser and the sub-command
handlers), ``_turn`` (one turn in the terminal), ``_prompt`` (approvals on the TTY),
``_render`` and ``_approval_render`` (what is printed, without I/O), ``_output``.
"""

from ._main import build_parser, main

__all__ = ["build_parser", "main"]
