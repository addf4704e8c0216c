"""The GPU-headroom job queue: jobs, their store, the headroom rule, the ledger and the runner."""
