"""How Claude Code lists a session among those it offers to resume (`/resume`, the
Agent SDK's `listSessions`), and the index of a project folder's sessions that older
releases trusted instead of the files.

The list reads only the first and the last `WINDOW` bytes of each `<sessionId>.jsonl`
(`readHeadAndTail`, `LITE_READ_BUF_SIZE`, held to the pinned SDK 0.3.330 / Claude Code
2.1.330 by tests/test_claude_listing.py). Of those it takes, in this order, the last
`custom-title` of the tail, the `<sessionId>/custom-title.json` beside the file, the
last `custom-title` of the head, the last `ai-title` of either end; failing a title,
the last `lastPrompt` or `summary` of the tail, the first prompt of the head, an image
or document the head's prompts hold. A session it finds none of is left out; a title
written between the two ends is not shown. A line counts only whole: cut by a window's
edge it does not parse.

Releases of early 2026 (2.1.3x: anthropics/claude-code#25685, #23614, #26485) listed
the sessions of `sessions-index.json` instead, and stopped keeping it up to date; 2.1.88
and later neither read nor write it.
"""

from __future__ import annotations

import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Final

import msgspec

from sessionfix import jsonutil
from sessionfix.formats.claude.files import session_id_of
from sessionfix.model.view import Flag, Kind, ListingFacts, Role, SessionView

WINDOW: Final = 65536
"""Bytes Claude Code's session list reads at each end of a session file."""
INDEX_NAME: Final = "sessions-index.json"
"""The index of a project folder's sessions that releases of early 2026 listed."""
TITLE_SIDECAR: Final = "custom-title.json"
"""`<sessionId>/custom-title.json`: a title the list reads when the tail holds none."""
TITLE_TYPE: Final = "custom-title"
_TITLE_KEY: Final = "customTitle"
_SIDECHAIN: Final = (b'"isSidechain":true', b'"isSidechain": true')
_CONTINUED: Final = b'"type":"continued-in"'
"""A session continued in another one, which the list may show in its place."""
_USER: Final = (b'"type":"user"', b'"type": "user"')
_META: Final = (b'"isMeta":true', b'"isMeta": true')
_COMPACT_SUMMARY: Final = (b'"isCompactSummary":true', b'"isCompactSummary": true')
_MEDIA: Final = (b'"type":"image"', b'"type": "image"', b'"type":"document"', b'"type": "document"')


class ProjectListing:
    """The list's view of one main transcript: its bytes at `text`, lying as `named_as`
    in its project folder (a repair's result is read under the session's name)."""

    def __init__(self, text: Path, named_as: Path, session_id: str) -> None:
        self.text = text
        self.named_as = named_as
        self.session_id = session_id

    def facts(self, view: SessionView) -> ListingFacts:
        try:
            with open(self.text, "rb") as stream:
                return self._read_facts(view, stream)
        except OSError:
            return ListingFacts(WINDOW)

    def _read_facts(self, view: SessionView, stream: BinaryIO) -> ListingFacts:
        size = os.fstat(stream.fileno()).st_size
        head = stream.read(WINDOW)
        if size > WINDOW:
            stream.seek(size - WINDOW)
        tail = stream.read(WINDOW) if size > WINDOW else head
        folder = Path(os.path.abspath(self.named_as)).parent
        if any(mark in head.split(b"\n", 1)[0] for mark in _SIDECHAIN) or _CONTINUED in tail:
            # A side conversation, or one continued in another session (which the list
            # shows instead): never listed, by design; the folder's index still is.
            return _with_index(ListingFacts(WINDOW), folder, self.session_id, False)
        tail_title = _last_value(tail, TITLE_TYPE, _TITLE_KEY)
        titles = (
            tail_title,
            _sidecar_title(folder / self.session_id) if tail_title is None else None,
            _last_value(head, TITLE_TYPE, _TITLE_KEY),
            *(_last_value(window, "ai-title", "aiTitle") for window in (tail, head)),
        )
        shown = next((title for title in titles if title), None)
        named = bool(
            shown
            or _last_value(tail, None, "lastPrompt")
            or _last_value(tail, None, "summary")
            or _holds_prompt(head)
        )
        # A title in the tail is the newest: it is read.
        buried = None if tail_title is not None else _buried_title(view, stream, size, shown)
        facts = ListingFacts(
            WINDOW,
            unnamed=not named and Role.USER in view.roles,
            buried_title=buried,
            shown_title=shown if buried is not None else None,
        )
        return _with_index(facts, folder, self.session_id, named)


def _with_index(facts: ListingFacts, folder: Path, session_id: str, listed: bool) -> ListingFacts:
    """`facts` with what the folder's index says of the session (`listed`: the list
    shows it) and, for the folder's first session, of the index as a whole."""
    index = _index_facts(folder, session_id, listed)
    return msgspec.structs.replace(
        facts,
        index=index.path,
        index_unreadable=index.unreadable,
        unindexed=index.unindexed,
        stray_entries=index.strays,
    )


def _lines_backwards(window: bytes) -> list[bytes]:
    lines = window.split(b"\n")
    lines.reverse()
    return lines


def _parsed(line: bytes) -> Any:
    try:
        return jsonutil.loads(line)
    except (ValueError, RecursionError):
        return None


def _last_value(window: bytes, record_type: str | None, key: str) -> str | None:
    """The value the list reads for `key` in a window: that of the last whole line
    holding it as a string (of a record of `record_type`, when given), even an empty
    one; None when no line does."""
    marker = f'"{key}":'.encode()
    types = (
        ()
        if record_type is None
        else (f'"type":"{record_type}"'.encode(), f'"type": "{record_type}"'.encode())
    )
    for line in _lines_backwards(window):
        if marker not in line or (types and not any(mark in line for mark in types)):
            continue
        value = _parsed(line)
        if value is None and types:
            # A record glued after other bytes on its line: read from where it starts.
            start = line.rfind(b"{" + types[0])
            if start > 0 and line[start - 1 : start] not in (b":", b",", b"["):
                value = _parsed(line[start:])
        if not isinstance(value, dict):
            continue
        if record_type is not None and value.get("type") != record_type:
            continue
        found = value.get(key)
        if isinstance(found, str):
            return found
    return None


def _holds_prompt(head: bytes) -> bool:
    """Whether the head holds a whole line of a prompt the list can name the session by:
    a user record, not a tool result, meta line or compaction summary, with some text
    or an image or document (a superset of what the list takes, so that a session is
    never called unnamed that it names)."""
    for line in head.split(b"\n"):
        if not any(mark in line for mark in _USER) or b'"tool_result"' in line:
            continue
        if any(mark in line for mark in _META):
            continue
        if any(mark in line for mark in _MEDIA):
            return True
        if any(mark in line for mark in _COMPACT_SUMMARY):
            continue
        record = _parsed(line)
        if not isinstance(record, dict) or record.get("type") != "user":
            continue
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and content.strip():
            return True
        if isinstance(content, list) and any(
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
            and block["text"].strip()
            for block in content
        ):
            return True
    return False


def _sidecar_title(folder: Path) -> str | None:
    """The title `<sessionId>/custom-title.json` holds, as the list cleans it."""
    try:
        value = jsonutil.loads((folder / TITLE_SIDECAR).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    title = value.get(_TITLE_KEY) if isinstance(value, dict) else None
    if not isinstance(title, str):
        return None
    cleaned = "".join(c for c in title.strip() if not _is_control(c))[:200].strip()
    return cleaned or None


def _is_control(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _buried_title(view: SessionView, stream: BinaryIO, size: int, shown: str | None) -> int | None:
    """The record of the session's newest title, when the list reads it from neither
    end and so shows another title (`shown`) or none."""
    read_type = view.type_name
    if read_type is None:
        return None
    for index in reversed(list(view.records_flagged(Flag.STATE))):
        if view.kinds[index] != Kind.METADATA or read_type(index) != TITLE_TYPE:
            continue
        offset, length = view.span(index)
        if offset + length <= WINDOW or offset >= size - WINDOW:
            return None
        stream.seek(offset)
        record = _parsed(stream.read(length))
        title = record.get(_TITLE_KEY) if isinstance(record, dict) else None
        if not isinstance(title, str) or not title.strip() or title == shown:
            return None
        return index
    return None


class _IndexFacts:
    __slots__ = ("path", "strays", "unindexed", "unreadable")

    def __init__(
        self,
        path: Path | None = None,
        unreadable: str | None = None,
        unindexed: bool = False,
        strays: tuple[str, ...] = (),
    ) -> None:
        self.path = path
        self.unreadable = unreadable
        self.unindexed = unindexed
        self.strays = strays


def _index_facts(folder: Path, session_id: str, listed: bool) -> _IndexFacts:
    """What the folder's index says of this session; what is wrong with the index as a
    whole for the folder's first session by name only (one report per folder)."""
    index = folder / INDEX_NAME
    try:
        st = index.stat()
        folder_st = folder.stat()
    except OSError:
        return _IndexFacts()
    if not stat.S_ISREG(st.st_mode):
        return _IndexFacts()  # not a file Claude Code wrote
    sessions = _main_transcripts(str(folder), folder_st.st_mtime_ns)
    reports = bool(sessions) and sessions[0] == session_id
    entries, unreadable = _read_index(str(index), st.st_mtime_ns, st.st_size)
    if entries is None:
        return _IndexFacts(index, unreadable if reports else None)
    strays: tuple[str, ...] = ()
    if reports:
        present = set(sessions)
        strays = tuple(
            entry
            for entry, path in entries.items()
            if entry not in present and not (path is not None and os.path.isfile(path))
        )
    return _IndexFacts(index, None, listed and session_id not in entries, strays)


@lru_cache(maxsize=64)
def _main_transcripts(folder: str, mtime_ns: int) -> list[str]:
    """The session ids of the main transcripts in `folder`, sorted (cached per change
    of the folder: every session of a folder asks)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(sid for name in names if (sid := session_id_of(name)) is not None)


@lru_cache(maxsize=64)
def _read_index(path: str, mtime_ns: int, size: int) -> tuple[dict[str, str | None] | None, str]:
    """The index's entries (session id → the file it names, if it names one), or None and
    why they cannot be read (cached per change of the file: every session asks)."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    refused = jsonutil.refusal(data)
    if refused is not None:
        message, _ = refused
        if "end of data" in message or "empty" in message:
            return None, "ends mid-document (truncated)"
        return None, "is not JSON"
    try:
        value = jsonutil.loads(data)
    except (ValueError, RecursionError):
        return None, "is not JSON"
    entries = value.get("entries") if isinstance(value, dict) else None
    if not isinstance(entries, list):
        return None, "holds no list of entries"
    named: dict[str, str | None] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("sessionId"), str):
            continue
        path_named = entry.get("fullPath")
        named[entry["sessionId"]] = path_named if isinstance(path_named, str) else None
    return named, ""
