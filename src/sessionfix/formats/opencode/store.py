"""An opencode database as a store of sessions: each session's rows are read into a
transcript (`transcript`: one line per row, named by the row's id), checked and repaired
as any session is, and the rows a repair changed are written back (`write`).

A repair changes rows in place, never adds one: a changed line is its row's new `data`
(and, for a message, its `time_created`); a message row a repair leaves out is deleted
with its parts. Every other row keeps its bytes, `time_updated` and rowid.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec
import xxhash

from sessionfix.errors import InputError, SessionfixError
from sessionfix.formats.opencode.database import (
    KIND,
    OpencodeDatabase,
    SessionRow,
    StoredMessage,
)
from sessionfix.formats.opencode.legacy import LegacyStorage
from sessionfix.formats.opencode.names import LEGACY_FOLDER
from sessionfix.formats.opencode.transcript import (
    MESSAGE,
    PART,
    SESSION,
    Envelope,
    envelope_of_line,
    rows,
    session_line,
)
from sessionfix.model.loaded import Loader
from sessionfix.stores import Origins, StoreBackup, StoredSession, Transcript

if TYPE_CHECKING:
    from sessionfix.formats.opencode.write import RowChange

FORMAT_VALUE: Final = "opencode"
LEGACY_ONLY: Final = (
    "kept only in opencode 1.1's JSON files (storage/ beside the database), which opencode "
    "1.2 and later no longer import: opencode shows no such session"
)
V2: Final = (
    "kept in opencode 2's session format (session_message rows), which opencode 1.x does not read"
)
ROW_NOUN: Final = ""
"""A row is named by its id alone (`opencode.db:ses_…:prt_…`)."""


class RepairNotWritable(SessionfixError):
    """A repaired session that is not a set of changes to the session's own rows."""


def _file_name(session_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in session_id)
    return safe[:120] or "session"


class OpencodeStore:
    """An opencode database, read through one read-only connection."""

    kind: Final = KIND
    session_format: Final = FORMAT_VALUE

    def __init__(self, path: Path) -> None:
        self.path = path
        self.real = Path(os.path.realpath(path))
        self._reader: OpencodeDatabase | None = OpencodeDatabase(path)
        self._sessions: dict[str, SessionRow] = {}
        self._last: list[str] = []
        self._logged: dict[str, int] = {}
        """Bytes of each session's event log, as read."""
        self._unread: dict[str, str] = {}
        """Per session of the legacy tree alone: why opencode does not read it."""
        self._sound = False
        """Whether the database passed SQLite's checks before a write of this run (they
        read the whole database: once a run, as the check after its writes)."""

    @property
    def _database(self) -> OpencodeDatabase:
        """The read-only connection, opened again after a write (which holds the
        database alone: no connection of this process may be open meanwhile)."""
        if self._reader is None:
            self._reader = OpencodeDatabase(self.path)
        return self._reader

    def _release(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def close(self) -> None:
        self._release()

    def __enter__(self) -> OpencodeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sessions(self) -> list[StoredSession]:
        """Every session, oldest first; then those opencode 1.1 kept in the JSON files
        beside the database (`storage/`) that are in no database, which opencode 1.2 and
        later no longer read (spec §7): listed, never rewritten (`cold`)."""
        found = self._database.sessions()
        self._sessions = {row.id: row for row in found}
        listed = [StoredSession(row.id, row.title or None) for row in found]
        for row in self._legacy_only():
            self._sessions[row.id] = row
            listed.append(StoredSession(row.id, row.title or None, cold=True))
        return listed

    def _legacy_only(self) -> list[SessionRow]:
        """The sessions of the legacy tree beside the database that it does not hold
        (a channel database's folder is the same: a session in another database of it
        is not looked for), those whose own file holds no record (a crash left it
        empty or NUL-filled) too, named by the file."""
        storage = self.real.parent / LEGACY_FOLDER
        if not (storage / "session").is_dir():
            return []
        tree = LegacyStorage(storage)
        try:
            legacy = tree.sessions()
        except (InputError, OSError):
            return []
        found = [row for row in legacy if row.id not in self._sessions]
        listed = {row.id for row in legacy}
        for problem in tree.problems:
            session_id = problem.path.stem
            if session_id in self._sessions or session_id in listed:
                continue
            listed.add(session_id)
            shown = problem.path.relative_to(storage.parent)
            self._unread[session_id] = f"{LEGACY_ONLY}; its file {shown}: {problem.reason}"
            found.append(SessionRow(session_id, None, "", "", "", 0))
        return found

    def transcript(self, session: StoredSession, folder: Path) -> Transcript:
        row = self._sessions.get(session.id)
        directory = row.directory if row is not None else ""
        transcript = Transcript(
            folder / f"{_file_name(session.id)}.jsonl", session, key_noun=ROW_NOUN
        )
        digest = xxhash.xxh3_64()
        tables = transcript.tables
        head, messages = self._read(session, directory)
        try:
            with open(transcript.path, "xb", buffering=1 << 20) as out:
                for found in rows(head, session.id, messages, digest):
                    out.write(found.line)
                    transcript.rows.append(found.key)
                    tables.append(found.table)
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot read session {session.id} into {folder} ({exc.strerror})"
            ) from None
        transcript.digest = digest.hexdigest()
        return transcript

    def _read(
        self, session: StoredSession, directory: str
    ) -> tuple[bytes, Iterator[StoredMessage]]:
        """The session's own line and its messages: none of a session opencode does not
        read (its 1.1 files, opencode 2's rows), which is left alone."""
        if session.cold:
            unread = self._unread.get(session.id, LEGACY_ONLY)
            return session_line(session.id, directory, unread=unread), iter(())
        if self._database.is_v2(session.id):
            return session_line(session.id, directory, unread=V2), iter(())
        events = self._database.event_bytes(session.id)
        self._logged[session.id] = events or 0
        return session_line(session.id, directory, events=events), self._database.messages(
            session.id
        )

    def loader(self, transcript: Transcript) -> Loader:
        from sessionfix.formats.opencode.loaded import loaded_messages

        return loaded_messages

    def replace(
        self,
        transcript: Transcript,
        repaired: Path,
        origins: Origins,
        *,
        backup: bool,
    ) -> Path | None:
        from sessionfix.formats.opencode.write import replace_session

        _check_writable(transcript)
        changes, keys = _changes(transcript, repaired, origins)
        self._last = keys
        self._release()
        kept = replace_session(
            self.path,
            transcript.session.id,
            transcript.digest,
            changes,
            backup=backup,
            checked=self._sound,
        )
        self._sound = True
        return kept

    copies_as_store: Final = True
    """A session's lines are sessionfix's reading of its rows, no file opencode reads:
    `-o` writes a copy of the database."""

    def write_copy(
        self,
        output: Path,
        transcript: Transcript,
        repaired: Path | None,
        origins: Origins | None,
        *,
        replace: bool,
    ) -> None:
        """A copy of the database (SQLite's online backup, read-only on this one) made
        beside `output` under a temporary name, the session's rows changed in it as an
        in-place repair changes them (no backup: this database is left as it is), then
        given its name."""
        from sessionfix.formats.opencode.write import replace_session
        from sessionfix.formats.sqlite_writes import copy_database

        _check_writable(transcript)
        changes: list[RowChange] = []
        if repaired is not None and origins is not None:
            changes, self._last = _changes(transcript, repaired, origins)
        with copy_database(self.path, output, replace=replace) as copy:
            if changes:
                replace_session(
                    copy, transcript.session.id, transcript.digest, changes, backup=False
                )

    def rewrite_notes(self, transcript: Transcript) -> list[str]:
        """The event log is never written: where it holds the session, it still holds the
        rows as they were (opencode reads it only for its experimental workspace sync)."""
        if not self._logged.get(transcript.session.id):
            return []
        return [
            "the event log still holds the session's rows as they were before the repair "
            "(opencode replays it only in its experimental workspace sync)"
        ]

    def key_after_rewrite(self, line: int) -> str | None:
        """Rows keep their ids: a line of the repair is named by the row it was written to."""
        keys = self._last
        return keys[line - 1] if 0 < line <= len(keys) else None

    def check_integrity(self, backups: Sequence[Path]) -> None:
        from sessionfix.formats.opencode.write import check_integrity

        check_integrity(self.path, str(self.path), backups)

    def backups(self, session_id: str | None) -> list[StoreBackup]:
        from sessionfix.formats.opencode.write import list_backups

        return list_backups(self.path, session_id)

    def restore(self, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
        from sessionfix.formats.opencode.write import restore_session

        self._release()
        return restore_session(self.path, session_id, backup, keep_current=keep_current)


def _check_writable(transcript: Transcript) -> None:
    """A session of opencode 1.1's JSON files is never written (spec §7)."""
    if transcript.session.cold:
        raise RepairNotWritable(
            f"session {transcript.session.id} is in opencode 1.1's JSON files, which "
            "sessionfix never rewrites"
        )


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        yield from handle


def _changes(
    transcript: Transcript, repaired: Path, origins: Origins
) -> tuple[list[RowChange], list[str]]:
    """The row changes that make the session's rows the repaired transcript's lines, and
    the row id of each of those lines."""
    from sessionfix.formats.opencode.write import DeleteMessage, UpdateMessage, UpdatePart

    tables = transcript.tables
    if len(tables) != len(transcript.rows):
        raise RepairNotWritable(f"session {transcript.session.id}: its rows were not read")
    where = f"{transcript.session.id}"
    kept: set[int] = set()
    changes: list[RowChange] = []
    owner = ""
    keys: list[str] = []
    for number, line in enumerate(_lines(repaired), start=1):
        origin, unchanged = origins(number)
        key = transcript.row_of(origin) if origin > 0 else None
        if not isinstance(key, str):
            raise RepairNotWritable(f"session {where}: a repair may not add a row")
        kept.add(origin)
        keys.append(key)
        if unchanged:
            continue
        try:
            envelope: Envelope = envelope_of_line(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise RepairNotWritable(f"session {where}: row {key} would not be a row") from None
        if envelope.id != key or envelope.stored is not None:
            raise RepairNotWritable(f"session {where}: row {key} would change its id or kind")
        if envelope.opencode == PART:
            changes.append(UpdatePart(key, bytes(envelope.data)))
        elif envelope.opencode == MESSAGE:
            changes.append(UpdateMessage(key, bytes(envelope.data), envelope.time_created))
        else:
            raise RepairNotWritable(f"session {where}: its {SESSION} row is never rewritten")
    deleted: set[str] = set()
    for number, (key, kind) in enumerate(zip(transcript.rows, tables, strict=True), start=1):
        if kind == MESSAGE:
            owner = str(key)
        if number in kept:
            continue
        if kind == MESSAGE:
            deleted.add(owner)
            changes.append(DeleteMessage(owner))
        elif kind == PART:
            if owner not in deleted:
                raise RepairNotWritable(
                    f"session {where}: a repair may drop part {key} only with its message"
                )
        else:
            raise RepairNotWritable(f"session {where}: its {SESSION} row is never removed")
    return changes, keys
