"""Reading opencode's legacy JSON storage (opencode 1.1 and earlier, spec
formats/opencode.md §7), read-only.

`storage/session/<projectID>/<sessionID>.json` holds a session's info,
`storage/message/<sessionID>/<messageID>.json` its messages and
`storage/part/<messageID>/<partID>.json` their parts; every file carries its own ids.
opencode 1.18 no longer imports this tree, so its sessions are read as the rows they
would become (`MessageRow`, `PartRow`: the file's bytes as `data`), in the database's
order. Files that are empty, NUL-filled (a crash while 1.1 wrote in place) or not a JSON
object are not sessions' records: they are listed as `LegacyProblem`s and left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from sessionfix.errors import InputError, described
from sessionfix.formats.opencode.database import MessageRow, PartRow, SessionRow, StoredMessage

JSON_SUFFIX: Final = ".json"


class LegacyProblem(NamedTuple):
    """A file of the tree that holds no record."""

    path: Path
    reason: str
    """What is wrong with it, as a phrase ("empty", "filled with NUL bytes", ...)."""


class _Time(msgspec.Struct):
    created: object = None


class _Info(msgspec.Struct):
    """What a record file is read for: its ids and its creation time."""

    id: object = None
    sessionID: object = None
    parentID: object = None
    directory: object = None
    title: object = None
    version: object = None
    time: _Time | None = None


_DECODER: Final = msgspec.json.Decoder(_Info)


def _decoded(data: bytes) -> _Info | str:
    """A file's record, or why its bytes hold none."""
    if not data.strip():
        return "empty" if not data else "blank"
    if not data.strip(b"\x00"):
        return "filled with NUL bytes"
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError:
        if data.lstrip()[:1] != b"{":
            return "not a JSON object"
        return "not an opencode record (a field of the wrong type)"
    except msgspec.DecodeError:
        return "not valid JSON" if data.lstrip()[:1] == b"{" else "not a JSON object"


def _time(info: _Info) -> int:
    created = info.time.created if info.time is not None else None
    return created if isinstance(created, int) and not isinstance(created, bool) else 0


def _text(value: object, fallback: str) -> str:
    return value if isinstance(value, str) else fallback


class LegacyStorage:
    """The `storage/` folder of an opencode data folder, read file by file."""

    def __init__(self, root: Path) -> None:
        if not (root / "session").is_dir():
            raise InputError(f"{root}: not opencode's legacy storage (no session folder)")
        self.root = root
        self.problems: list[LegacyProblem] = []
        """Files met so far that hold no record."""

    def _read(self, path: Path) -> tuple[bytes, _Info] | None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            self.problems.append(LegacyProblem(path, f"cannot be read ({described(exc)})"))
            return None
        info = _decoded(data)
        if isinstance(info, str):
            self.problems.append(LegacyProblem(path, info))
            return None
        return data, info

    def _files(self, folder: Path) -> list[Path]:
        if not folder.is_dir():
            return []
        return sorted(
            path for path in folder.iterdir() if path.suffix == JSON_SUFFIX and path.is_file()
        )

    def sessions(self) -> list[SessionRow]:
        """Every session whose info file is readable, oldest first; a session's id is
        its file name, as the database import derived it."""
        found = []
        for project in sorted(path for path in (self.root / "session").iterdir() if path.is_dir()):
            for path in self._files(project):
                read = self._read(path)
                if read is None:
                    continue
                info = read[1]
                parent = info.parentID if isinstance(info.parentID, str) else None
                found.append(
                    SessionRow(
                        path.stem,
                        parent,
                        _text(info.directory, ""),
                        _text(info.title, ""),
                        _text(info.version, ""),
                        _time(info),
                    )
                )
        return sorted(found, key=lambda row: (row.time_created, row.id))

    def messages(self, session_id: str) -> Iterator[StoredMessage]:
        """The session's readable messages by creation time, then id (the order the
        database import gives them; 1.1 itself sorted by id, spec §7), each with its
        readable parts by id. Ids are the files' names."""
        rows = []
        for path in self._files(self.root / "message" / session_id):
            read = self._read(path)
            if read is not None:
                rows.append(MessageRow(path.stem, session_id, _time(read[1]), read[0]))
        rows.sort(key=lambda row: (row.time_created, row.id))
        for row in rows:
            parts = []
            for path in self._files(self.root / "part" / row.id):
                read = self._read(path)
                if read is not None:
                    parts.append(PartRow(path.stem, row.id, session_id, read[0]))
            yield StoredMessage(row, tuple(parts))
