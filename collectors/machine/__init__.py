"""Live sources of this machine: NVML, host and process details, containers, log writers."""
