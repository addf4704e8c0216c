"""The GPU-headroom job queue: jobs, the shared reservation ledger, the decision and the runner."""
