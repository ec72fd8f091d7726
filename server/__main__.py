"""``python -m orinkit.server`` is ``edge-serve``: the systemd unit calls it this way, by the venv's own Python."""

import sys

from orinkit.server.cli import main

sys.exit(main())
