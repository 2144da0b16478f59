"""A CodeWhale session document as CodeWhale 0.9.10 reads it (spec formats/codewhale.md
§2-3): parsed strictly and whole, checked as its serde types check it, its journal's
active branch walked from the leaf, each entry projected to the message it stands for.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import orjson
from msgspec import Struct

from sessionfix import jsonutil

SUPPORTED_SCHEMA: Final = 1
ENTRY_KINDS: Final = frozenset(
    {"message", "user", "assistant", "compaction", "branch_summary", "system"}
)
BLOCK_TYPES: Final = frozenset(
    {
        "text",
        "image_url",
        "thinking",
        "tool_use",
        "tool_result",
        "server_tool_use",
        "tool_search_tool_result",
        "code_execution_tool_result",
    }
)
CALLER_ROLES: Final = frozenset({"assistant", "assistant_interrupted"})
"""The roles whose `tool_use` blocks open a group of tool calls (§3 step 6)."""
MUTATION_TOOLS: Final = frozenset({"write", "edit", "write_file", "edit_file", "apply_patch"})
"""Tools whose confirmations CodeWhale never collapses on the wire (PR #1741)."""
BOM: Final = b"\xef\xbb\xbf"
DEPTH_LIMIT: Final = 128
"""serde_json's recursion limit: a document whose arrays and objects nest this deep
(the document itself is the first) fails to load."""


class Unreadable(Struct, frozen=True):
    """A document CodeWhale cannot parse at all: why, in words; `problem`, when its bytes
    are no damaged line to show (none, or JSON that only nests too deep), is what
    CodeWhale refuses of it."""

    reason: str
    problem: str | None = None


EMPTY: Final = Unreadable("is empty", "the document is empty")
"""A document of no bytes, or only whitespace."""
TOO_DEEP: Final = Unreadable(
    "nests too deep",
    f"arrays and objects nest {DEPTH_LIMIT} deep or more, past serde_json's limit",
)


class Document:
    """A document that parses as JSON, with what CodeWhale's types refuse of it, and its
    parts read once."""

    __slots__ = ("entries", "journal", "leaf_id", "messages", "problems", "value")

    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value
        self.problems = problems(value)
        """Why CodeWhale refuses to load it, one sentence each (empty: it loads)."""
        journal = value.get("journal")
        self.journal: dict[str, Any] | None = journal if isinstance(journal, dict) else None
        entries = self.journal.get("entries") if self.journal is not None else None
        self.entries: list[dict[str, Any]] = (
            [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
        )
        leaf = self.journal.get("leaf_id") if self.journal is not None else None
        self.leaf_id: str | None = leaf if isinstance(leaf, str) else None
        messages = value.get("messages")
        self.messages: list[Any] = messages if isinstance(messages, list) else []


def parse(data: bytes) -> Document | Unreadable:
    """The document in `data`, as `serde_json::from_str` takes it: whole, strict (no
    byte-order mark, nothing after the value but whitespace), valid UTF-8."""
    if data.startswith(BOM):
        return Unreadable("starts with a UTF-8 byte-order mark")
    if b"\x00" in data:
        return Unreadable("holds NUL bytes")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return Unreadable("is not valid UTF-8")
    if not data.strip(b" \t\r\n"):
        return EMPTY
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth" in exc.msg:  # past orjson's 1,024 levels
            return TOO_DEEP
        reason = f"does not parse ({exc.msg} at byte {exc.pos})"
        try:
            jsonutil.loads(data)
        except ValueError:
            return Unreadable(reason)  # its bytes, on a line, are a damaged line
        # JSON that serde_json refuses (a lone surrogate, a number past a double) reads
        # as a whole line to the line rules: the refusal is the finding.
        return Unreadable(reason, f"the document {reason}")
    if not isinstance(value, dict):
        return Unreadable("is no JSON object")
    if _nesting(value) >= DEPTH_LIMIT:
        return TOO_DEEP
    return Document(value)


def _nesting(value: dict[str, Any]) -> int:
    """How deep the arrays and objects of a parsed document nest (counted up to
    `DEPTH_LIMIT`), a level at a time."""
    depth = 0
    level: list[Any] = [value]
    while level and depth < DEPTH_LIMIT:
        depth += 1
        below: list[Any] = []
        for item in level:
            for child in item.values() if type(item) is dict else item:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        level = below
    return depth


def _is_time(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value


BLOCK_TEXTS: Final[dict[str, tuple[str, ...]]] = {
    "text": ("text",),
    "thinking": ("thinking",),
    "tool_use": ("id", "name"),
    "tool_result": ("tool_use_id", "content"),
    "server_tool_use": ("id", "name"),
    "tool_search_tool_result": ("tool_use_id",),
    "code_execution_tool_result": ("tool_use_id",),
}
"""The string fields each block type requires (`ContentBlock`, §2): serde refuses a
block without one, or with another type there (a `tool_result` content list)."""
ENTRY_TEXTS: Final[dict[str, tuple[str, ...]]] = {
    "user": ("text",),
    "assistant": ("text",),
    "compaction": ("summary",),
    "branch_summary": ("branch_id", "summary"),
    "system": ("content",),
}
"""The string fields each entry kind other than `message` requires (`SessionEntry`)."""


def _missing_texts(value: dict[str, Any], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if not isinstance(value.get(name), str)]


def _message_problems(message: object, where: str) -> list[str]:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        return [f"{where} is no message (a role and content blocks)"]
    content = message.get("content")
    if not isinstance(content, list):
        return [f"{where} has no list of content blocks"]
    found: list[str] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or kind not in BLOCK_TYPES:
            found.append(f"{where} holds a content block of unknown type {kind!r}")
            continue
        missing = _missing_texts(block, BLOCK_TEXTS.get(kind, ()))
        if kind == "image_url":
            image = block.get("image_url")
            missing = (
                [] if isinstance(image, dict) and isinstance(image.get("url"), str) else ["url"]
            )
        if missing:
            found.append(f"{where} holds a {kind} block without a string `{missing[0]}`")
    return found


def problems(value: dict[str, Any]) -> list[str]:
    """What CodeWhale's `SavedSession` type refuses of a parsed document (§2)."""
    found: list[str] = []
    version = value.get("schema_version", SUPPORTED_SCHEMA)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        found.append(f"schema_version {version!r} is no version number")
    elif version > SUPPORTED_SCHEMA:
        found.append(f"schema v{version} is newer than supported v{SUPPORTED_SCHEMA}")
    if not isinstance(value.get("metadata"), dict):
        found.append("the required `metadata` object is missing")
    if not isinstance(value.get("messages"), list):
        found.append("the required `messages` list is missing")
    else:
        for position, message in enumerate(value["messages"]):
            found.extend(_message_problems(message, f"message {position}"))
    journal = value.get("journal")
    if journal is None:
        return found
    entries = journal.get("entries") if isinstance(journal, dict) else None
    if not isinstance(entries, list):
        found.append("the journal holds no list of entries")
        return found
    for position, entry in enumerate(entries):
        where = f"journal entry {position}"
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            found.append(f"{where} has no id")
            continue
        kind = entry.get("kind")
        if kind not in ENTRY_KINDS:
            found.append(f"{where} is of unknown kind {kind!r}")
        elif kind == "message":
            found.extend(_message_problems(entry.get("message"), where))
        elif missing := _missing_texts(entry, ENTRY_TEXTS[kind]):
            found.append(f"{where} ({kind}) has no string `{missing[0]}`")
        if not _is_time(entry.get("created_at")):
            found.append(f"{where} has no RFC 3339 created_at ({entry.get('created_at')!r})")
    return found


def _text_message(role: str, text: object) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def projected(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The message an entry stands for in the active messages (None: no message)."""
    kind = entry.get("kind")
    if kind == "message":
        message = entry.get("message")
        return message if isinstance(message, dict) else None
    if kind in ("user", "assistant"):
        return _text_message(kind, entry.get("text", ""))
    if kind == "compaction":
        return _text_message("system", f"[compaction summary] {entry.get('summary', '')}")
    if kind == "branch_summary":
        return _text_message("system", f"[branch summary] {entry.get('summary', '')}")
    if kind == "system":
        return _text_message("system", entry.get("content", ""))
    return None


def by_id(entries: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Entry id → its place; a later duplicate wins, as CodeWhale's map keeps it."""
    return {entry["id"]: at for at, entry in enumerate(entries) if isinstance(entry.get("id"), str)}


def root_to_leaf(entries: Sequence[dict[str, Any]], leaf_id: str | None) -> list[int]:
    """The places of the entries from the root to `leaf_id`, as CodeWhale walks them: up
    the parent links until an id names no entry or one already seen (§3 step 4)."""
    index = by_id(entries)
    path: list[int] = []
    seen: set[int] = set()
    current = index.get(leaf_id) if leaf_id is not None else None
    while current is not None and current not in seen:
        seen.add(current)
        path.append(current)
        parent = entries[current].get("parent_id")
        current = index.get(parent) if isinstance(parent, str) else None
    path.reverse()
    return path


def active_messages(document: Document) -> list[Any]:
    """The messages CodeWhale loads (`ensure_journal`): the journal's active branch when
    it has one and that path is not empty, else the document's `messages` array."""
    if document.journal is not None:
        entries = document.entries
        path = root_to_leaf(entries, document.leaf_id)
        if path:
            return [m for m in (projected(entries[at]) for at in path) if m is not None]
    return document.messages


def serialised(value: dict[str, Any]) -> bytes:
    """As CodeWhale writes a document: `serde_json::to_string_pretty` (2 spaces, `": "`,
    non-ASCII as it is, no final newline)."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2)
