"""Writing safely: one temp-file writer, write locks, backups and restore."""
