"""How many worker processes a run may fork: known without loading the workers."""

from __future__ import annotations

import os
import signal


def can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(signal, "pthread_sigmask")


def default_workers(jobs: int | None) -> int:
    """Worker processes for `--jobs`: as asked, else one per core this process may run on
    (up to 8); one where processes cannot be forked."""
    if not can_fork():
        return 1
    if jobs is None:
        try:
            jobs = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            jobs = os.cpu_count() or 1
        jobs = min(jobs, 8)
    return max(1, jobs)
