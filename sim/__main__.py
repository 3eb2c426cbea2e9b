"""``python -m sim`` runs the ``lossless`` command line."""

import sys

from sim.cli import main

sys.exit(main())
