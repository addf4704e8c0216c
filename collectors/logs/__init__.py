"""Log tails: following files across rotation, cutting lines, detection, discovery of runs."""
