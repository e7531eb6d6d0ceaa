"""``python -m otel_loopguard``: the command line."""

from __future__ import annotations

import sys

from otel_loopguard.cli import main

sys.exit(main())
