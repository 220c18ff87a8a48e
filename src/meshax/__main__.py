"""``python -m meshax`` runs the ``meshax`` command line tool."""

import sys

from meshax._src.launch.launcher import main

sys.exit(main())
