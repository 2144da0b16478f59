"""A CodeWhale document as a store of one session (`JsonDocuments`): its transcript is
the document's lines (`transcript`); a repair goes back as a whole new document
(`write` makes it, `files` writes it), after a backup beside it, never while CodeWhale
may have the session open."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.formats.codewhale.context import loaded_messages
from sessionfix.formats.codewhale.files import (
    DocumentChanged,
    SessionLive,
    digest,
    list_backups,
    live_reason,
    read,
    restore_document,
    unquiet_reason,
    write_document,
)
from sessionfix.formats.codewhale.names import CHECKPOINTS, HOME, LEGACY_HOME, SESSIONS
from sessionfix.formats.codewhale.transcript import lines
from sessionfix.formats.codewhale.write import repaired_document
from sessionfix.replacing import cannot_write, open_for_writing
from sessionfix.stores import Origins, StoreBackup, StoredSession, Transcript

KIND: Final = "CodeWhale session document"
FORMAT_VALUE: Final = "codewhale"
CHECKPOINT_LIFE: Final = 24 * 3600
"""Seconds after which CodeWhale deletes a checkpoint when it lists them (spec §1)."""


def unread_reason(path: Path, data: bytes, now: float) -> str | None:
    """Why CodeWhale never reads this copy of a session (spec §1): a checkpoint older
    than a day (deleted when checkpoints are listed), or a legacy `~/.deepseek` copy
    whose session `~/.codewhale` holds with other content (the one CodeWhale reads)."""
    folder = path.parent
    if folder.name == CHECKPOINTS and folder.parent.name == SESSIONS:
        try:
            age = now - os.stat(path).st_mtime
        except OSError:
            return None
        if age > CHECKPOINT_LIFE:
            return (
                "a checkpoint older than 24 hours, which CodeWhale deletes the next time it "
                "lists checkpoints"
            )
        return None
    if folder.name == SESSIONS and folder.parent.name == LEGACY_HOME:
        try:
            held = read(folder.parent.parent / HOME / SESSIONS / path.name)
        except InputError:
            return None
        if held != data:
            return (
                f"a legacy copy under ~/{LEGACY_HOME}; CodeWhale reads the one under "
                f"~/{HOME}, which holds other content"
            )
    return None


class CodeWhaleDocument:
    """One session document, read whole each time it is asked for."""

    kind: Final = KIND
    session_format: Final = FORMAT_VALUE
    copies_as_store: Final = True
    """Its lines are sessionfix's reading of the document: `-o` writes a document."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.session_id = path.stem

    def close(self) -> None:
        pass

    def __enter__(self) -> CodeWhaleDocument:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sessions(self) -> list[StoredSession]:
        return [StoredSession(self.session_id)]

    def transcript(self, session: StoredSession, folder: Path) -> Transcript:
        data = read(self.path)
        unread = unread_reason(self.path, data, time.time())
        transcript = Transcript(folder / f"{self.session_id}.codewhale.jsonl", session, key_noun="")
        try:
            with open(transcript.path, "xb") as out:
                for number, line in enumerate(lines(self.session_id, data, unread)):
                    out.write(line)
                    transcript.rows.append("document" if number == 0 else number)
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot read it into {folder} ({described(exc)})"
            ) from None
        transcript.digest = digest(data)
        return transcript

    def loader(self, transcript: Transcript) -> Any:
        return loaded_messages

    def _repaired(self, transcript: Transcript, repaired: Path, origins: Origins) -> bytes:
        data = read(self.path)
        if digest(data) != transcript.digest:
            raise DocumentChanged(f"{self.path}: changed since it was read; left untouched")
        return repaired_document(data, transcript.path, repaired, origins, self.session_id)

    def refuse_unquiet(self, quiescence: float) -> None:
        busy = unquiet_reason(self.path, quiescence)
        if busy is not None:
            raise SessionLive(f"{self.path}: {busy}")

    def replace(
        self,
        transcript: Transcript,
        repaired: Path,
        origins: Origins,
        *,
        backup: bool,
    ) -> Path | None:
        reason = live_reason(self.path, self.session_id)
        if reason is not None:
            raise SessionLive(
                f"{self.path}: {reason}; CodeWhale's next autosave would revert a write"
            )
        data = self._repaired(transcript, repaired, origins)
        return write_document(self.path, data, expected=transcript.digest, backup=backup)

    def write_copy(
        self,
        output: Path,
        transcript: Transcript,
        repaired: Path | None,
        origins: Origins | None,
        *,
        replace: bool,
    ) -> None:
        """The repaired document at `output` (a new file, or replacing one when `replace`)."""
        data = read(self.path)
        if repaired is not None and origins is not None:
            data = self._repaired(transcript, repaired, origins)
        flags = os.O_CREAT | (os.O_TRUNC if replace else os.O_EXCL)
        try:
            out = open_for_writing(output, flags, 0o600)
        except FileExistsError:
            raise SessionfixError(f"{output}: exists (--force to replace it)") from None
        except OSError as exc:
            raise SessionfixError(f"{output}: cannot write ({cannot_write(exc)})") from None
        with out:
            out.write(data)
            out.flush()
            if stat.S_ISREG(os.fstat(out.fileno()).st_mode):
                os.fsync(out.fileno())

    def rewrite_notes(self, transcript: Transcript) -> list[str]:
        return []

    def key_after_rewrite(self, line: int) -> str | int | None:
        return "document" if line == 1 else line

    def check_integrity(self, backups: Sequence[Path]) -> None:
        """Nothing beyond the document, which was checked to load before it was written."""

    def backups(self, session_id: str | None) -> list[StoreBackup]:
        return list_backups(self.path, self.session_id)

    def restore(self, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
        return restore_document(self.path, self.session_id, backup, keep_current=keep_current)
