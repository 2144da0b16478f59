"""Reports: every output format and the diff of a repair."""
