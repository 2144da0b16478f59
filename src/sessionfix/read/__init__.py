"""Bytes to lines: line splitting, line classes and the file source."""
