"""``python -m sim`` runs the ``lossless`` command line."""

import sys

from .cli import main

sys.exit(main())
