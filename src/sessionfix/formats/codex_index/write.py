"""Writing a repair into Codex's thread index: rows made or
mended in one transaction, a backup of what they replace beside the index first, and
putting a backup back. A rollout is never written, moved or removed.

The index is written only while no other connection has it open (Codex keeps one for
as long as it runs): through one connection that holds it exclusively from the first
check to the close (`sqlite_liveness`), so that nothing can change between what is
checked, what is backed up and what is written. Only an index whose `threads` table the
reader reads is written, and only one a change cannot harm unseen: no trigger on
`threads` but Codex's own (they fill the millisecond and recency columns of a row
inserted or re-dated), no failing `PRAGMA integrity_check`.

In the write transaction (`BEGIN IMMEDIATE`) each row is read again: a row to insert
must still be missing, a row to mend must still hold what the repair read; each
statement must change exactly one row; before the commit the rows are read back and
must hold what was written. Columns no change names keep their values, other rows and
tables are not touched. The commit runs with the run's signals held; once it may have
been made, the backup stays. A checkpoint then moves the commit into the database file.

The backup is a new SQLite file beside the index, `state_5.sqlite.sessionfix-threads-
<n>.bak` (`n` the first number free), holding the rows a repair mends as stored (every
column), the ids of the rows it inserts, and a `meta` table; it is synced to the disk
before the write transaction begins. Restoring it puts those rows back and removes the
rows the repair inserted; rows Codex wrote since are left as they are.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

import apsw
import orjson
import xxhash

from sessionfix.errors import SessionfixError, described
from sessionfix.escapes import escape_surrogates
from sessionfix.formats.codex_index.database import KEY, KIND, REQUIRED, TABLE, carried, columns
from sessionfix.formats.sqlite_liveness import AgentRunning, hold_exclusively
from sessionfix.formats.sqlite_writes import (
    backups_beside,
    checkpoint,
    close_quietly,
    kill_point,
    newest_first,
    read_backup,
    settled,
    sync_to_disk,
)
from sessionfix.interrupts import signals_deferred
from sessionfix.read.sqlite import (
    connect_read_only,
    database_uri,
    error_reason,
    quoted,
    read_only_uri,
)
from sessionfix.stores import StoreBackup, StoreRefused, chosen_backup
from sessionfix.version import __version__

AGENT: Final = "Codex"
SESSION: Final = "threads"
BACKUP_MARK: Final = f".sessionfix-{SESSION}-"
BACKUP_SUFFIX: Final = ".bak"
CODEX_TRIGGERS: Final = frozenset(
    {
        "threads_created_at_ms_after_insert",
        "threads_updated_at_ms_after_insert",
        "threads_created_at_ms_after_update",
        "threads_updated_at_ms_after_update",
        "threads_recency_at_after_insert",
    }
)
"""Codex's own triggers on `threads` (0.169): they only fill columns of the row written."""
_BACKUP: Final = "sessionfix_backup"
_RESTORED: Final = "sessionfix_restored"


class InsertRow(NamedTuple):
    """Add the row of a thread the index lacks (the columns its rollout gives)."""

    id: str
    row: dict[str, Any]


class UpdateRow(NamedTuple):
    """Give a thread's row new values in some columns, if it still holds `before`."""

    id: str
    before: dict[str, Any]
    """The carried columns as the repair read them."""
    changed: dict[str, Any]


RowChange = InsertRow | UpdateRow


class CodexRunning(AgentRunning):
    """A process has the index open (Codex, as a rule): nothing was changed."""


class IndexUnsafe(StoreRefused):
    """The index is not one a write can be trusted with: nothing was changed."""


class IndexChanged(SessionfixError):
    """A row is not what the repair read: nothing was changed."""


def _one(db: apsw.Connection, query: str, bindings: tuple[Any, ...] = ()) -> Any:
    row = db.execute(query, bindings).fetchone()
    return None if row is None else row[0]


def _carried(db: apsw.Connection, schema: str, thread_id: str) -> dict[str, Any] | None:
    """The carried columns of a thread's row in `schema`, as the reader reads them."""
    read = carried(columns(db, schema))
    names = ", ".join(map(quoted, read))
    row = db.execute(
        f"SELECT {names} FROM {schema}.{TABLE} WHERE {KEY} = ?", (thread_id,)
    ).fetchone()
    if row is None:
        return None
    return {
        name: value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        for name, value in zip(read, row, strict=True)
    }


def replace_rows(
    path: Path, changes: Sequence[RowChange], *, backup: bool, checked: bool = False
) -> Path | None:
    """Make `changes` to the index's rows in one transaction; returns the backup written
    first (None without `backup`). `checked`: the index passed SQLite's checks before an
    earlier write of this run."""
    where = f"{path} ({KIND})"
    with _writing(path, where, checked=checked) as write:
        db = write.db
        if backup:
            write.back_up(changes)
        kill_point("backed-up")
        db.execute("BEGIN IMMEDIATE")
        write.begun = True
        kill_point("begun")
        present = columns(db)
        for change in changes:
            _apply(db, change, set(present), where)
        kill_point("changed")
        for change in changes:
            expected = (
                {name: change.row.get(name) for name in carried(present)}
                if isinstance(change, InsertRow)
                else {**change.before, **change.changed}
            )
            if _carried(db, "main", change.id) != expected:
                raise SessionfixError(
                    f"{where}: thread {change.id}: the row written differs from the repair; "
                    "nothing changed"
                )
        kill_point("before-commit")
        write.commit()
        kill_point("committed")
    return write.kept[0] if write.kept else None


def _apply(db: apsw.Connection, change: RowChange, present: set[str], where: str) -> None:
    now = _carried(db, "main", change.id)
    if isinstance(change, InsertRow):
        if now is not None:
            raise IndexChanged(
                f"{where}: thread {change.id} has a row since it was read; nothing changed"
            )
        names = [name for name in change.row if name in present]
        db.execute(
            f"INSERT INTO main.{TABLE} ({', '.join(map(quoted, names))}) "
            f"VALUES ({', '.join('?' for _ in names)})",
            tuple(change.row[name] for name in names),
        )
    else:
        if now != change.before:
            raise IndexChanged(
                f"{where}: thread {change.id} changed since it was read; nothing changed"
            )
        names = list(change.changed)
        db.execute(
            f"UPDATE main.{TABLE} SET {', '.join(f'{quoted(n)} = ?' for n in names)} "
            f"WHERE {KEY} = ?",
            (*(change.changed[name] for name in names), change.id),
        )
    if db.changes() != 1:
        raise SessionfixError(f"{where}: thread {change.id}: not written; nothing changed")


class _Write:
    """A write on an index held exclusively: the backups it kept, its transaction."""

    def __init__(self, db: apsw.Connection, real: Path, where: str) -> None:
        self.db = db
        self.real = real
        self.where = where
        self.kept: list[Path] = []
        self.begun = False
        self.committing = False

    def back_up(self, changes: Sequence[RowChange]) -> None:
        self.kept.append(_write_backup(self.db, self.real, changes, self.where))

    def commit(self) -> None:
        with signals_deferred():
            self.committing = True
            self.db.execute("COMMIT")

    def may_have_committed(self) -> bool:
        return self.committing and not self.db.in_transaction


@contextmanager
def _writing(path: Path, where: str, *, checked: bool) -> Iterator[_Write]:
    """The index at `path` held exclusively for a write, once it passes the reader's
    checks, a writer's and, unless `checked`, SQLite's own; on leaving, the write is
    checkpointed into the database file and the index let go. A failure before the
    commit may have been made rolls back and removes the backups."""
    real = Path(os.path.realpath(path))
    version = _reader_checks(path, where)
    db = hold_exclusively(real, path, AGENT, running=CodexRunning)
    try:
        write = _Write(db, real, where)
        with settled(db, write, where, "index"):
            _check_writable(db, version, where)
            if not checked:
                problem = _integrity_problem(db)
                if problem is not None:
                    raise IndexUnsafe(
                        f"{where}: the index fails SQLite's checks ({problem}), so sessionfix "
                        "does not write it; nothing changed"
                    )
            kill_point("held")
            yield write
        checkpoint(db)
        kill_point("checkpointed")
    finally:
        close_quietly(db)


def _reader_checks(path: Path, where: str) -> int:
    """Refuse an index the reader does not read; the schema version the checks read."""
    try:
        db = connect_read_only(path)
    except apsw.Error as exc:
        raise IndexUnsafe(
            f"{where}: cannot read the index ({error_reason(exc)}); nothing changed"
        ) from None
    try:
        version = _one(db, "PRAGMA schema_version")
        missing = REQUIRED - set(columns(db))
    except apsw.Error as exc:
        raise IndexUnsafe(
            f"{where}: cannot read the index ({error_reason(exc)}); nothing changed"
        ) from None
    finally:
        close_quietly(db)
    if missing:
        raise IndexUnsafe(
            f"{where}: its {TABLE} table lacks {', '.join(sorted(missing))}; nothing changed"
        )
    return int(version)


def _check_writable(db: apsw.Connection, version: int, where: str) -> None:
    """Refuse (`IndexUnsafe`) an index a write could harm unseen."""
    if _one(db, "PRAGMA main.schema_version") != version:
        raise IndexUnsafe(f"{where}: the index's schema changed as it was checked; nothing changed")
    if _one(db, "PRAGMA main.encoding") != "UTF-8":
        raise IndexUnsafe(f"{where}: the index's text is not UTF-8; nothing changed")
    for (name,) in db.execute(
        "SELECT name FROM main.sqlite_schema WHERE type = 'trigger' AND lower(tbl_name) = ?",
        (TABLE,),
    ).fetchall():
        if name not in CODEX_TRIGGERS:
            raise IndexUnsafe(
                f"{where}: trigger {name} on {TABLE} is not Codex's, and could write "
                "elsewhere when a row is written; nothing changed"
            )


def _integrity_problem(db: apsw.Connection) -> str | None:
    for (found,) in db.execute("PRAGMA main.integrity_check"):
        for line in str(found).splitlines():
            if line != "ok" and not line.startswith("*** "):
                return line
    return None


# ---- backups ---------------------------------------------------------------------------


def _new_backup_file(real: Path) -> Path:
    stem = f"{real.name}{BACKUP_MARK}"
    for number in itertools.count(1):
        path = real.with_name(f"{stem}{number}{BACKUP_SUFFIX}")
        if os.path.lexists(f"{path}-journal"):
            continue
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")  # pragma: no cover


def _rows_digest(db: apsw.Connection, schema: str, names: list[str]) -> str:
    """Of the backup's rows in `schema`, every column by its type and bytes, and of the
    ids of the rows a repair inserted."""
    digest = xxhash.xxh3_64()
    values = ", ".join(f"typeof({name}), hex({name})" for name in map(quoted, names))
    for row in db.execute(f"SELECT {values} FROM {schema}.{TABLE} ORDER BY {KEY}"):
        digest.update(orjson.dumps(row))
    digest.update(b"\0inserted\0")
    for (thread_id,) in db.execute(f"SELECT id FROM {schema}.inserted ORDER BY id"):
        digest.update(orjson.dumps(thread_id))
    return digest.hexdigest()


def _write_backup(
    db: apsw.Connection, real: Path, changes: Sequence[RowChange], where: str
) -> Path:
    """The rows `changes` mend, every column as stored, and the ids of those they insert,
    copied into a new backup file beside the index and synced to the disk."""
    try:
        path = _new_backup_file(real)
    except OSError as exc:
        raise SessionfixError(
            f"{where}: cannot write a backup beside the index ({described(exc)}); nothing changed"
        ) from None
    try:
        definition = _one(
            db,
            "SELECT sql FROM main.sqlite_schema WHERE type = 'table' AND name = ?",
            (TABLE,),
        )
        made = apsw.Connection(
            database_uri(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI
        )
        try:
            with made:
                made.execute(str(definition))
                made.execute("CREATE TABLE inserted (id TEXT PRIMARY KEY)")
                made.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        finally:
            made.close()
        db.execute("PRAGMA foreign_keys = OFF")
        db.execute(f"ATTACH ? AS {_BACKUP}", (database_uri(path),))
        try:
            db.execute(f"PRAGMA {_BACKUP}.locking_mode = NORMAL").fetchall()
            db.execute(f"PRAGMA {_BACKUP}.synchronous = FULL")
            names = columns(db, _BACKUP)
            listed = ", ".join(map(quoted, names))
            with db:
                for change in changes:
                    if isinstance(change, InsertRow):
                        db.execute(f"INSERT INTO {_BACKUP}.inserted VALUES (?)", (change.id,))
                    else:
                        db.execute(
                            f"INSERT INTO {_BACKUP}.{TABLE} ({listed}) SELECT {listed} "
                            f"FROM main.{TABLE} WHERE {KEY} = ?",
                            (change.id,),
                        )
                kill_point("backup")
                db.executemany(
                    f"INSERT INTO {_BACKUP}.meta VALUES (?, ?)",
                    [
                        ("sessionfix", __version__),
                        ("taken", datetime.now(UTC).isoformat()),
                        ("database", escape_surrogates(str(real))),
                        ("rows", str(_one(db, f"SELECT count(*) FROM {_BACKUP}.{TABLE}"))),
                        ("inserted", str(_one(db, f"SELECT count(*) FROM {_BACKUP}.inserted"))),
                        ("rows_digest", _rows_digest(db, _BACKUP, names)),
                    ],
                )
        finally:
            db.execute(f"DETACH {_BACKUP}")
            db.execute("PRAGMA foreign_keys = ON")
        sync_to_disk(path)
    except BaseException as exc:
        with suppress(OSError):
            path.unlink()
        if isinstance(exc, (apsw.Error, OSError)):
            reason = error_reason(exc) if isinstance(exc, apsw.Error) else described(exc)
            raise SessionfixError(
                f"{where}: cannot write a backup beside the index ({reason}); nothing changed"
            ) from None
        raise
    return path


def list_backups(path: Path) -> list[StoreBackup]:
    """The backups beside the index, newest first, each `ok` when it holds the rows its
    `meta` records, else `damaged`."""
    found: list[tuple[str, int, StoreBackup]] = []
    for backup, number in backups_beside(path, BACKUP_MARK, BACKUP_SUFFIX):
        if not number.isdigit():
            continue
        meta, status = read_backup(backup, _holds_recorded_rows)
        counts = [meta.get(key, "") for key in ("rows", "inserted")]
        rows = sum(int(count) for count in counts if count.isdigit())
        taken = meta.get("taken", "")
        found.append((taken, int(number), StoreBackup(backup, SESSION, taken, rows, status)))
    return newest_first(found)


def _holds_recorded_rows(db: apsw.Connection, meta: dict[str, str]) -> bool:
    counts = [
        str(_one(db, f"SELECT count(*) FROM {TABLE}")),
        str(_one(db, "SELECT count(*) FROM inserted")),
    ]
    return counts == [meta.get("rows"), meta.get("inserted")] and meta.get(
        "rows_digest"
    ) == _rows_digest(db, "main", columns(db))


def restore_rows(path: Path, backup: str | None, *, keep_current: bool) -> Path:
    """Put back the rows a backup holds and remove the rows its repair inserted, in one
    transaction (the newest intact backup, or the one named `backup`); with
    `keep_current`, back up the rows this replaces first. Returns the backup restored."""
    chosen = chosen_backup(list_backups(path), path, SESSION, backup)
    where = f"{path} ({KIND})"
    with _writing(path, where, checked=False) as write:
        db = write.db
        try:
            db.execute(f"ATTACH ? AS {_RESTORED}", (read_only_uri(chosen.path),))
        except apsw.Error as exc:
            raise SessionfixError(
                f"{where}: cannot read the backup {chosen.path} ({error_reason(exc)}); "
                "nothing changed"
            ) from None
        held = columns(db, _RESTORED)
        lost = sorted(set(held) - set(columns(db)))
        if lost:
            raise SessionfixError(
                f"{where}: the backup holds column {lost[0]} of {TABLE}, which the index "
                "does not; not restored"
            )
        mended = [str(r[0]) for r in db.execute(f"SELECT {KEY} FROM {_RESTORED}.{TABLE}")]
        inserted = [str(r[0]) for r in db.execute(f"SELECT id FROM {_RESTORED}.inserted")]
        if keep_current:
            touched = dict.fromkeys([*mended, *inserted])
            write.back_up(
                [
                    UpdateRow(thread_id, {}, {})
                    if _carried(db, "main", thread_id) is not None
                    else InsertRow(thread_id, {})
                    for thread_id in touched
                ]
            )
        db.execute("BEGIN IMMEDIATE")
        write.begun = True
        kill_point("restore-begun")
        for thread_id in inserted:
            db.execute(f"DELETE FROM main.{TABLE} WHERE {KEY} = ?", (thread_id,))
        listed = ", ".join(map(quoted, held))
        for thread_id in mended:
            db.execute(f"DELETE FROM main.{TABLE} WHERE {KEY} = ?", (thread_id,))
            db.execute(
                f"INSERT INTO main.{TABLE} ({listed}) SELECT {listed} FROM {_RESTORED}.{TABLE} "
                f"WHERE {KEY} = ?",
                (thread_id,),
            )
        kill_point("restore-changed")
        write.commit()
    check_integrity(path, write.kept)
    return chosen.path


def check_integrity(path: Path, backups: Sequence[Path]) -> None:
    """`PRAGMA integrity_check` on the index after a run's writes, through a read-only
    connection, when it is in WAL mode (as Codex keeps it: the check then blocks no
    writer)."""
    where = f"{path} ({KIND})"
    kept = f"; the rows it replaced are in {', '.join(map(str, backups))}" if backups else ""
    try:
        db = connect_read_only(path)
    except apsw.Error as exc:
        raise SessionfixError(
            f"{where}: written, but cannot be read again ({error_reason(exc)}){kept}"
        ) from None
    try:
        if _one(db, "PRAGMA journal_mode") != "wal":
            return
        problem = _integrity_problem(db)
    except apsw.Error as exc:
        problem = error_reason(exc)
    finally:
        close_quietly(db)
    if problem is not None:
        raise SessionfixError(
            f"{where}: written, but the index then failed SQLite's checks ({problem}){kept}"
        )
