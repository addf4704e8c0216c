"""`--serve-metrics [HOST:]PORT`: read and check the address the exporter listens on.

Standard library only, so the command line checks the spelling before anything is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
"""Loopback unless told otherwise: the exporter is reached over an SSH tunnel or a Prometheus on
the same host; `0.0.0.0` (or a real address) exposes it to the network on purpose."""
METRICS_PATH = "/metrics"
"""The one path the exporter answers."""
_HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})?")


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """Where the exporter listens."""

    host: str
    """An IPv4 or IPv6 address or a host name (IPv6 without its brackets)."""
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def url(self, tls: bool) -> str:
        """The metrics URL, for the announcement on stderr."""
        return f"{'https' if tls else 'http'}://{self}{METRICS_PATH}"


def parse_listen(text: str) -> ListenAddress:
    """`9400`, `127.0.0.1:9400`, `0.0.0.0:9400`, `[::1]:9400`, `myhost:9400`.

    Raises:
        ValueError: with the one line to show, for anything else (a port out of 1..65535, an
            empty host, a bare IPv6 address without brackets, spaces, a path).
    """
    what = f"--serve-metrics {text!r}"
    if not text or text != text.strip():
        raise ValueError(f"{what}: expected [HOST:]PORT, e.g. 9400 or 127.0.0.1:9400")
    if "/" in text:
        raise ValueError(
            f"{what}: expected [HOST:]PORT, not a URL (the path is always {METRICS_PATH})"
        )
    host, port_text = DEFAULT_HOST, text
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or not text[close + 1 :].startswith(":"):
            raise ValueError(f"{what}: an IPv6 address is written [ADDRESS]:PORT, e.g. [::1]:9400")
        host, port_text = text[1:close], text[close + 2 :]
        if not host or not re.fullmatch(r"[0-9A-Fa-f:.]+", host):
            raise ValueError(f"{what}: {host!r} is not an IPv6 address")
    elif ":" in text:
        host, _, port_text = text.rpartition(":")
        if ":" in host:
            raise ValueError(f"{what}: write an IPv6 address in brackets, e.g. [::1]:9400")
        if not host:
            raise ValueError(
                f"{what}: give the host before ':' (0.0.0.0 listens on every "
                "interface, 127.0.0.1 on this machine only)"
            )
        if not _HOST_NAME.fullmatch(host):
            raise ValueError(f"{what}: {host!r} is not a host name or address")
    if not re.fullmatch(r"[0-9]{1,5}", port_text) or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{what}: the port must be a number from 1 to 65535")
    return ListenAddress(host, int(port_text))
