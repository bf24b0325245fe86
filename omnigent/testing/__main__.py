"""``python -m omnigent.testing``: serve a scripted fake model API (see ``_standalone``)."""

import sys

from ._standalone import main

sys.exit(main())
