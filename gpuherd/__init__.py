"""gpuherd: a terminal monitor for shared GPU hosts."""

from __future__ import annotations

__version__ = "0.1.0"
