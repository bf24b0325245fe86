"""The ``omnigent`` command line: ``main(argv)`` and its parser.

Implementation in private modules (see :mod:`omnigent.cli._main`): the parser declares
only the command that runs, so ``omnigent --version`` and ``--help`` import no runtime.
"""

from ._main import main
from ._parser import build_parser

__all__ = ["build_parser", "main"]
