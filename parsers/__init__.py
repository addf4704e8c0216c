"""Pure, standard-library parsers that turn training-log lines into metrics and findings."""
