"""``python -m omnigent``: the same command line as the ``omnigent`` script."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
