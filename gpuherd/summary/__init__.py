"""Session summaries: the session frames, statistics, charts, summary files and `summarize`."""
