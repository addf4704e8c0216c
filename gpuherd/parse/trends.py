"""The trend findings of a whole run (`stalled`, a rising loss), judged as the dashboard does."""

from __future__ import annotations

from gpuherd.tasks.health import judge_histories, wants
from gpuherd.tasks.series import MetricSeries
from parsers.model import LogFinding, LogMetric


class TrendHistory:
    """The points of the metrics `judge` reads, kept as the dashboard keeps them.

    The trend findings (`stalled`, a rising loss) of a whole run: `parse` judges them at the
    end of a file or of a tracker's run; a test judges a tail's metrics the same way to compare
    the two.
    """

    def __init__(self) -> None:
        self.series: dict[str, MetricSeries] = {}
        self.last_line: dict[str, int] = {}
        self.last_metric_line = 0
        self.end_line: int | None = None
        """The last line that said the run ended (`parsers.findings.ends_run`)."""

    def add(self, number: int, metric: LogMetric) -> None:
        """Keep the values of line `number` that a trend rule reads."""
        self.last_metric_line = number
        for name, value in metric.values:
            series = self.series.get(name)
            if series is None:
                if not wants(name):
                    continue
                # as the dashboard keeps it: the `stalled` rule reads the whole run's points
                series = self.series[name] = MetricSeries()
            series.add(value, metric.step, metric.epoch)
            self.last_line[name] = number

    def findings(self) -> list[tuple[int, LogFinding]]:
        """The trend findings of the points kept, each at the last line of its metric."""
        # a run whose log said it ended, with no metric after, is judged as ended: its loss is
        # flat at the end because it converged (`gpuherd.tasks.health.LIVE_ONLY_KINDS`)
        ended = self.end_line is not None and self.end_line >= self.last_metric_line
        return [
            (self.last_line[name], found)
            for name, found in judge_histories(self.series, ended=ended)
        ]
