"""Writing a session directory: the writer, its lock, and whether the directory is safe."""
