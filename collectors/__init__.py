"""Sources of samples: NVML, host, containers, log tails and recorded sessions."""
