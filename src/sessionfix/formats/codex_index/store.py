"""Codex's thread index as a store of sessions: one session, the index itself, whose
transcript holds a line per thread (`transcript`), its row beside its rollouts; a
repair makes or mends rows (`write`), and never moves, changes or removes a rollout.

The rollouts are looked for in the Codex home the index belongs to: its own folder (or
the one above, for an index in `sqlite/`), else the one its rows' paths lie in; a file
a row names elsewhere is read when the home holds no rollout of its thread.
"""

from __future__ import annotations

import os
import tomllib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
import xxhash

from sessionfix.errors import InputError, SessionfixError
from sessionfix.formats.codex_index.database import CARRIED, KIND, MENDED, ThreadIndex
from sessionfix.formats.codex_index.rollouts import (
    ARCHIVED,
    SESSIONS,
    Rollout,
    existing,
    in_archive,
    read_rollout,
    rollout_files,
)
from sessionfix.formats.codex_index.transcript import (
    LINE,
    sort_key,
    thread_line,
)
from sessionfix.model.loaded import Loaded
from sessionfix.stores import Origins, StoreBackup, StoredSession, Transcript

if TYPE_CHECKING:
    from sessionfix.formats.codex_index.write import RowChange
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource

FORMAT_VALUE: Final = "codex-index"
SESSION: Final = "threads"
"""The one session of an index: the index."""
DEFAULT_PROVIDER: Final = "openai"
"""The model provider Codex records for a thread whose rollout names none, unless its
`config.toml` names another."""


class RepairNotWritable(SessionfixError):
    """A repaired transcript that is not a set of row changes a repair may make."""


def _config_provider(codex_home: Path | None) -> str:
    """The `model_provider` of `codex_home/config.toml`, else Codex's default."""
    if codex_home is None:
        return DEFAULT_PROVIDER
    try:
        with open(codex_home / "config.toml", "rb") as handle:
            named = tomllib.load(handle).get("model_provider")
    except (OSError, tomllib.TOMLDecodeError):
        return DEFAULT_PROVIDER
    return named if isinstance(named, str) and named else DEFAULT_PROVIDER


def _has_rollout_folders(folder: Path) -> bool:
    return any((folder / name).is_dir() for name in (SESSIONS, ARCHIVED))


def codex_home_of(index: Path, rows: dict[str, dict[str, Any]]) -> Path | None:
    """The Codex home whose rollouts the index at `index` lists: its folder, or the one
    above an index kept in `sqlite/`, where that holds rollout folders; else the home
    most of its rows' rollout paths lie in, where it holds them."""
    folder = Path(os.path.abspath(index)).parent
    for candidate in (folder, folder.parent) if folder.name == "sqlite" else (folder,):
        if _has_rollout_folders(candidate):
            return candidate
    homes: Counter[Path] = Counter()
    for row in rows.values():
        named = row.get("rollout_path")
        if not isinstance(named, str):
            continue
        parts = Path(named).parts
        for at in range(len(parts) - 1, 0, -1):
            if parts[at] in (SESSIONS, ARCHIVED):
                homes[Path(*parts[:at])] += 1
                break
    for home, _ in homes.most_common():
        if _has_rollout_folders(home):
            return home
    return None


def _empty_loader(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """Codex sends the model nothing of its thread index."""
    return iter(())


class CodexIndexStore:
    """A Codex thread index, read through one read-only connection."""

    kind: Final = KIND
    session_format: Final = FORMAT_VALUE
    copies_as_store: Final = True
    """A transcript line is sessionfix's reading of a row, no file Codex reads: `-o`
    writes a copy of the index."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.real = Path(os.path.realpath(path))
        self._reader: ThreadIndex | None = ThreadIndex(path)
        self._last: list[str] = []
        self._sound = False

    @property
    def _index(self) -> ThreadIndex:
        if self._reader is None:
            self._reader = ThreadIndex(self.path)
        return self._reader

    def _release(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def close(self) -> None:
        self._release()

    def __enter__(self) -> CodexIndexStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def sessions(self) -> list[StoredSession]:
        return [StoredSession(SESSION)]

    def transcript(self, session: StoredSession, folder: Path) -> Transcript:
        rows = self._index.rows()
        home = codex_home_of(self.path, rows)
        provider = _config_provider(home)
        threads: dict[str, list[Rollout]] = {}
        read: set[str] = set()
        for path, archived in rollout_files(home) if home is not None else ():
            read.add(str(path))
            try:
                rollout = read_rollout(path, archived, provider)
            except InputError:
                continue
            if rollout.thread_id is not None:
                threads.setdefault(rollout.thread_id, []).append(rollout)
        present: dict[str, bool] = {}
        for thread_id, row in rows.items():
            named = row.get("rollout_path")
            found = existing(named) if isinstance(named, str) else None
            present[thread_id] = found is not None
            if found is None or found in read or thread_id in threads:
                continue
            read.add(found)
            try:
                rollout = read_rollout(Path(found), in_archive(found), provider)
            except InputError:
                continue
            if rollout.thread_id == thread_id:
                threads.setdefault(thread_id, []).append(rollout)
        ordered = sorted(
            set(rows) | set(threads),
            key=lambda thread: sort_key(rows.get(thread), threads.get(thread, ()), thread),
        )
        transcript = Transcript(folder / "threads.jsonl", session, key_noun="")
        digest = xxhash.xxh3_64()
        try:
            with open(transcript.path, "xb", buffering=1 << 20) as out:
                for thread_id in ordered:
                    stored = rows.get(thread_id)
                    digest.update(msgspec.json.encode([thread_id, stored]))
                    named = present.get(thread_id) if stored is not None else None
                    out.write(thread_line(thread_id, stored, named, threads.get(thread_id, [])))
                    transcript.rows.append(thread_id)
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot read the {KIND} into {folder} ({exc.strerror})"
            ) from None
        transcript.digest = digest.hexdigest()
        return transcript

    def loader(self, transcript: Transcript) -> Any:
        return _empty_loader

    def replace(
        self,
        transcript: Transcript,
        repaired: Path,
        origins: Origins,
        *,
        backup: bool,
    ) -> Path | None:
        from sessionfix.formats.codex_index.write import replace_rows

        changes, self._last = _changes(transcript, repaired, origins)
        self._release()
        kept = replace_rows(self.path, changes, backup=backup, checked=self._sound)
        self._sound = True
        return kept

    def write_copy(
        self,
        output: Path,
        transcript: Transcript,
        repaired: Path | None,
        origins: Origins | None,
        *,
        replace: bool,
    ) -> None:
        """A copy of the index (SQLite's online backup, read-only on this one) with the
        rows changed in it as an in-place repair changes them (no backup)."""
        from sessionfix.formats.codex_index.write import replace_rows
        from sessionfix.formats.sqlite_writes import copy_database

        changes: list[RowChange] = []
        if repaired is not None and origins is not None:
            changes, self._last = _changes(transcript, repaired, origins)
        with copy_database(self.path, output, replace=replace) as copy:
            if changes:
                replace_rows(copy, changes, backup=False)

    def rewrite_notes(self, transcript: Transcript) -> list[str]:
        return []

    def key_after_rewrite(self, line: int) -> str | None:
        """Rows keep their ids: a line of the repair is named by its thread."""
        keys = self._last
        return keys[line - 1] if 0 < line <= len(keys) else None

    def check_integrity(self, backups: Sequence[Path]) -> None:
        from sessionfix.formats.codex_index.write import check_integrity

        check_integrity(self.path, backups)

    def backups(self, session_id: str | None) -> list[StoreBackup]:
        from sessionfix.formats.codex_index.write import list_backups

        return list_backups(self.path)

    def restore(self, session_id: str, backup: str | None, *, keep_current: bool) -> Path:
        from sessionfix.formats.codex_index.write import restore_rows

        self._release()
        return restore_rows(self.path, backup, keep_current=keep_current)


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        yield from handle


def _changes(
    transcript: Transcript, repaired: Path, origins: Origins
) -> tuple[list[RowChange], list[str]]:
    """The row changes that make the index's rows those of the repaired transcript, and
    the thread of each of its lines: a row a line gained is inserted, a row it changed
    is updated in the columns a repair mends; a line may not be added or left out."""
    from sessionfix.formats.codex_index.write import InsertRow, UpdateRow

    changes: list[RowChange] = []
    keys: list[str] = []
    kept: set[int] = set()
    originals = [LINE.decode(data).row for data in _lines(transcript.path)]
    for number, data in enumerate(_lines(repaired), start=1):
        origin, unchanged = origins(number)
        key = transcript.row_of(origin) if origin > 0 else None
        if not isinstance(key, str):
            raise RepairNotWritable(f"{KIND}: a repair may not add a thread")
        kept.add(origin)
        keys.append(key)
        if unchanged:
            continue
        try:
            line = LINE.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise RepairNotWritable(f"{KIND}: thread {key} would not be a thread") from None
        original = originals[origin - 1]
        if line.id != key or line.row is None:
            raise RepairNotWritable(f"{KIND}: thread {key} would change its id or lose its row")
        if original is None:
            changes.append(InsertRow(key, line.row))
            continue
        changed: dict[str, Any] = {
            name: line.row.get(name)
            for name in CARRIED
            if name in original and line.row.get(name) != original.get(name)
        }
        if set(changed) - set(MENDED):
            raise RepairNotWritable(
                f"{KIND}: thread {key}: a repair may not change "
                f"{', '.join(sorted(set(changed) - set(MENDED)))}"
            )
        if changed:
            changes.append(UpdateRow(key, original, changed))
    if len(kept) != len(transcript.rows):
        raise RepairNotWritable(f"{KIND}: a repair may not leave a thread out")
    return changes, keys
