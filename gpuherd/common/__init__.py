"""What every command shares: checks of values, exit codes, typed options, deadlines, safe files."""
