"""The version of sessionfix, which reports carry."""

__version__ = "0.1.0"
