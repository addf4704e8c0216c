"""The session directory's format and its readers: files, columns, rows, meta, events."""
