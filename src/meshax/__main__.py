"""``python -m meshax`` runs the ``meshax`` command line tool."""

import sys

from meshax._src.launcher import main

sys.exit(main())
