"""gpuherd: a terminal monitor for shared GPU hosts."""

from __future__ import annotations

import importlib.machinery
import importlib.util

__version__ = "0.1.0"


def parsers_compiled() -> bool:
    """Whether the log parsers in use are compiled rather than pure Python.

    A wheel built with a C compiler holds them compiled (hatch_build.py). The package is found,
    not imported: `gpuherd --version` stays quick.
    """
    spec = importlib.util.find_spec("parsers")
    origin = spec.origin if spec is not None else None
    return origin is not None and origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
