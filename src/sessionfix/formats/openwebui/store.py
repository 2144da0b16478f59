"""open-webui's `webui.db` as a store of sessions: each chat is read into a transcript
(`transcript`: its own line, then one line per message), checked as any session is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from sessionfix.errors import InputError, SessionfixError
from sessionfix.formats.openwebui.database import KIND, WebuiDatabase
from sessionfix.formats.openwebui.transcript import CHAT, TABLE, chat_digest, lines
from sessionfix.formats.sqlite_writes import id_in_file_name
from sessionfix.model.loaded import Loader
from sessionfix.stores import Origins, StoreBackup, StoredSession, Transcript

if TYPE_CHECKING:
    from sessionfix.formats.openwebui.write import ChatChanges

FORMAT_VALUE: Final = "openwebui"
POINTERS: Final = ("current_id", "current_message_id")
"""The chat line's copies of its current message (document, column), written together."""
ROW_NOUN: Final = ""
"""A line is named by the message id alone (`webui.db:<chat id>:<message id>`)."""


class RepairNotWritable(SessionfixError):
    """A repair sessionfix does not write into an open-webui database."""


class WebuiStore:
    """An open-webui database, read through one read-only connection."""

    kind: Final = KIND
    session_format: Final = FORMAT_VALUE
    copies_as_store: Final = True

    def __init__(self, path: Path) -> None:
        self.path = path
        self.real = Path(os.path.realpath(path))
        self._reader: WebuiDatabase | None = WebuiDatabase(path)

    @property
    def _database(self) -> WebuiDatabase:
        if self._reader is None:
            self._reader = WebuiDatabase(self.path)
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> WebuiStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sessions(self) -> list[StoredSession]:
        """Every chat, oldest first."""
        return [StoredSession(row.id, row.title or None) for row in self._database.chats()]

    def transcript(self, session: StoredSession, folder: Path) -> Transcript:
        chat = self._database.chat(session.id)
        if chat is None:
            raise InputError(f"{self.path}: no chat {session.id!r} in this {KIND}")
        transcript = Transcript(
            folder / f"{id_in_file_name(session.id)}.jsonl", session, key_noun=ROW_NOUN
        )
        try:
            with open(transcript.path, "xb", buffering=1 << 20) as out:
                for found in lines(chat):
                    out.write(found.line)
                    transcript.rows.append(found.key)
                    transcript.tables.append(found.kind)
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot read chat {session.id} into {folder} ({exc.strerror})"
            ) from None
        transcript.digest = chat_digest(chat)
        return transcript

    def loader(self, transcript: Transcript) -> Loader:
        from sessionfix.formats.openwebui.loaded import loaded_messages

        return loaded_messages

    def replace(
        self,
        transcript: Transcript,
        repaired: Path,
        origins: Origins,
        *,
        backup: bool,
    ) -> Path | None:
        from sessionfix.formats.openwebui.write import replace_chat

        changes = chat_changes(transcript, repaired, origins)
        self.close()
        return replace_chat(
            self.path, transcript.session.id, transcript.digest, changes, backup=backup
        )

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
        beside `output` under a temporary name, the chat changed in it as an in-place
        repair changes it (no backup), then given its name."""
        from sessionfix.formats.openwebui.write import replace_chat
        from sessionfix.formats.sqlite_writes import copy_database

        changes = None
        if repaired is not None and origins is not None:
            changes = chat_changes(transcript, repaired, origins)
        with copy_database(self.path, output, replace=replace) as copy:
            if changes is not None:
                replace_chat(copy, transcript.session.id, transcript.digest, changes, backup=False)

    def rewrite_notes(self, transcript: Transcript) -> list[str]:
        return []

    def key_after_rewrite(self, line: int) -> str | None:
        """Messages keep their ids: a line of the repair is named by its own."""
        return None

    def check_integrity(self, backups: Sequence[Path]) -> None:
        """The write checked the database before it, in its own transaction."""

    def backups(self, session_id: str | None) -> list[StoreBackup]:
        from sessionfix.formats.openwebui.write import list_backups

        return list_backups(self.path, session_id)

    def restore(self, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
        from sessionfix.formats.openwebui.write import restore_chat

        self.close()
        return restore_chat(self.path, session_id, backup, keep_current=keep_current)


def _records(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as handle:
        return [orjson.loads(line) for line in handle]


def chat_changes(transcript: Transcript, repaired: Path, origins: Origins) -> ChatChanges:
    """What the repaired transcript changes of the chat: lines changed in place, none
    added or removed."""
    from sessionfix.formats.openwebui.write import UNCHANGED, ChatChanges

    where = f"chat {transcript.session.id}"
    before = _records(transcript.path)
    after = _records(repaired)
    if len(after) != len(before):
        raise RepairNotWritable(f"{where}: a repair may not add or remove a message")
    messages: dict[str, dict[str, Any]] = {}
    parents: dict[str, str | None] = {}
    current: object = UNCHANGED
    drop_summary = False
    for number, record in enumerate(after, start=1):
        origin, unchanged = origins(number)
        if origin != number:
            raise RepairNotWritable(f"{where}: a repair may not move a message")
        if unchanged:
            continue
        old = before[origin - 1]
        if record.get("id") != old.get("id") or record.get(TABLE) != old.get(TABLE):
            raise RepairNotWritable(f"{where}: a repair may not change a message's id")
        if record.get(TABLE) == CHAT:
            facts, was = record.get("data") or {}, old.get("data") or {}
            if any(facts.get(name) != was.get(name) for name in POINTERS):
                current = facts.get("current_id")
            drop_summary = "summary_count" in was and "summary_count" not in facts
            continue
        key = str(record["id"])
        if record.get("data") != old.get("data") and isinstance(record.get("data"), dict):
            messages[key] = record["data"]
        row, old_row = record.get("row"), old.get("row")
        if (
            isinstance(row, dict)
            and isinstance(old_row, dict)
            and row.get("parentId") != old_row.get("parentId")
        ):
            parents[key] = row.get("parentId")
    return ChatChanges(messages, parents, current, drop_summary, repaired.read_bytes())
