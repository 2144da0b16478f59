"""The scan driver: one stream pass over a file, parallel workers."""
