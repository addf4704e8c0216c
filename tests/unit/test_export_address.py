"""`--serve-metrics [HOST:]PORT`: what is accepted, and what each spelling means."""

from __future__ import annotations

import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuherd.export.address import ListenAddress, parse_listen
from gpuherd.export.exporter import Exporter
from tests.prometheus import free_port


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("9400", "127.0.0.1", 9400),
        ("127.0.0.1:9400", "127.0.0.1", 9400),
        ("0.0.0.0:1", "0.0.0.0", 1),
        ("[::1]:65535", "::1", 65535),
        ("localhost:9400", "localhost", 9400),
        ("gpu-box-7.example.org:9400", "gpu-box-7.example.org", 9400),
    ],
)
def test_spellings(text: str, host: str, port: int) -> None:
    assert parse_listen(text) == ListenAddress(host, port)


@given(st.integers(min_value=-10, max_value=200_000))
def test_every_port_from_1_to_65535_and_no_other(port: int) -> None:
    if 1 <= port <= 65535:
        assert parse_listen(f"127.0.0.1:{port}").port == port
    else:
        with pytest.raises(ValueError, match="the port must be a number from 1 to 65535"):
            parse_listen(f"127.0.0.1:{port}")


def test_an_ipv6_loopback_address_is_served_there() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    port = free_port()
    try:
        served = Exporter(parse_listen(f"[::1]:{port}"), "box-1")
    except Exception as error:  # an IPv6-less container
        pytest.skip(f"cannot listen on ::1 here: {error}")
    try:
        assert served.url == f"http://[::1]:{port}/metrics"
        assert served.server.address_family == socket.AF_INET6
    finally:
        served.close()
