"""Headless recording: the recorder, fast peak capture, summaries and the verification note."""

from __future__ import annotations
