"""Whether another program has an SQLite database of its agent open: a write is refused
while one has (opencode's database, Codex's thread index).

Neither agent writes a lock or pid file for its database, and each keeps a connection to
it for as long as it runs, idle or not. A connection that has read a database in WAL
mode holds a shared lock on it while it stays open, which makes a connection in
exclusive locking mode fail to begin (busy timeout 0: it never waits); a plain `BEGIN
IMMEDIATE` would succeed against an idle agent and prove nothing. `hold_exclusively`
takes that lock and keeps it on the connection it returns: until that connection is
closed no other one can read or write the database, so an agent started meanwhile
waits (its busy timeout) and fails rather than writing between the checks and the
write. `holders` names the processes that have the database's files open (Linux)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import apsw

from sessionfix.errors import SessionfixError
from sessionfix.read.sqlite import database_uri, error_reason
from sessionfix.stores import StoreRefused

_PROC: Final = Path("/proc")
_SIDE_FILES: Final = ("-wal", "-shm", "-journal")
"""What SQLite keeps beside a database while a connection has it open."""


class AgentRunning(StoreRefused):
    """Another process has the database open (its agent, as a rule): nothing was changed."""


class DatabaseBusy(StoreRefused):
    """Another connection holds the database, in a process that cannot be named (one of
    another user, or this one): nothing was changed."""


def holders(path: Path) -> list[int]:
    """The processes other than this one that have the database, its write-ahead log, its
    shared memory or its journal open (Linux, from `/proc/<pid>/fd`; empty where that
    cannot be read, as for another user's processes)."""
    real = os.path.realpath(path)
    wanted = {real, *(real + side for side in _SIDE_FILES)}
    own = os.getpid()
    found: list[int] = []
    try:
        entries = list(os.scandir(_PROC))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        folder = f"{entry.path}/fd"
        try:
            descriptors = os.listdir(folder)
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(f"{folder}/{descriptor}")
            except OSError:
                continue
            if target in wanted:
                found.append(int(entry.name))
                break
    return sorted(found)


def _named(pid: int) -> str:
    """`pid 123 (opencode)`: a process and, when it can be read, its command name."""
    try:
        name = (_PROC / str(pid) / "comm").read_text(errors="replace").strip()
    except OSError:
        return f"pid {pid}"
    return f"pid {pid} ({name})" if name else f"pid {pid}"


def _refusal(
    shown: Path,
    agent: str,
    pids: list[int],
    running: type[StoreRefused],
    busy: type[StoreRefused],
) -> StoreRefused:
    if pids:
        return running(
            f"{shown}: {agent} (or another program) has the database open "
            f"({', '.join(map(_named, pids))}); quit it and run again; nothing changed"
        )
    return busy(
        f"{shown}: the database is in use (another connection holds it; is {agent} "
        f"running?); quit {agent} and run again; nothing changed"
    )


def hold_exclusively(
    real: Path,
    shown: Path,
    agent: str,
    *,
    running: type[StoreRefused] = AgentRunning,
    busy: type[StoreRefused] = DatabaseBusy,
) -> apsw.Connection:
    """A read-write connection to the database at `real` (named `shown` in messages,
    whose program is `agent`) that holds it exclusively until it is closed, with foreign
    keys enforced; refused (`running`, `busy`) while any other connection or process has
    the database open."""
    try:
        db = apsw.Connection(
            database_uri(real), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI
        )
    except apsw.Error as exc:
        raise SessionfixError(
            f"{shown}: cannot open the database to write it ({error_reason(exc)}); nothing changed"
        ) from None
    try:
        db.set_busy_timeout(0)
        db.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("BEGIN EXCLUSIVE")
        db.execute("ROLLBACK")  # the lock stays: exclusive mode releases none
    except apsw.BusyError:
        db.close()
        raise _refusal(shown, agent, holders(real), running, busy) from None
    except apsw.Error as exc:
        db.close()
        raise SessionfixError(
            f"{shown}: cannot open the database to write it ({error_reason(exc)}); nothing changed"
        ) from None
    others = holders(real)
    if others:  # open but not yet read (a process starting), or a journal mode without WAL
        db.close()
        raise _refusal(shown, agent, others, running, busy)
    return db
