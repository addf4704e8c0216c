"""The GPU-headroom job queue: jobs wait for room on a shared card, then run as recordings."""
