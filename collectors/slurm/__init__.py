"""Slurm as a source: the jobs on this compute node, their GPUs, and the job of each GPU process."""
