"""Rewriting one session of an OpenClaw store, as OpenClaw rewrites a transcript itself.

Only a store a rewrite cannot harm unseen is written: of the agent schema sessionfix
knows; with no foreign key into the rewritten tables and no trigger on them but
OpenClaw's own (an unknown one could delete or change rows elsewhere with the session's);
whose touched tables pass SQLite's integrity check (once a run, before the first write:
rows are found through the indexes, and a broken one hides rows from the rewrite).

In one `BEGIN IMMEDIATE` transaction (busy timeout 0: a store OpenClaw is writing is
refused, never waited on): the session's `transcript_events`,
`transcript_event_identities`, active-path and search rows are replaced; the index
state is marked for rebuild (OpenClaw rebuilds its projections from the events); the
`transcript_rewrite_watermarks` generation rotates, which tells OpenClaw's readers that
the transcript was rewritten; `session_windows.transcript_updated_at` moves on. A row
that a repair copies unchanged is copied inside the database with all its columns,
whatever the table holds (its bytes, compression and `created_at`, and columns
sessionfix does not know); a new or changed row takes the `created_at` and the unknown
columns of the row it came from (a line written before the first row, that of the row
before it). Before the commit the new rows are read back and must be the verified repair
byte for byte, and `foreign_key_check` must be empty; any failure rolls everything
back. The commit runs with the run's signals held, and once it may have been made the
backup stays whatever follows; a passive checkpoint then moves it into the database
file. After the commit the whole store must pass `PRAGMA integrity_check`.

The backup is the session's own rows, every column as stored, in a small SQLite file
beside the store (`openclaw-agent.sqlite.sessionfix-bak-<stamp>-<session>.sqlite`):
restoring it replaces only that session, so sessions OpenClaw wrote since are not
rolled back, as restoring a copy of the whole database would do.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

import apsw
import orjson
import xxhash
import zstandard

from sessionfix.errors import SessionfixError
from sessionfix.escapes import escape_surrogates
from sessionfix.formats.openclaw_store.database import (
    decompressed_row,
    file_name,
    schema_problem,
)
from sessionfix.formats.openclaw_store.liveness import check_not_running
from sessionfix.interrupts import signals_deferred
from sessionfix.read.sqlite import connect_read_only, database_uri, quoted, read_only_uri
from sessionfix.stores import Origins, StoreBackup, StoreRefused, Transcript, chosen_backup

BACKUP_MARK: Final = ".sessionfix-bak-"
_KNOWN_COLUMNS: Final = (
    "event_json",
    "created_at",
    "event_zstd",
    "event_utf8_bytes",
    "navigation_json",
)
"""The event columns of schema 23 a rewrite writes (besides `session_id` and `seq`)."""
_SIX_COLUMNS: Final = "seq, event_json, created_at, event_zstd, event_utf8_bytes, navigation_json"
"""The columns of a backup written before backups recorded theirs."""
_CHECK_EVERY: Final = 4096
"""Rows between checks for an interrupt while rows are copied (see `_kill_point`)."""


class OpenedStore(Protocol):
    """The store a rewrite or a restore goes to (`store.OpenClawStore`)."""

    path: Path
    """As the user named it (what messages show)."""
    real: Path
    """The file it is (symbolic links resolved)."""
    tables_checked: bool
    """Whether the tables a rewrite touches passed SQLite's integrity check."""


class StoreBusy(StoreRefused):
    """The store is being written (a lock is held): nothing was changed."""


class StoreChanged(SessionfixError):
    """The session changed between the read and the write: nothing was changed."""


class StoreUnsafe(StoreRefused):
    """The store holds what a rewrite could harm unseen, or cannot be trusted to show
    its rows (an unknown schema, foreign key or trigger; a failed integrity check):
    nothing was changed."""


_DELETED: Final = (
    "transcript_events",
    "transcript_event_identities",
    "session_transcript_active_events",
    "session_transcript_fts_rows",
)
"""The tables whose rows of the session a rewrite deletes (and writes anew)."""
_UPDATED: Final = {
    "session_transcript_index_state": frozenset({"needs_rebuild", "updated_at"}),
    "transcript_rewrite_watermarks": frozenset({"generation", "updated_at"}),
    "session_windows": frozenset({"transcript_updated_at"}),
}
"""The tables a rewrite updates (or adds a row to), with the columns it sets."""
_KNOWN_REFERENCES: Final = frozenset(
    {
        ("transcript_event_identities", "transcript_events"),
        ("session_transcript_active_events", "transcript_events"),
    }
)
"""OpenClaw's foreign keys into the deleted tables: (table, the table it refers to);
their rows are the session's, and a rewrite deletes and writes them itself."""
_KNOWN_TRIGGERS: Final = {
    "session_transcript_fts_rows_after_delete": (
        "7f9b399c2169e79ab8c6b76984679f729ed5ce69cb68a2864cb408ae82e234c4"
    ),
    "session_windows_canonical_pending_after_delete": (
        "bbd00aaa42a7077a3a3f81f9389e892807f1f225ee3f19ac37df741a9b618528"
    ),
    "session_windows_canonical_pending_after_insert": (
        "775d14a90e2da839d75ed8774d1c6a87d255576fbd6c5fb0dc0a73fdd283efde"
    ),
    "session_windows_canonical_pending_after_update": (
        "b331dc0bffb256df5ee7fe87d1edb382c53686e2169a7f038d03b1b95b7c0566"
    ),
}
"""OpenClaw 2026.9's triggers on the tables a rewrite writes, by name: the SHA-256 of
their SQL, its white space collapsed (the search index's clean-up, and the session
windows' canonical-validation queue, which a rewrite does not fire)."""
_SEARCH_TABLES: Final = "session_transcript_fts"
"""The prefix of the full-text search table and its shadow tables, which the search
index's clean-up trigger writes."""
_CHECKED_TABLES: Final = (*_DELETED, *_UPDATED, "session_transcript_cold_archives")
"""The tables a rewrite reads or writes, checked for integrity before the first one."""


def replace_session(
    store: OpenedStore,
    transcript: Transcript,
    repaired: Path,
    origins: Origins,
    *,
    backup: bool,
) -> Path | None:
    session_id = transcript.session.id
    where = f"{store.path} (session {session_id})"
    if transcript.session.cold:
        raise SessionfixError(
            f"{where}: the session is cold-archived; OpenClaw restores it to the store when "
            "it is opened, then it can be repaired (or repair it to a file with -o)"
        )
    if transcript.multiline:
        raise SessionfixError(
            f"{where}: a row holds a line break, so its lines cannot be written back row by "
            "row; repair it to a file with -o"
        )
    with _rewrite(store, session_id, where) as rewrite:
        db = rewrite.db
        _check_unchanged(db, transcript, where)
        if backup:
            rewrite.kept = _write_backup(store.real, session_id, rewrite.columns)
        _kill_point("begun")
        new_rows = _replace_rows(db, session_id, transcript, repaired, origins, rewrite.columns)
        _mark_rewritten(db, session_id)
        _verify(db, session_id, repaired, new_rows, where)
        _kill_point("before-commit")
    return rewrite.kept


class _Rewrite:
    """A write transaction on one session of the store: the event columns it writes,
    the digest of the session's rows before it, and the backup it kept (removed on
    rollback, kept once the commit may have been made)."""

    def __init__(self, db: apsw.Connection, session_id: str) -> None:
        self.db = db
        self.session_id = session_id
        self.columns: tuple[str, ...] = ()
        self.before = ""
        self.kept: Path | None = None
        self.committing = False

    def rows_digest(self) -> str:
        return _rows_digest(
            self.db,
            self.columns,
            "main.transcript_events WHERE session_id = ?",
            (self.session_id,),
        )

    def may_have_committed(self) -> bool:
        """After COMMIT began: whether the store may hold the rewrite (the transaction
        ended, and the session's rows are not, or cannot be read to be, those before)."""
        if not self.committing or self.db.in_transaction:
            return False
        try:
            return self.rows_digest() != self.before
        except apsw.Error:
            return True


@contextmanager
def _rewrite(
    store: OpenedStore, session_id: str, where: str, attach: Path | None = None
) -> Iterator[_Rewrite]:
    """One `BEGIN IMMEDIATE` transaction on a store `_check_writable` admits, refused
    while OpenClaw runs (`attach`: a backup to read from, attached read-only): committed
    when the block ends, with the run's signals held; rolled back, its backup removed,
    when it raises before the commit may have been made; a failed statement is one line
    naming `where`."""
    check_not_running(store.real)
    db = _connect_write(store.real)
    try:
        if attach is not None:
            _attach_backup(db, attach, where)
        _begin(db, where)
        rewrite = _Rewrite(db, session_id)
        try:
            rewrite.columns = _check_writable(db, store, where)
            rewrite.before = rewrite.rows_digest()
            yield rewrite
            with signals_deferred():
                rewrite.committing = True
                db.execute("COMMIT")
        except BaseException as exc:
            if rewrite.may_have_committed():
                if isinstance(exc, apsw.Error):
                    raise _commit_failed(where, exc, rewrite.kept) from None
                raise
            with suppress(apsw.Error):
                db.execute("ROLLBACK")
            if rewrite.kept is not None:
                with suppress(OSError):
                    rewrite.kept.unlink()
            if isinstance(exc, apsw.Error):
                raise _write_failed(where, exc) from None
            raise
        _checkpoint(db)
    finally:
        _close(db)


def _checkpoint(db: apsw.Connection) -> None:
    """Move what the commit wrote from the write-ahead log into the database file
    (`PASSIVE`: never waits for a reader), so the file itself holds it: the run's
    read-only connections cannot checkpoint when they close. What a reader still uses
    stays in the log, where SQLite finds it."""
    with suppress(apsw.Error):
        db.execute("PRAGMA main.wal_checkpoint(PASSIVE)").fetchall()


def _check_writable(db: apsw.Connection, store: OpenedStore, where: str) -> tuple[str, ...]:
    """Refuse (`StoreUnsafe`) a store a rewrite could harm unseen; return the event
    columns it writes besides `session_id` and `seq`, as the table has them."""
    problem = schema_problem(db)
    if problem is not None:
        raise StoreUnsafe(f"{where}: the store's {problem}; nothing changed")
    _check_references(db, where)
    _check_triggers(db, where)
    if not store.tables_checked:
        _check_tables(db, where)
        store.tables_checked = True
    columns = tuple(
        name
        for _, name, _, _, _, _, hidden in db.execute("PRAGMA main.table_xinfo(transcript_events)")
        if hidden == 0 and name not in ("session_id", "seq")
    )
    missing = [name for name in _KNOWN_COLUMNS if name not in columns]
    if missing:
        raise StoreUnsafe(
            f"{where}: the store's events have no column {missing[0]}; nothing changed"
        )
    return columns


def _check_references(db: apsw.Connection, where: str) -> None:
    """No foreign key but OpenClaw's into a table whose rows a rewrite deletes, nor into
    a column it updates: its rows would be deleted or changed with the session's."""
    for table, parent, column in db.execute(
        'SELECT m.name, f."table", f."to" FROM main.sqlite_schema AS m, '
        "pragma_foreign_key_list(m.name) AS f WHERE m.type = 'table'"
    ).fetchall():
        child, target = str(table).lower(), str(parent).lower()
        if target in _DELETED:
            unsafe = (child, target) not in _KNOWN_REFERENCES
        else:
            updated = _UPDATED.get(target, frozenset())
            unsafe = column is not None and str(column).lower() in updated
        if unsafe:
            raise StoreUnsafe(
                f"{where}: table {table} refers to {parent} by a foreign key sessionfix does "
                "not know, so a rewrite could delete or change its rows; nothing changed"
            )


def _check_triggers(db: apsw.Connection, where: str) -> None:
    """No trigger but OpenClaw's own on a table a rewrite writes: an unknown one could
    write elsewhere when it fires."""
    watched = {*_DELETED, *_UPDATED}
    for name, table, sql in db.execute(
        "SELECT name, tbl_name, sql FROM main.sqlite_schema WHERE type = 'trigger'"
    ).fetchall():
        target = str(table).lower()
        if target not in watched and not target.startswith(_SEARCH_TABLES):
            continue
        digest = hashlib.sha256(" ".join(str(sql).split()).encode()).hexdigest()
        if _KNOWN_TRIGGERS.get(str(name)) != digest:
            raise StoreUnsafe(
                f"{where}: trigger {name} on {table} is not one sessionfix knows, and could "
                "write elsewhere when the session is rewritten; nothing changed"
            )


def _check_tables(db: apsw.Connection, where: str) -> None:
    """The tables a rewrite reads and writes pass SQLite's integrity check, their
    indexes included: rows are found through them."""
    for table in _CHECKED_TABLES:
        problems = [str(row[0]) for row in db.execute(f"PRAGMA main.integrity_check({table})")]
        if problems != ["ok"]:
            raise StoreUnsafe(
                f"{where}: the store fails SQLite's integrity check ({problems[0]}); "
                "nothing changed"
            )


def _commit_failed(where: str, error: apsw.Error, kept: Path | None) -> SessionfixError:
    """A COMMIT that failed after the transaction ended: it may have been made."""
    kind, _, reason = str(error).partition(": ")
    backup = f"; the rows it replaced are kept in {kept}" if kept is not None else ""
    return SessionfixError(
        f"{where}: the commit failed ({reason if reason else kind}), and the store may "
        f"hold the rewrite or not{backup}"
    )


def _attach_backup(db: apsw.Connection, backup: Path, where: str) -> None:
    try:
        db.execute("ATTACH ? AS sessionfix_backup", (read_only_uri(backup),))
    except apsw.Error as exc:
        raise SessionfixError(f"{where}: cannot read the backup {backup} ({exc})") from None


class IntegrityFailed(SessionfixError):
    """The store fails SQLite's integrity check after a committed rewrite."""


def check_integrity(path: Path, where: str, backups: Sequence[Path] = ()) -> None:
    """Run `PRAGMA integrity_check` on the whole store after a commit. In WAL mode (as
    OpenClaw keeps its stores) a reader never blocks OpenClaw's writers, so the check
    runs outside the write transaction; in rollback-journal mode it would hold them
    off for the length of the scan, and is left to `sqlite3 STORE 'PRAGMA
    integrity_check'`."""
    try:
        db = connect_read_only(path)
    except apsw.Error as exc:
        raise _checked_failed(where, str(exc), backups) from None
    try:
        if _one(db, "PRAGMA journal_mode") != "wal":
            return
        problems = [str(row[0]) for row in db.execute("PRAGMA integrity_check")]
    except apsw.Error as exc:
        raise _checked_failed(where, str(exc), backups) from None
    finally:
        _close(db)
    if problems != ["ok"]:
        raise _checked_failed(where, problems[0], backups)


def _checked_failed(where: str, problem: str, backups: Sequence[Path]) -> IntegrityFailed:
    kept = f"; the rows it replaced are in {', '.join(map(str, backups))}" if backups else ""
    return IntegrityFailed(
        f"{where}: rewritten, but the store then failed SQLite's integrity check ({problem}){kept}"
    )


def _write_failed(where: str, error: apsw.Error) -> SessionfixError:
    """A failed statement of a rewrite (a full disk, an I/O error), rolled back."""
    kind, _, reason = str(error).partition(": ")
    return SessionfixError(
        f"{where}: cannot write the store ({reason if reason else kind}); nothing changed"
    )


def _close(db: apsw.Connection) -> None:
    """Close; a checkpoint that fails on close (a full disk) leaves the committed rows in
    the write-ahead log, where SQLite finds them."""
    with suppress(apsw.Error):
        db.close()


def _connect_write(path: Path) -> apsw.Connection:
    try:
        db = apsw.Connection(
            database_uri(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI
        )
        db.set_busy_timeout(0)
        db.execute("PRAGMA foreign_keys = ON")
    except apsw.Error as exc:
        raise _write_failed(str(path), exc) from None
    return db


def _begin(db: apsw.Connection, where: str) -> None:
    try:
        db.execute("BEGIN IMMEDIATE")
    except apsw.BusyError:
        raise StoreBusy(
            f"{where}: the store is being written (OpenClaw is running?); nothing changed"
        ) from None
    except apsw.Error as exc:
        raise _write_failed(where, exc) from None


def _check_unchanged(db: apsw.Connection, transcript: Transcript, where: str) -> None:
    digest = xxhash.xxh3_64()
    for seq, text, packed, created in db.execute(
        "SELECT seq, CAST(event_json AS BLOB), event_zstd, created_at FROM transcript_events "
        "WHERE session_id = ? ORDER BY seq",
        (transcript.session.id,),
    ):
        digest.update(b"%d %d\n" % (seq, created))
        digest.update(text if text is not None else packed or b"")
    if digest.hexdigest() != transcript.digest:
        raise StoreChanged(f"{where}: changed while being repaired; nothing written")
    cold = db.execute(
        "SELECT 1 FROM session_transcript_cold_archives WHERE session_id = ?",
        (transcript.session.id,),
    ).fetchone()
    if cold is not None:
        raise StoreChanged(f"{where}: archived while being repaired; nothing written")


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb", buffering=1 << 20) as handle:
        for line in handle:
            yield line[:-1] if line.endswith(b"\n") else line


def _replace_rows(
    db: apsw.Connection,
    session_id: str,
    transcript: Transcript,
    repaired: Path,
    origins: Origins,
    columns: Sequence[str],
) -> int:
    """Replace the session's rows by the repaired lines; returns how many rows it has."""
    names = ", ".join(map(quoted, columns))
    db.execute(f"CREATE TEMP TABLE sessionfix_old (seq INTEGER PRIMARY KEY, {names})")
    db.execute(
        f"INSERT INTO temp.sessionfix_old (seq, {names}) SELECT seq, {names} "
        "FROM main.transcript_events WHERE session_id = ?",
        (session_id,),
    )
    _delete_session_rows(db, session_id)
    copy = (
        f"INSERT INTO main.transcript_events (session_id, seq, {names}) "
        f"SELECT ?, ?, {names} FROM temp.sessionfix_old WHERE seq = ?"
    )
    unknown = "".join(", " + quoted(name) for name in columns if name not in _KNOWN_COLUMNS)
    changed = (
        "INSERT INTO main.transcript_events (session_id, seq, event_json, created_at, "
        f"event_zstd, event_utf8_bytes, navigation_json{unknown}) "
        f"SELECT ?, ?, CAST(? AS TEXT), created_at, NULL, ?, NULL{unknown} "
        "FROM temp.sessionfix_old WHERE seq = ?"
    )
    new = (
        "INSERT INTO main.transcript_events (session_id, seq, event_json, created_at, "
        "event_utf8_bytes) VALUES (?, ?, CAST(? AS TEXT), ?, ?)"
    )
    utf8 = _one(db, "PRAGMA main.encoding") == "UTF-8"
    identities = _Identities(session_id)
    last_created = int(time.time() * 1000)
    seq = -1
    for seq, line in enumerate(_lines(repaired)):
        if seq % _CHECK_EVERY == 0:
            _kill_point("rows")
        origin, copied = origins(seq + 1)
        old_seq = transcript.row_of(origin)
        size = len(line) if utf8 else None
        if old_seq is None:
            db.execute(new, (session_id, seq, line, last_created, size))
        elif copied:
            db.execute(copy, (session_id, seq, old_seq))
        else:
            db.execute(changed, (session_id, seq, line, size, old_seq))
        last_created = _one(
            db,
            "SELECT created_at FROM main.transcript_events WHERE session_id = ? AND seq = ?",
            (session_id, seq),
        )
        identity = identities.row(seq, line, last_created)
        if identity is not None:
            db.execute(_INSERT_IDENTITY, identity)
    db.execute("DROP TABLE temp.sessionfix_old")
    return seq + 1


def _delete_session_rows(db: apsw.Connection, session_id: str) -> None:
    """Remove the session's events with what is derived from them (identities, the active
    path, the search rows); OpenClaw rebuilds the projections from the events."""
    for table in (
        "session_transcript_fts_rows",
        "session_transcript_active_events",
        "transcript_event_identities",
        "transcript_events",
    ):
        db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))


class _Identities:
    """Identity rows as OpenClaw writes them on a replace: one per event id (the first),
    each message idempotency key on its first holder only."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._ids: set[str] = set()
        self._keys: set[str] = set()

    def row(self, seq: int, line: bytes, created: int) -> tuple[Any, ...] | None:
        facts = _identity(line)
        if facts is None or facts[0] in self._ids:
            return None
        event_id, event_type, parent_id, key = facts
        self._ids.add(event_id)
        if key is not None:
            if key in self._keys:
                key = None
            else:
                self._keys.add(key)
        return (self.session_id, event_id, seq, event_type, parent_id, key, created)


_INSERT_IDENTITY: Final = (
    "INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, "
    "parent_id, message_idempotency_key, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _stored_rows(
    db: apsw.Connection, session_id: str, where: str
) -> Iterator[tuple[int, bytes, int]]:
    """(seq, event bytes, created_at) of the session's rows, compressed ones decompressed
    up to the size they record."""
    decompressor = zstandard.ZstdDecompressor()
    for seq, text, packed, size, created in db.execute(
        "SELECT seq, CAST(event_json AS BLOB), event_zstd, event_utf8_bytes, created_at "
        "FROM main.transcript_events WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ):
        if text is None:
            text = decompressed_row(decompressor, packed, size, f"{where}, seq {seq}")
        yield seq, text, created


def _check_foreign_keys(db: apsw.Connection, doing: str) -> None:
    for table in ("transcript_events", "transcript_event_identities"):
        if db.execute(f"PRAGMA foreign_key_check({table})").fetchone() is not None:
            raise SessionfixError(f"{doing} breaks a foreign key of {table}; nothing changed")


def _identity(line: bytes) -> tuple[str, str | None, str | None, str | None] | None:
    """What OpenClaw indexes a row by: its id, type, parent and message idempotency key."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(event, dict):
        return None
    raw_id = event.get("id")
    if not isinstance(raw_id, str) or not raw_id.strip():
        return None
    kind = event.get("type")
    parent = event.get("parentId")
    message = event.get("message")
    key = message.get("idempotencyKey") if isinstance(message, dict) else None
    return (
        raw_id.strip(),
        kind if isinstance(kind, str) else None,
        parent if isinstance(parent, str) else None,
        key.strip() if isinstance(key, str) and key.strip() else None,
    )


def _mark_rewritten(db: apsw.Connection, session_id: str) -> None:
    now = int(time.time() * 1000)
    db.execute(
        "UPDATE session_transcript_index_state SET needs_rebuild = 1, updated_at = ? "
        "WHERE session_id = ?",
        (now, session_id),
    )
    db.execute(
        "INSERT INTO transcript_rewrite_watermarks (session_id, generation, updated_at) "
        "VALUES (?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
        "generation = excluded.generation, updated_at = excluded.updated_at",
        (session_id, uuid.uuid4().hex, now),
    )
    row = db.execute(
        "SELECT transcript_updated_at, transcript_observed_at FROM session_windows "
        "WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    if row is not None:
        updated, observed = row
        moved = max(now, (updated if updated is not None else -1) + 1)
        moved = max(moved, (observed if observed is not None else -1) + 1)
        db.execute(
            "UPDATE session_windows SET transcript_updated_at = ? WHERE session_id = ?",
            (moved, session_id),
        )


def _verify(db: apsw.Connection, session_id: str, repaired: Path, count: int, where: str) -> None:
    """The rows now stored are the repaired lines, and every foreign key holds."""
    written = xxhash.xxh3_64()
    expected = xxhash.xxh3_64()
    rows = 0
    for _, data, _ in _stored_rows(db, session_id, where):
        written.update(data)
        written.update(b"\n")
        rows += 1
    for line in _lines(repaired):
        expected.update(line)
        expected.update(b"\n")
    if rows != count or written.digest() != expected.digest():
        raise SessionfixError(f"{where}: the rows written differ from the repair; nothing changed")
    _check_foreign_keys(db, f"{where}: the rewrite")


def _one(db: apsw.Connection, query: str, bindings: tuple[Any, ...] = ()) -> Any:
    """The single value a query returns."""
    row = db.execute(query, bindings).fetchone()
    assert row is not None, query
    return row[0]


def _kill_point(name: str) -> None:
    """Tests stop the process here (`SESSIONFIX_KILL_AT=<name>`) to prove a rewrite cut
    short leaves the store as it was."""
    if os.environ.get("SESSIONFIX_KILL_AT") == name:
        os.kill(os.getpid(), 9)


# ---- backups -------------------------------------------------------------------------


def _backup_name(store: Path, session_id: str, taken: datetime) -> Path:
    stamp = taken.strftime("%Y%m%dT%H%M%S%fZ")
    return store.with_name(f"{store.name}{BACKUP_MARK}{stamp}-{file_name(session_id)}.sqlite")


def _write_backup(store: Path, session_id: str, columns: Sequence[str]) -> Path:
    """Copy the session's rows, every column as stored, into a new backup file beside the
    store, committed (and synced) before the store is changed. The rows are copied by
    SQLite from the store attached read-only: the rewrite's transaction holds the write
    lock, so they are the rows it replaces."""
    taken = datetime.now(UTC)
    path = _backup_name(store, session_id, taken)
    try:
        with open(path, "xb"):
            pass
        os.chmod(path, 0o600)
        copy = apsw.Connection(
            database_uri(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_URI
        )
    except (OSError, apsw.Error) as exc:
        with suppress(OSError):
            path.unlink()
        raise SessionfixError(
            f"{store}: cannot write a backup beside it ({exc}); nothing changed"
        ) from None
    names = ", ".join(map(quoted, columns))
    try:
        copy.execute("PRAGMA synchronous = FULL")
        copy.execute("ATTACH ? AS store", (read_only_uri(store),))
        with copy:
            copy.execute("CREATE TABLE main.meta (key TEXT PRIMARY KEY, value TEXT) STRICT")
            copy.execute(f"CREATE TABLE main.events (seq INTEGER PRIMARY KEY, {names})")
            copy.execute(
                f"INSERT INTO main.events (seq, {names}) SELECT seq, {names} "
                "FROM store.transcript_events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
            rows = _one(copy, "SELECT count(*) FROM main.events")
            copy.executemany(
                "INSERT INTO main.meta VALUES (?, ?)",
                [
                    ("session_id", session_id),
                    ("store", escape_surrogates(str(store))),
                    ("taken", taken.isoformat()),
                    ("rows", str(rows)),
                    ("columns", orjson.dumps(list(columns)).decode()),
                    ("digest", _events_digest(copy, columns)),
                ],
            )
        copy.execute("DETACH store")
    except BaseException as exc:
        copy.close()
        with suppress(OSError):
            path.unlink()
        if isinstance(exc, apsw.Error):
            raise SessionfixError(
                f"{store}: cannot write a backup beside it ({exc}); nothing changed"
            ) from None
        raise
    copy.close()
    return path


def _events_digest(db: apsw.Connection, columns: Sequence[str] | None) -> str:
    """Of a backup's rows (`columns`: the backup's, None for one written before backups
    recorded them, which holds the six of schema 23 with the event as bytes)."""
    if columns is not None:
        return _rows_digest(db, columns, "main.events")
    digest = xxhash.xxh3_64()
    for row in db.execute(f"SELECT {_SIX_COLUMNS} FROM main.events ORDER BY seq"):
        digest.update(orjson.dumps([v.hex() if isinstance(v, bytes) else v for v in row]))
    return digest.hexdigest()


def _rows_digest(
    db: apsw.Connection, columns: Sequence[str], rows: str, bindings: tuple[Any, ...] = ()
) -> str:
    """Of the rows `FROM {rows}` in `seq` order: each value of `columns` by its type and
    bytes, as stored (text that is not UTF-8 included)."""
    digest = xxhash.xxh3_64()
    values = "".join(f", typeof({name}), hex({name})" for name in map(quoted, columns))
    for row in db.execute(f"SELECT seq{values} FROM {rows} ORDER BY seq", bindings):
        digest.update(orjson.dumps(row))
    return digest.hexdigest()


def list_backups(store: Path, session_id: str | None) -> list[StoreBackup]:
    """The backups beside `store` (of one session, or all), newest first, each checked."""
    found: list[StoreBackup] = []
    try:
        candidates = [
            p for p in store.parent.iterdir() if p.name.startswith(store.name + BACKUP_MARK)
        ]
    except OSError:
        return []
    for path in candidates:
        meta, status = _read_backup(path)
        sid = meta.get("session_id", "")
        if session_id is not None and sid != session_id:
            continue
        found.append(
            StoreBackup(path, sid, meta.get("taken", ""), int(meta.get("rows", "0") or 0), status)
        )
    found.sort(key=lambda b: (b.taken, b.path.name), reverse=True)
    return found


def _read_backup(path: Path) -> tuple[dict[str, str], str]:
    try:
        db = apsw.Connection(
            read_only_uri(path), flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        )
    except apsw.Error:
        return {}, "damaged"
    try:
        meta = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta")}
        columns = orjson.loads(meta["columns"]) if "columns" in meta else None
        if columns is not None and not (
            isinstance(columns, list) and all(isinstance(name, str) for name in columns)
        ):
            return meta, "damaged"
        intact = meta.get("digest") == _events_digest(db, columns)
        return meta, "ok" if intact else "damaged"
    except (apsw.Error, ValueError):  # a record that is not JSON, or not UTF-8 text
        return {}, "damaged"
    finally:
        db.close()


def restore_session(
    store: OpenedStore, session_id: str, name: str | None, *, keep_current: bool
) -> Path:
    """Replace the session's rows by a backup's (the newest intact one, or `name`)."""
    chosen = chosen_backup(list_backups(store.real, session_id), store.path, session_id, name)
    where = f"{store.path} (session {session_id})"
    with _rewrite(store, session_id, where, attach=chosen.path) as rewrite:
        db = rewrite.db
        if db.execute(
            "SELECT 1 FROM main.session_transcript_cold_archives WHERE session_id = ?",
            (session_id,),
        ).fetchone():
            raise SessionfixError(f"{where}: the session is cold-archived; nothing changed")
        if keep_current:
            rewrite.kept = _write_backup(store.real, session_id, rewrite.columns)
        _delete_session_rows(db, session_id)
        _copy_backup_rows(db, session_id, rewrite.columns, where)
        _restore_identities(db, session_id, where)
        _mark_rewritten(db, session_id)
        _check_foreign_keys(db, f"{where}: restoring")
    kept = rewrite.kept
    check_integrity(store.real, where, [kept] if kept is not None else [])
    return chosen.path


def _copy_backup_rows(
    db: apsw.Connection, session_id: str, columns: Sequence[str], where: str
) -> None:
    """Insert the attached backup's rows, every column it holds, as SQLite copies them
    (a column the store has and the backup has not takes its default)."""
    held = [
        str(row[1])
        for row in db.execute("PRAGMA sessionfix_backup.table_info(events)")
        if row[1] != "seq"
    ]
    lost = [name for name in held if name not in columns]
    if lost:
        raise SessionfixError(
            f"{where}: the backup holds column {lost[0]}, which the store's events do not; "
            "not restored"
        )
    names = ", ".join(map(quoted, held))
    values = ", ".join(
        f"CAST({quoted(name)} AS TEXT)" if name == "event_json" else quoted(name) for name in held
    )
    db.execute(
        f"INSERT INTO main.transcript_events (session_id, seq, {names}) "
        f"SELECT ?, seq, {values} FROM sessionfix_backup.events ORDER BY seq",
        (session_id,),
    )


def _restore_identities(db: apsw.Connection, session_id: str, where: str) -> None:
    identities = _Identities(session_id)
    rows = [
        row
        for seq, data, created in _stored_rows(db, session_id, where)
        if (row := identities.row(seq, data, created)) is not None
    ]
    db.executemany(_INSERT_IDENTITY, rows)
