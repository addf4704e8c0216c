"""`gpuherd parse`: the metrics and findings of log files and trackers' stores."""
