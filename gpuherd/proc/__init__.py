"""Process tools: the supervisor, the supervised child command and process-tree membership."""
