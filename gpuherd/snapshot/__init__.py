"""`gpuherd snapshot [--json]`: one look at the GPUs, the host, the containers and Slurm."""
