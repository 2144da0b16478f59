"""OpenClaw's session write lock, read the way OpenClaw classifies it.

A lock is `<realpath(dir)>/<name>.lock` holding `{"pid", "createdAt", "starttime"?}`
(formats/pi-openclaw.md §12). A lock is live unless one of OpenClaw's stale
reasons applies.
"""

from __future__ import annotations

import errno
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

STALE_AFTER_SECONDS = 30 * 60


@dataclass(frozen=True, slots=True)
class LockState:
    path: Path
    exists: bool
    pid: int | None = None
    stale_reasons: tuple[str, ...] = ()

    @property
    def live(self) -> bool:
        return self.exists and not self.stale_reasons


def lock_path(session: Path) -> Path:
    directory = Path(os.path.realpath(session.parent))
    return directory / f"{session.name}.lock"


def lock_state(session: Path, *, now: float | None = None) -> LockState:
    path = lock_path(session)
    try:
        raw = path.read_bytes()
        lock_mtime = path.stat().st_mtime
    except FileNotFoundError:
        return LockState(path, exists=False)
    except OSError:
        # Present but unreadable: assume someone holds it.
        return LockState(path, exists=True)
    now = time.time() if now is None else now
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        payload = {}
    reasons: list[str] = []
    pid = payload.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        pid = None
        reasons.append("missing-pid")
    elif not _alive(pid):
        reasons.append("dead-pid")
    else:
        starttime = payload.get("starttime")
        if isinstance(starttime, int) and _start_time(pid) not in (None, starttime):
            reasons.append("recycled-pid")
    created = _parse_iso(payload.get("createdAt"))
    if created is None:
        reasons.append("invalid-createdAt")
    elif now - created > STALE_AFTER_SECONDS:
        reasons.append("too-old")
    weak = {"missing-pid", "invalid-createdAt"}
    if reasons and set(reasons) <= weak and now - lock_mtime <= STALE_AFTER_SECONDS:
        reasons = []
    return LockState(path, exists=True, pid=pid, stale_reasons=tuple(reasons))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def _start_time(pid: int) -> int | None:
    """Process start time in clock ticks (field 22 of /proc/<pid>/stat), where available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _parse_iso(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
