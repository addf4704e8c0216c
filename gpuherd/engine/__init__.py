"""The engine room: runs one source set, each source on its own thread, for every sink."""
