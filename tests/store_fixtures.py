"""Session files turned into sessions of an OpenClaw store, damage and all.

A store OpenClaw built itself (by its own import, `tests/openclaw_loader.py`) is the
template: its schema, triggers and session rows are OpenClaw's. A fixture's lines
replace the rows of the template's session byte for byte, one row per line, so a glued
or torn line becomes a glued or torn row, as a store holds them when a damaged JSONL
session was written into it row by row. Rows can be stored zstd-compressed, as
OpenClaw stores large ones (`event_json` NULL).
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import apsw
import orjson
import zstandard

NAVIGATION = orjson.dumps(
    {
        "version": 1,
        "report": {"kind": "canonical"},
        "navigation": {},
        "reset": {},
        "model": {},
        "modelBytes": 0,
        "modelWithoutCheckpointBytes": 0,
        "withoutCustomDataBytes": 0,
    }
).decode()
"""The smallest navigation record the table's CHECK admits for a compressed row (only
sessionfix reads these stores; OpenClaw's own tests use rows it compressed itself)."""


def transcript_lines(data: bytes) -> list[bytes]:
    """A JSONL file's lines without terminators (a last line without one included)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def store_session(store: Path) -> str:
    """The id of the (first) session of a store."""
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        row = db.execute("SELECT session_id FROM session_windows ORDER BY session_id").fetchone()
        assert row is not None, f"{store} holds no session"
        return str(row[0])
    finally:
        db.close()


def fill_session(
    store: Path,
    session_id: str,
    lines: Sequence[bytes],
    *,
    compress: Collection[int] = (),
    created_at: int = 1_760_000_000_000,
    seqs: Sequence[int] = (),
) -> None:
    """Replace a session's rows by `lines`, row `seq` k holding line k+1 exactly, or
    line k+1 at `seqs[k]` (`compress`: the line numbers stored zstd-compressed, from 0);
    identities as OpenClaw indexes them."""
    db = apsw.Connection(str(store))
    try:
        db.execute("PRAGMA foreign_keys = ON")
        with db:
            for table in (
                "session_transcript_fts_rows",
                "session_transcript_active_events",
                "transcript_event_identities",
                "transcript_events",
            ):
                db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            seen: set[str] = set()
            packer = zstandard.ZstdCompressor(level=1, write_checksum=True)
            for number, line in enumerate(lines):
                seq = seqs[number] if seqs else number
                created = created_at + seq
                if number in compress:
                    db.execute(
                        "INSERT INTO transcript_events (session_id, seq, event_json, created_at, "
                        "event_zstd, event_utf8_bytes, navigation_json) "
                        "VALUES (?, ?, NULL, ?, ?, ?, ?)",
                        (session_id, seq, created, packer.compress(line), len(line), NAVIGATION),
                    )
                else:
                    db.execute(
                        "INSERT INTO transcript_events (session_id, seq, event_json, created_at, "
                        "event_utf8_bytes) VALUES (?, ?, CAST(? AS TEXT), ?, ?)",
                        (session_id, seq, line, created, len(line)),
                    )
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(event, dict) or not isinstance(event.get("id"), str):
                    continue
                if event["id"] in seen or not event["id"].strip():
                    continue
                seen.add(event["id"])
                parent = event.get("parentId")
                db.execute(
                    "INSERT INTO transcript_event_identities (session_id, event_id, seq, "
                    "event_type, parent_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        session_id,
                        event["id"].strip(),
                        seq,
                        event.get("type") if isinstance(event.get("type"), str) else None,
                        parent if isinstance(parent, str) else None,
                        created,
                    ),
                )
            db.execute(
                "UPDATE session_transcript_index_state SET needs_rebuild = 1 WHERE session_id = ?",
                (session_id,),
            )
    finally:
        db.close()


def store_from_file(
    template: Path, destination: Path, data: bytes, *, compress: Collection[int] = ()
) -> tuple[Path, str]:
    """A copy of the template store at `destination` whose session holds `data`'s lines."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    db = apsw.Connection(str(template), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        out = apsw.Connection(str(destination))
        try:
            with out.backup("main", db, "main") as backup:
                backup.step()
        finally:
            out.close()
    finally:
        db.close()
    session_id = store_session(destination)
    fill_session(destination, session_id, transcript_lines(data), compress=compress)
    return destination, session_id


def copy_store(source: Path, destination: Path) -> Path:
    """A plain copy of a store file that has no write-ahead log pending."""
    shutil.copyfile(source, destination)
    return destination


def add_session(store: Path, session_id: str, data: bytes, *, seqs: Sequence[int] = ()) -> None:
    """A second session in a store: its window and index rows copied from the first
    session's, its rows `data`'s lines (at `seqs`, when given: gaps as a store may have)."""
    db = apsw.Connection(str(store))
    try:
        first = store_session(store)
        with db:
            for table in ("session_windows", "session_transcript_index_state"):
                columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
                rest = ", ".join(c for c in columns if c != "session_id")
                db.execute(
                    f"INSERT INTO {table} (session_id, {rest}) SELECT ?, {rest} FROM {table} "
                    "WHERE session_id = ?",
                    (session_id, first),
                )
    finally:
        db.close()
    fill_session(store, session_id, transcript_lines(data), seqs=seqs)


def hide_from_index(store: Path, session_id: str, seqs: Collection[int]) -> None:
    """Keep the session's rows at `seqs` in `transcript_events` but out of its primary
    key's index, as a damaged store holds them: every read through the index misses
    them (`PRAGMA quick_check` counts the difference). The index is taken out of the
    schema while the rows are written back, then put back as it was."""
    db = apsw.Connection(str(store))
    try:
        db.execute("PRAGMA foreign_keys = OFF")
        marks = ", ".join("?" * len(seqs))
        rows = db.execute(
            f"SELECT * FROM transcript_events WHERE session_id = ? AND seq IN ({marks})",
            (session_id, *seqs),
        ).fetchall()
        assert len(rows) == len(seqs), "every seq to hide is a row of the session"
        with db:
            db.execute(
                f"DELETE FROM transcript_events WHERE session_id = ? AND seq IN ({marks})",
                (session_id, *seqs),
            )
        (table,) = db.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'transcript_events'"
        ).fetchone()
        index = db.execute(
            "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_schema "
            "WHERE type = 'index' AND tbl_name = 'transcript_events'"
        ).fetchall()
        assert len(index) == 1, "schema 23 has one index on the events, its primary key's"
        assert "PRIMARY KEY (session_id, seq)," in table
        _set_schema(
            db, [("transcript_events", table.replace("PRIMARY KEY (session_id, seq),", ""))], []
        )
        holes = ", ".join("?" * len(rows[0]))
        with db:
            db.executemany(f"INSERT INTO transcript_events VALUES ({holes})", rows)
        _set_schema(db, [("transcript_events", table)], index)
    finally:
        db.close()


def _set_schema(
    db: apsw.Connection, tables: Sequence[tuple[str, str]], indexes: Sequence[tuple[Any, ...]]
) -> None:
    """Write `tables`' SQL into the schema and put `indexes` back, or (none given) take
    out the tables' indexes; the connection then reads the schema anew."""
    version = db.execute("PRAGMA schema_version").fetchone()[0]
    db.execute("PRAGMA writable_schema = ON")
    with db:
        for name, sql in tables:
            db.execute("UPDATE sqlite_schema SET sql = ? WHERE name = ?", (sql, name))
            if not indexes:
                db.execute(
                    "DELETE FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?", (name,)
                )
        db.executemany("INSERT INTO sqlite_schema VALUES (?, ?, ?, ?, ?)", indexes)
    db.execute(f"PRAGMA schema_version = {version + 1}")
    db.execute("PRAGMA writable_schema = OFF")
