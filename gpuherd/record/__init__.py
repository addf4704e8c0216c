"""Headless capture: the recorder, fast peak capture, the log drain and the `record` command."""

from __future__ import annotations
