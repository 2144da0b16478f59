"""`python -m sessionfix`."""

from sessionfix.cli import run

run()
