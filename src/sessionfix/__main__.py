"""`python -m sessionfix`."""

from sessionfix.entry import run

run()
