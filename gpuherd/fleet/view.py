"""`gpuherd fleet`: check Prometheus before the terminal is taken over, then show the view."""

from __future__ import annotations

import sys

from gpuherd.common import exit_codes
from gpuherd.common.options import FleetOptions
from gpuherd.fleet.promql import PrometheusClient, PrometheusError
from gpuherd.fleet.source import FleetSource
from gpuherd.present.format import visible


def run(args: FleetOptions) -> int:
    """Exit status 2 with one line when Prometheus is no use; else the view until `q`."""
    from gpuherd.dashboard.monitor import terminal_problem

    try:
        source = FleetSource(
            PrometheusClient(args.prometheus), args.interval, args.stale_after, args.forget_after
        )
        first = source.check()
    except PrometheusError as error:
        print(visible(f"gpuherd: fleet: {error.msg}"), file=sys.stderr)
        return exit_codes.USAGE
    problem = terminal_problem()
    if problem is not None:
        print(f"gpuherd: {problem}; query Prometheus's API directly in scripts", file=sys.stderr)
        return exit_codes.USAGE
    from tui.fleet_app import FleetApp  # the one way into Textual from here

    app = FleetApp(source, first)
    app.run()
    return exit_codes.OK
