"""Reading an OpenClaw agent store: its sessions, and each one's rows as transcript lines.

Always through a read-only connection (`mode=ro`): a scan never writes, never takes a
write lock, and in WAL mode never blocks OpenClaw's writers. Rows are read as bytes
(`CAST(... AS BLOB)`), so a line is exactly what the row stores; a row OpenClaw keeps
zstd-compressed (`event_json` NULL) is decompressed. A cold-archived session is read
from its archive (`sessions/cold/<sha256>.jsonl.zst`, or the archive's blob).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import apsw
import orjson
import xxhash
import zstandard

from sessionfix.errors import InputError, SessionfixError
from sessionfix.formats import Format
from sessionfix.model.loaded import Loader
from sessionfix.stores import Origins, StoreBackup, StoredSession, Transcript

STORE_NAME: Final = "openclaw-agent.sqlite"
KIND: Final = "OpenClaw session store"
READ_BUSY_MS: Final = 5000
"""How long a read waits for a writer in rollback-journal mode (WAL readers never wait)."""
_SAFE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_EVENTS: Final = (
    "SELECT seq, CAST(event_json AS BLOB), event_zstd, event_utf8_bytes, created_at "
    "FROM transcript_events WHERE session_id = ? ORDER BY seq"
)


def connect_read_only(path: Path) -> apsw.Connection:
    """A read-only connection (`mode=ro` URI: no file is created, nothing written)."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    connection = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    connection.set_busy_timeout(READ_BUSY_MS)
    return connection


def is_agent_store(path: Path) -> bool | None:
    """Whether an SQLite file holds OpenClaw's agent schema (`schema_meta` role
    `agent`); None when it cannot be read to tell."""
    try:
        connection = connect_read_only(path)
    except apsw.Error:
        return None
    try:
        row = connection.execute(
            "SELECT 1 FROM schema_meta WHERE role = 'agent' LIMIT 1"
        ).fetchone()
        return row is not None
    except (apsw.SQLError, apsw.NotADBError):
        return False
    except apsw.Error:
        return None
    finally:
        connection.close()


def artifact_folder(store: Path) -> Path:
    """Where OpenClaw keeps the store's session files (`agents/<id>/sessions`)."""
    parent = store.parent
    return parent.parent / "sessions" if parent.name == "agent" else parent


def file_name(session_id: str) -> str:
    """A file name for a session's transcript: its id when that is a plain name."""
    if _SAFE_NAME.fullmatch(session_id):
        return session_id
    return "session-" + hashlib.sha256(session_id.encode()).hexdigest()[:16]


class OpenClawStore:
    """An OpenClaw agent database, read through one read-only connection."""

    kind: Final = KIND
    session_format: Final = Format.OPENCLAW.value

    def __init__(self, path: Path) -> None:
        self.path = path
        self.real = Path(os.path.realpath(path))
        """Where the store really is (through links): the state folder OpenClaw locks,
        the cold archives and the backups are found from it."""
        try:
            self._db = connect_read_only(path)
        except apsw.Error as exc:
            raise InputError(f"{path}: cannot read the {KIND} ({_reason(exc)})") from None
        try:
            self._db.execute("SELECT role FROM schema_meta LIMIT 0").fetchall()
            self._db.execute("SELECT seq FROM transcript_events LIMIT 0").fetchall()
        except apsw.Error as exc:
            self._db.close()
            what = "not an" if isinstance(exc, apsw.SQLError) else "cannot read the"
            raise InputError(f"{path}: {what} {KIND} ({_reason(exc)})") from None

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
                """
                WITH ids(session_id) AS (
                    SELECT DISTINCT session_id FROM transcript_events
                    UNION SELECT session_id FROM session_transcript_cold_archives
                )
                SELECT ids.session_id, w.session_key, c.session_id IS NOT NULL
                FROM ids
                LEFT JOIN session_windows AS w USING (session_id)
                LEFT JOIN session_transcript_cold_archives AS c USING (session_id)
                ORDER BY ids.session_id
                """
            ).fetchall()
        except apsw.Error as exc:
            raise InputError(f"{self.path}: cannot list its sessions ({_reason(exc)})") from None
        return [
            StoredSession(str(sid), key if isinstance(key, str) else None, bool(cold))
            for sid, key, cold in rows
        ]

    # ---- reading a session -----------------------------------------------------------

    def transcript(self, session: StoredSession, folder: Path) -> Transcript:
        transcript = Transcript(folder / f"{file_name(session.id)}.jsonl", session)
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
                f"{self.path}: cannot read session {session.id} ({_reason(exc)})"
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
            for seq, text, packed, size, created in self._db.execute(_EVENTS, (session_id,)):
                digest.update(b"%d %d\n" % (seq, created))
                if text is None:
                    if packed is None:
                        raise InputError(
                            f"{self.path}: session {session_id}, seq {seq}: the row holds no event"
                        )
                    digest.update(packed)
                    text = _decompressed(decompressor, packed, size, self.path, session_id, seq)
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
        while True:
            try:
                line = lines.readline()
            except (zstandard.ZstdError, OSError) as exc:
                raise InputError(f"{where} does not decompress ({exc})") from None
            if not line:
                return
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

    def check_integrity(self, backups: Sequence[Path]) -> None:
        from sessionfix.formats.openclaw_store import write

        write.check_integrity(self.real, str(self.path), backups)

    def backups(self, session_id: str | None) -> list[StoreBackup]:
        from sessionfix.formats.openclaw_store import write

        return write.list_backups(self.real, session_id)

    def restore(self, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
        from sessionfix.formats.openclaw_store import write

        return write.restore_session(self, session_id, backup, keep_current=keep_current)


def _decompressed(
    decompressor: zstandard.ZstdDecompressor,
    packed: bytes,
    size: Any,
    store: Path,
    session_id: str,
    seq: int,
) -> bytes:
    try:
        text = decompressor.decompressobj().decompress(packed)
    except zstandard.ZstdError as exc:
        raise InputError(
            f"{store}: session {session_id}, seq {seq}: the compressed row does not "
            f"decompress ({exc})"
        ) from None
    if isinstance(size, int) and len(text) != size:
        raise InputError(
            f"{store}: session {session_id}, seq {seq}: the compressed row holds "
            f"{len(text)} bytes, not the {size} it records"
        )
    return text


def _reason(error: apsw.Error | SessionfixError) -> str:
    """An apsw error without its class name ("database disk image is malformed")."""
    kind, _, rest = str(error).partition(": ")
    return rest if rest and kind.endswith("Error") else str(error)
