"""Locks that keep sessionfix and live agents from writing a session at the same time.

Where an agent's lock lies, and when it is taken, its format package declares
(`formats.writer_locks`); the lock is a file holding `{"pid", "createdAt",
"starttime"?}`, as OpenClaw writes its own (formats/pi-openclaw.md §12). A lock is live
unless one of OpenClaw's stale reasons applies. sessionfix takes it, as the agent does,
while it rewrites the session, and a sidecar lock of its own serialises sessionfix runs
on any session (cli-and-safety.md §8.1).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from msgspec import Struct

from sessionfix.errors import SessionfixError, described
from sessionfix.formats import Format, writer_locks
from sessionfix.replacing import TEMP_MARK
from sessionfix.safety.writing import process_alive, refuse_writers
from sessionfix.units import iso_seconds

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Windows
    fcntl = None  # type: ignore[assignment]

STALE_AFTER_SECONDS: Final = 30 * 60
SIDECAR_SUFFIX: Final = ".sessionfix.lock"
SIDECAR_WAIT_SECONDS: Final = 60.0
"""How long a run waits for another sessionfix run on the same session to finish."""
_POLL_SECONDS: Final = 0.05

_held: set[Path] = set()
"""Agents' locks this process holds (an own-pid lock not held here is an orphan)."""


class SessionLocked(SessionfixError):
    """A session is locked by an agent or by another sessionfix run: left untouched."""


class NotQuiescent(SessionfixError):
    """The file may be in use by an agent: locked, or changed too recently."""


@contextmanager
def rewrite_access(
    session: Path,
    *,
    shown: Path | None = None,
    quiescence: float,
    fmt: Format,
    break_stale_lock: bool = False,
    allow_writers: bool = False,
    written_by_us: Callable[[], bool] | None = None,
) -> Iterator[None]:
    """Everything that must hold before a session is rewritten (cli-and-safety.md §8.1).

    Other sessionfix runs wait on the sidecar lock. An agent's write lock is held where
    the session's format (`fmt`, or its place when `AUTO`) always takes it, and wherever
    one exists beside the session. A session an
    agent may be writing is refused: locked, changed within `quiescence` seconds (unless
    `written_by_us` says that change was sessionfix's own), or held open for writing by
    another process (unless `allow_writers`).
    """
    name = shown or session
    with sidecar_lock(session), ExitStack() as held:
        for lock in writer_locks(fmt, session):
            if lock.always or lock.path.exists():
                held.enter_context(
                    agent_write_lock(session, lock.path, break_stale=break_stale_lock, shown=name)
                )
        _refuse_busy(session, name, quiescence, allow_writers, written_by_us)
        yield


def _refuse_busy(
    session: Path,
    shown: Path,
    quiescence: float,
    allow_writers: bool,
    written_by_us: Callable[[], bool] | None,
) -> None:
    reason = _lock_reason(session)
    if reason is None:
        reason = _recent_reason(session, quiescence, None)
        if reason is not None and written_by_us is not None and written_by_us():
            reason = None
    if reason is not None:
        raise NotQuiescent(f"{shown}: {reason}; left untouched")
    if not allow_writers:
        refuse_writers(session, shown)


class LockState(Struct, frozen=True):
    path: Path
    exists: bool
    pid: int | None = None
    stale_reasons: tuple[str, ...] = ()

    @property
    def live(self) -> bool:
        return self.exists and not self.stale_reasons


def lock_state(path: Path, *, now: float | None = None) -> LockState:
    """The lock file at `path`: whether it exists, whose it is and why it is stale."""
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
    starttime = payload.get("starttime")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        pid = None
        reasons.append("missing-pid")
    elif not process_alive(pid):
        reasons.append("dead-pid")
    elif isinstance(starttime, int) and _start_time(pid) not in (None, starttime):
        reasons.append("recycled-pid")
    elif pid == os.getpid() and not isinstance(starttime, int) and path not in _held:
        reasons.append("orphan-self-pid")
    created = iso_seconds(payload.get("createdAt"))
    if created is None:
        reasons.append("invalid-createdAt")
    elif now - created > STALE_AFTER_SECONDS:
        reasons.append("too-old")
    weak = {"missing-pid", "invalid-createdAt"}
    if reasons and set(reasons) <= weak and now - lock_mtime <= STALE_AFTER_SECONDS:
        reasons = []
    return LockState(path, exists=True, pid=pid, stale_reasons=tuple(reasons))


def busy_reason(session: Path, quiescence: float, *, mtime: float | None = None) -> str | None:
    """Why an agent may be writing `session` now (a live lock, a change within the
    `quiescence` window before `mtime`, default the file's), or None when it is at rest."""
    return _lock_reason(session) or _recent_reason(session, quiescence, mtime)


def _lock_reason(session: Path) -> str | None:
    for declared in writer_locks(Format.AUTO, session):
        lock = lock_state(declared.path)
        if lock.live and lock.path not in _held:
            owner = f" by pid {lock.pid}" if lock.pid is not None else ""
            return f"session is locked{owner}"
    return None


def _recent_reason(session: Path, quiescence: float, mtime: float | None) -> str | None:
    if mtime is None:
        try:
            mtime = os.stat(session).st_mtime
        except OSError:
            return None
    age = time.time() - mtime
    if age < quiescence:
        return (
            f"modified {max(age, 0):.0f}s ago, within the quiescence window of "
            f"{quiescence:g}s (an agent may be writing it; --quiescence 0 skips this check)"
        )
    return None


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


@contextmanager
def agent_write_lock(
    session: Path, path: Path, *, break_stale: bool = False, shown: Path | None = None
) -> Iterator[Path]:
    """Hold an agent's write lock on `session`, the lock file `path`.

    A live lock is refused; a stale one too, unless `break_stale`, which deletes it and
    tries once more. The lock is released by deleting it, only while it is still ours.
    """
    name = shown or session
    payload = _own_payload()
    staged = path.with_name(f".{session.name}{TEMP_MARK}{os.getpid()}.lock")
    try:
        # Written whole beside it, then linked into place: the lock never exists empty,
        # which OpenClaw would take for live for half an hour after a crash.
        try:
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
        except OSError as exc:
            raise SessionLocked(f"{name}: cannot take the lock {path} ({described(exc)})") from None
        for attempt in range(2):
            try:
                os.link(staged, path)
            except FileExistsError:
                state = lock_state(path)
                if state.live:
                    owner = f" by pid {state.pid}" if state.pid is not None else ""
                    raise SessionLocked(
                        f"{name}: session is locked{owner} ({path}); left untouched"
                    ) from None
                if not break_stale or attempt:
                    reasons = ", ".join(state.stale_reasons)
                    raise SessionLocked(
                        f"{name}: stale lock {path} ({reasons}); left untouched "
                        "(--break-stale-lock removes it)"
                    ) from None
                with suppress(FileNotFoundError):
                    os.unlink(path)
                continue
            except OSError as exc:
                raise SessionLocked(
                    f"{name}: cannot take the lock {path} ({described(exc)})"
                ) from None
            break
    finally:
        with suppress(OSError):
            os.unlink(staged)
    _held.add(path)
    try:
        yield path
    finally:
        _held.discard(path)
        _release_if_ours(path, payload)


def _own_payload() -> bytes:
    """What OpenClaw writes: `JSON.stringify({pid, createdAt, starttime?}, null, 2)`."""
    now = datetime.now(UTC)
    payload: dict[str, object] = {
        "pid": os.getpid(),
        "createdAt": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
    }
    starttime = _start_time(os.getpid())
    if starttime is not None:
        payload["starttime"] = starttime
    return json.dumps(payload, indent=2).encode()


def _release_if_ours(path: Path, payload: bytes) -> None:
    try:
        if path.read_bytes() != payload:
            return
        os.unlink(path)
    except OSError:
        return


@contextmanager
def sidecar_lock(session: Path, *, wait: float | None = None) -> Iterator[Path]:
    """Serialise sessionfix runs on `session` with `flock` on `<file>.sessionfix.lock`.

    The data file itself is never locked: the rename swaps its inode. The sidecar is
    removed on release, before it is unlocked; a run that locked a sidecar since
    removed sees that its inode is no longer the path's and tries again.
    """
    path = session.with_name(session.name + SIDECAR_SUFFIX)
    if fcntl is None:  # pragma: no cover - no flock: nothing to serialise with
        yield path
        return
    deadline = time.monotonic() + (SIDECAR_WAIT_SECONDS if wait is None else wait)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise SessionLocked(
                f"{session}: cannot take the lock {path} ({described(exc)})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            if time.monotonic() >= deadline:
                raise SessionLocked(
                    f"{session}: another sessionfix run is repairing it; left untouched"
                ) from None
            time.sleep(_POLL_SECONDS)
            continue
        try:
            current = os.stat(path, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)
    try:
        yield path
    finally:
        with suppress(OSError):
            os.unlink(path)
        os.close(fd)
