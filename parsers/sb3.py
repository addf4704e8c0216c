"""Stable-Baselines3's console tables (its logger's `HumanOutputFormat`): PPO, A2C, DQN, SAC, ...

Each dump of the logger is one table, between two rules of dashes::

    -----------------------------------------
    | rollout/                |             |
    |    ep_rew_mean          | 1.53        |
    | time/                   |             |
    |    total_timesteps      | 4096        |
    | train/                  |             |
    |    approx_kl            | 0.008046303 |
    -----------------------------------------

A row without a value opens a section (`rollout/`); the rows under it are its keys. The table
becomes one metric at its closing rule, at the step `time/total_timesteps` (environment steps,
what SB3 plots against).
"""

from __future__ import annotations

from parsers.model import LogMetric
from parsers.table_boxes import box_cells
from parsers.text import metric_name, normalise_line, parse_number
from parsers.values import to_step

STEP_KEY = "time/total_timesteps"
NAMES = {
    "train/loss": "train/loss",
    "train/learning_rate": "lr",
    "time/fps": "throughput/samples_s",  # environment steps a second
}
"""Keys with a standard name; the others keep theirs (`train/approx_kl`,
`rollout/ep_rew_mean`, `eval/mean_reward`). The same keys head the columns of SB3's
`progress.csv` (`parsers.table_formats`)."""
# annotated: mypyc cannot infer the type of a name another module builds on at import
NOT_MEASUREMENTS: frozenset[str] = frozenset(
    {
        "time/iterations",
        "time/time_elapsed",
        "time/episodes",
        "train/n_updates",
        "train/clip_range",
        "train/clip_range_vf",
    }
)
"""Counters and settings the table repeats, not measurements."""


class Sb3Parser:
    """The rows of one table gathered until its closing rule."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the table being read."""
        self.section = ""
        self.rows: list[tuple[str, str]] = []

    def feed(self, line: str) -> LogMetric | None:
        """Read one line: a table row gathers, a closing rule gives the table's metric.

        Raises:
            ValueError: the table's step is no count.
        """
        line = normalise_line(line).strip()
        cells = box_cells(line)  # a boxed row, as the generic reader cuts it
        if cells is not None:
            if len(cells) == 2:
                key, text = cells
                if not text:  # `| rollout/ |  |` opens a section
                    self.section = key if key.endswith("/") else ""
                elif key:
                    self.rows.append((self.section + key, text))
            return None
        if len(line) >= 3 and not line.strip("-"):  # a rule: the table (if any) ends
            return self._table()
        return None

    def _table(self) -> LogMetric | None:
        rows, self.rows, self.section = self.rows, [], ""
        values: list[tuple[str, float]] = []
        step = None
        for key, text in rows:
            if key in NOT_MEASUREMENTS:
                continue
            try:
                number = parse_number(text)
            except ValueError:
                continue  # SB3 logs words too (a truncated `...`, an env id)
            if key == STEP_KEY:
                step = to_step(number)
            else:
                values.append((NAMES.get(key) or metric_name(key), number))
        return LogMetric(tuple(values), step) if values else None
