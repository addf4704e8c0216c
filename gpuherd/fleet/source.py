"""The fleet as a collector: every `interval_s`, one query to Prometheus, one `FleetSnapshot`.

It runs in `collectors.loop.run_collector` on a thread of its own like every other source, so
a slow or unreachable Prometheus delays only the next refresh: the view stays responsive and
keeps its last rows, with the reason shown, until Prometheus answers again.
"""

from __future__ import annotations

import time

from collectors.base import CollectorError
from gpuherd.fleet.model import FleetSnapshot, build_rows, fleet_query
from gpuherd.fleet.promql import PrometheusClient, PrometheusError

DEFAULT_REFRESH_S = 2.0
DEFAULT_STALE_AFTER_S = 60.0
"""A host whose newest sample is older than this is stale (Prometheus also drops a target's
series at once when a scrape of it fails, which marks it stale sooner)."""
DEFAULT_LOOKBACK_S = 3600.0
"""Hosts silent for longer than this leave the view."""


class NoFleetSeries(PrometheusError):
    """Prometheus answers, but holds neither gpuherd's nor dcgm-exporter's GPU series."""


class FleetSource:
    """Asks Prometheus for the whole fleet each `interval_s` (the `Collector` protocol)."""

    name = "prometheus"
    role = "fleet"

    def __init__(
        self,
        client: PrometheusClient,
        interval_s: float = DEFAULT_REFRESH_S,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        lookback_s: float = DEFAULT_LOOKBACK_S,
    ) -> None:
        self.client = client
        self.interval_s = interval_s
        self.stale_after_s = stale_after_s
        self.query = fleet_query(max(lookback_s, stale_after_s))

    def open(self) -> None:
        """Nothing to open: every refresh is one request."""

    def close(self) -> None:
        """Nothing to close."""

    def fetch(self) -> FleetSnapshot:
        """One refresh; raises `PrometheusError` when Prometheus cannot answer."""
        started = time.perf_counter()
        series = self.client.query(self.query)
        rows, at = build_rows(series, self.stale_after_s)
        return FleetSnapshot(rows, at, time.perf_counter() - started)

    def sample(self) -> FleetSnapshot:
        """One refresh; `CollectorError` (the view keeps its rows) when Prometheus fails."""
        try:
            return self.fetch()
        except PrometheusError as error:
            raise CollectorError(error.msg, title="Prometheus") from None

    def check(self) -> FleetSnapshot:
        """The first refresh, before the view starts: raises `PrometheusError` when it is no use.

        Unreachable, not Prometheus, or no GPU series at all (it scrapes no gpuherd exporter
        and no dcgm-exporter) are each one clear line and exit status 2 in `gpuherd fleet`.
        """
        first = self.fetch()
        if not first.rows:
            raise NoFleetSeries(
                f"Prometheus at {self.client.url} holds no gpuherd_gpu_* or DCGM_FI_DEV_* "
                "series: add a scrape of `gpuherd serve-metrics` or dcgm-exporter "
                "(docs/fleet.md)"
            )
        return first
