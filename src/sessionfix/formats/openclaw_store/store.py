"""Reading an OpenClaw agent store: its sessions, and each one's rows as transcript lines.

Always through a read-only connection (`mode=ro`): a scan never writes, never takes a
write lock, and in WAL mode never blocks OpenClaw's writers. Only the agent schema
OpenClaw 2026.9 writes is read; and only a store whose events' primary key index holds an
entry for every row: every read of them goes through it, and it alone. Rows are read as bytes
(`CAST(... AS BLOB)`), so a line is exactly what the row stores; a row OpenClaw keeps
zstd-compressed (`event_json` NULL) is decompressed up to the size it records. A
cold-archived session is read from its archive (`sessions/cold/<sha256>.jsonl.zst`, or
the archive's blob).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import apsw
import orjson
import xxhash
import zstandard

from sessionfix.errors import InputError
from sessionfix.formats.openclaw_store.database import (
    decompressed_row,
    file_name,
    schema_problem,
)
from sessionfix.formats.pi.decode import OPENCLAW
from sessionfix.model.loaded import Loader
from sessionfix.read.compressed import EXPANSION_LIMIT, expansion_limit
from sessionfix.read.sqlite import (
    connect_read_only,
    error_reason,
    holds_schema,
    is_hot_journal,
    quoted,
)
from sessionfix.stores import Origins, StoreBackup, StoredSession, Transcript
from sessionfix.units import human_bytes

STORE_NAME: Final = "openclaw-agent.sqlite"
KIND: Final = "OpenClaw session store"
ROW_KEY: Final = "seq"
"""The column that numbers a session's rows, as findings name a row by it ("seq 11")."""
_EVENTS: Final = (
    "SELECT seq, CAST(event_json AS BLOB), event_zstd, event_utf8_bytes, created_at "
    "FROM transcript_events INDEXED BY {index} WHERE session_id = ? ORDER BY seq"
)


def _key_index(db: apsw.Connection) -> str | None:
    """The index of the events' primary key, `(session_id, seq)`, if they have one: every
    read of them goes through it, by name, so that SQLite takes no other (an index a
    store added, whose entries `_events_damaged` does not count)."""
    for _, name, _, origin, _ in db.execute("PRAGMA index_list(transcript_events)"):
        if origin == "pk":
            return str(name)
    return None


def _events_damaged(db: apsw.Connection, index: str) -> str | None:
    """Whether the events' index `index` holds another number of entries than the table
    holds rows: rows are found through it, and an index that misses rows hides them
    from every read. Counted as SQLite's quick check counts them, from the leaves of
    each tree: the quick check reads every row besides, in tree order (10 s for a store
    of 700 MiB that is not in the page cache)."""
    stored = db.execute("SELECT count(*) FROM transcript_events NOT INDEXED").get
    entries = db.execute(f"SELECT count(1) FROM transcript_events INDEXED BY {quoted(index)}").get
    if entries != stored:
        return f"events' index {index} holds {entries} entries for {stored} rows"
    return None


def is_agent_store(path: Path) -> bool | None:
    """Whether an SQLite file holds OpenClaw's agent schema (`schema_meta` role
    `agent`); None when it cannot be read to tell."""
    return holds_schema(path, _holds_agent_schema)


def _holds_agent_schema(db: apsw.Connection) -> bool:
    return (
        db.execute("SELECT 1 FROM schema_meta WHERE role = 'agent' LIMIT 1").fetchone() is not None
    )


def artifact_folder(store: Path) -> Path:
    """Where OpenClaw keeps the store's session files (`agents/<id>/sessions`)."""
    parent = store.parent
    return parent.parent / "sessions" if parent.name == "agent" else parent


class OpenClawStore:
    """An OpenClaw agent database, read through one read-only connection."""

    kind: Final = KIND
    session_format: Final = OPENCLAW.value
    copies_as_store: Final = False
    """A session's lines are an OpenClaw transcript file, which `-o` writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.real = Path(os.path.realpath(path))
        """Where the store really is (through links): the state folder OpenClaw locks,
        the cold archives and the backups are found from it."""
        self.tables_checked = False
        """Whether the tables a rewrite touches passed SQLite's integrity check (once
        a run, before its first write)."""
        try:
            self._db = connect_read_only(path)
        except apsw.Error as exc:
            raise InputError(f"{path}: cannot read the {KIND} ({error_reason(exc)})") from None
        try:
            self._db.execute("SELECT role FROM schema_meta LIMIT 0").fetchall()
            self._db.execute("SELECT seq FROM transcript_events LIMIT 0").fetchall()
            problem = schema_problem(self._db)
            index = _key_index(self._db) if problem is None else None
            if problem is None:
                problem = (
                    "events have no primary key"
                    if index is None
                    else _events_damaged(self._db, index)
                )
        except apsw.Error as exc:
            self._db.close()
            if is_hot_journal(exc):
                raise InputError(
                    f"{path}: the {KIND} has a hot journal (a write to it was cut short); "
                    "open it with OpenClaw or sqlite3 first, which rolls the write back"
                ) from None
            what = "not an" if isinstance(exc, apsw.SQLError) else "cannot read the"
            raise InputError(f"{path}: {what} {KIND} ({error_reason(exc)})") from None
        if problem is not None or index is None:
            self._db.close()
            raise InputError(f"{path}: the {KIND}'s {problem}; nothing read")
        self._key = quoted(index)
        """The events' primary key index, which every read of them names."""

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> OpenClawStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- listing ---------------------------------------------------------------------

    def sessions(self) -> list[StoredSession]:
        """Every session with rows or a cold archive, ordered by id."""
        try:
            rows = self._db.execute(
                f"""
                WITH ids(session_id) AS (
                    SELECT DISTINCT session_id FROM transcript_events INDEXED BY {self._key}
                    UNION SELECT session_id FROM session_transcript_cold_archives
                )
                SELECT CAST(ids.session_id AS BLOB), CAST(w.session_key AS BLOB),
                    c.session_id IS NOT NULL
                FROM ids
                LEFT JOIN session_windows AS w USING (session_id)
                LEFT JOIN session_transcript_cold_archives AS c USING (session_id)
                ORDER BY ids.session_id
                """
            ).fetchall()
        except apsw.Error as exc:
            raise InputError(
                f"{self.path}: cannot list its sessions ({error_reason(exc)})"
            ) from None
        return [
            StoredSession(
                self._session_id(sid),
                key.decode("utf-8", "replace") if isinstance(key, bytes) else None,
                bool(cold),
            )
            for sid, key, cold in rows
        ]

    def _session_id(self, stored: object) -> str:
        """A session id as stored (text, read as bytes): OpenClaw reads text that is not
        UTF-8 as other text, and cannot name such a session."""
        try:
            return bytes(stored).decode() if isinstance(stored, bytes) else str(stored)
        except UnicodeDecodeError:
            raise InputError(
                f"{self.path}: a session id is not UTF-8 text ({stored!r}); nothing read"
            ) from None

    # ---- reading a session -----------------------------------------------------------

    def transcript(self, session: StoredSession, folder: Path) -> Transcript:
        transcript = Transcript(
            folder / f"{file_name(session.id)}.jsonl", session, key_noun=ROW_KEY
        )
        try:
            with open(transcript.path, "xb", buffering=1 << 20) as out:
                if session.cold:
                    lines = self._cold_lines(session.id, transcript)
                else:
                    lines = self._hot_lines(session.id, transcript)
                for row, data in lines:
                    out.write(data)
                    out.write(b"\n")
                    breaks = data.count(b"\n")
                    if breaks:
                        transcript.multiline = True
                    transcript.rows.extend([row] * (breaks + 1))
        except apsw.Error as exc:
            raise InputError(
                f"{self.path}: cannot read session {session.id} ({error_reason(exc)})"
            ) from None
        except UnicodeDecodeError:
            raise InputError(
                f"{self.path}: cannot read session {session.id} (its cold archive's record "
                "holds text that is not UTF-8)"
            ) from None
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot read session {session.id} into {folder} ({exc.strerror})"
            ) from None
        return transcript

    def _hot_lines(self, session_id: str, transcript: Transcript) -> Iterator[tuple[int, bytes]]:
        digest = xxhash.xxh3_64()
        decompressor = zstandard.ZstdDecompressor()
        with self._db:  # one read transaction: a consistent snapshot of the session
            for seq, text, packed, size, created in self._db.execute(
                _EVENTS.format(index=self._key), (session_id,)
            ):
                if type(seq) is not int or type(created) is not int:
                    raise InputError(
                        f"{self.path}: session {session_id}, seq {seq!r}: the row's seq or "
                        "created_at is not an integer"
                    )
                digest.update(b"%d %d\n" % (seq, created))
                if text is None:
                    where = f"{self.path}: session {session_id}, seq {seq}"
                    if packed is None:
                        raise InputError(f"{where}: the row holds no event")
                    if not isinstance(packed, bytes):
                        raise InputError(f"{where}: the row's compressed event is not a blob")
                    digest.update(packed)
                    text = decompressed_row(decompressor, packed, size, where)
                else:
                    digest.update(text)
                yield seq, text
        transcript.digest = digest.hexdigest()

    def _cold_lines(self, session_id: str, transcript: Transcript) -> Iterator[tuple[int, bytes]]:
        row = self._db.execute(
            "SELECT storage, archive_name, archive_sha256, archive_bytes, archive_blob "
            "FROM session_transcript_cold_archives WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            raise InputError(f"{self.path}: session {session_id} has no cold archive")
        storage, name, sha256, size, blob = row
        where = f"{self.path}: session {session_id}'s cold archive"
        if storage == "sqlite":
            data = bytes(blob or b"")
        else:
            if not isinstance(name, str) or not re.fullmatch(r"[0-9a-f]{64}\.jsonl\.zst", name):
                raise InputError(f"{where} has an invalid name {name!r}")
            archive = artifact_folder(self.real) / "cold" / name
            try:
                data = archive.read_bytes()
            except OSError as exc:
                raise InputError(f"{where} {archive} cannot be read ({exc.strerror})") from None
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            raise InputError(f"{where} does not match its recorded size and sha256")
        transcript.digest = "cold:" + str(sha256)
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
        lines = io.BufferedReader(reader, 1 << 20)
        limit = expansion_limit(len(data))
        left = limit
        while True:
            try:
                line = lines.readline(left + 1)
            except (zstandard.ZstdError, OSError) as exc:
                raise InputError(f"{where} does not decompress ({exc})") from None
            if not line:
                return
            left -= len(line)
            if left < 0:
                raise InputError(
                    f"{where} decompresses to more than {human_bytes(limit)}, over "
                    f"{EXPANSION_LIMIT:,} times its {human_bytes(len(data))}"
                )
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise InputError(f"{where} holds a line that is not JSON") from None
            if isinstance(record, dict) and record.get("kind") == "event":
                event = record.get("row")
                text = event.get("event_json") if isinstance(event, dict) else None
                seq = event.get("seq") if isinstance(event, dict) else None
                if not isinstance(text, str) or not isinstance(seq, int):
                    raise InputError(f"{where} holds an event without seq or event_json")
                yield seq, text.encode("utf-8", "surrogatepass")

    def loader(self, transcript: Transcript) -> Loader:
        from sessionfix.formats.openclaw_store.context import loader

        return loader(transcript)

    # ---- writing (formats/openclaw_store/write.py) -----------------------------------

    def replace(
        self,
        transcript: Transcript,
        repaired: Path,
        origins: Origins,
        *,
        backup: bool,
    ) -> Path | None:
        from sessionfix.formats.openclaw_store import write

        return write.replace_session(self, transcript, repaired, origins, backup=backup)

    def write_copy(
        self,
        output: Path,
        transcript: Transcript,
        repaired: Path | None,
        origins: Origins | None,
        *,
        replace: bool,
    ) -> None:
        raise AssertionError("-o writes an OpenClaw store's session as its transcript")

    def rewrite_notes(self, transcript: Transcript) -> list[str]:
        """OpenClaw rebuilds its projections of a session from its events."""
        return []

    def key_after_rewrite(self, line: int) -> int | None:
        """A rewrite numbers the session's rows from 0 again, as OpenClaw's own does."""
        return line - 1

    def check_integrity(self, backups: Sequence[Path]) -> None:
        from sessionfix.formats.openclaw_store import write

        write.check_integrity(self.real, str(self.path), backups)

    def backups(self, session_id: str | None) -> list[StoreBackup]:
        from sessionfix.formats.openclaw_store import write

        return write.list_backups(self.real, session_id)

    def restore(self, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
        from sessionfix.formats.openclaw_store import write

        return write.restore_session(self, session_id, backup, keep_current=keep_current)
