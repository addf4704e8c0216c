"""The verification note: composed from a session summary and written into an example.yaml."""
