"""Reports: every output format, the diff of a repair, the closing summary."""
