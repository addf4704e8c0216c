"""`python -m gpuherd` runs the command line."""

from __future__ import annotations

import sys

from gpuherd.cli import main

sys.exit(main())
