"""Writing a repaired CodeWhale document the way CodeWhale itself repairs one (spec
formats/codewhale.md §4, §7): the journal is append-only evidence, so a change of what
the session loads is a sibling branch appended under the last entry it shares with the
active one, and the leaf moves to its tip; only pointer fixes (a `parent_id`) and a
byte-identical repeat of an entry change the entries there are. `messages`,
`metadata.message_count` and `context_references` follow the new branch; everything
else, `metadata.updated_at` first (it decides which 50 sessions CodeWhale keeps), stays.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from sessionfix.errors import SessionfixError
from sessionfix.formats.codewhale.document import (
    BOM,
    Document,
    Unreadable,
    by_id,
    parse,
    projected,
    root_to_leaf,
    serialised,
)
from sessionfix.formats.codewhale.pairs import crashed_result
from sessionfix.formats.codewhale.transcript import DOCUMENT, ENTRY, MESSAGE, TAG, without_tag
from sessionfix.formats.common import uuid_of
from sessionfix.stores import Origins


class RepairNotWritable(SessionfixError):
    """A repaired transcript that is no change a CodeWhale repair may make."""


def _lines(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        yield from handle


def _decoded(line: bytes) -> dict[str, Any]:
    value = orjson.loads(line[len(BOM) :] if line.startswith(BOM) else line)
    if not isinstance(value, dict):
        raise RepairNotWritable("CodeWhale document: a repaired line is no JSON object")
    return value


def _broken_links(entries: Sequence[dict[str, Any]]) -> set[int]:
    """The entries whose `parent_id` names no entry, or leads back to themselves."""
    index = by_id(entries)
    parents = [
        index.get(parent) if isinstance(parent := entry.get("parent_id"), str) else None
        for entry in entries
    ]
    broken = {
        at
        for at, entry in enumerate(entries)
        if isinstance(entry.get("parent_id"), str) and parents[at] is None
    }
    done: set[int] = set()
    for start in range(len(entries)):
        walked: dict[int, int] = {}
        current: int | None = start
        while current is not None and current not in done and current not in walked:
            walked[current] = len(walked)
            current = parents[current]
        if current is not None and current in walked:
            broken.update(list(walked)[walked[current] :])
        done.update(walked)
    return broken


def new_entry_id(session_id: str, parent_id: str | None, position: int) -> str:
    """A deterministic UUID for an entry a repair appends (rules.md §9.3)."""
    return uuid_of(f"codewhale\0{session_id}\0{parent_id or ''}\0{position}")


def rebranched(
    entries: list[dict[str, Any]],
    leaf_id: str | None,
    wanted: Sequence[Any],
    session_id: str,
    spawn_depth: object,
) -> tuple[list[dict[str, Any]], str | None]:
    """`rebranch_active_messages(wanted)`: keep the common prefix of the active path, and
    append the rest of `wanted` as new `message` entries under its last entry (dated as
    the entry they follow); the entries after it and the new leaf."""
    path = root_to_leaf(entries, leaf_id)
    shared = 0
    while (
        shared < len(path)
        and shared < len(wanted)
        and projected(entries[path[shared]]) == wanted[shared]
    ):
        shared += 1
    parent = entries[path[shared - 1]] if shared else None
    parent_id: str | None = parent["id"] if parent is not None else None
    created = (parent or (entries[path[0]] if path else {})).get("created_at")
    taken = set(by_id(entries))
    added: list[dict[str, Any]] = []
    for position, message in enumerate(wanted[shared:], start=shared):
        entry_id = new_entry_id(session_id, parent_id, position)
        serial = 0
        while entry_id in taken:
            serial += 1
            entry_id = new_entry_id(session_id, f"{parent_id}\0{serial}", position)
        taken.add(entry_id)
        entry: dict[str, Any] = {"id": entry_id}
        if parent_id is not None:
            entry["parent_id"] = parent_id
        entry["kind"] = "message"
        entry["message"] = message
        if created is not None:
            entry["created_at"] = created
        entry["spawn_depth"] = spawn_depth if spawn_depth is not None else 0
        added.append(entry)
        parent_id = entry_id
    return entries + added, parent_id


def _shift_references(references: Any, before: Sequence[Any], after: Sequence[Any]) -> Any:
    """`context_references` with each `message_index` moved to where its message is now
    (the same message at or after the place they share up to; else the nearest place):
    none is dropped."""
    if not isinstance(references, list):
        return references
    shared = 0
    while shared < min(len(before), len(after)) and before[shared] == after[shared]:
        shared += 1
    for reference in references:
        index = reference.get("message_index") if isinstance(reference, dict) else None
        if not isinstance(index, int) or index < shared:
            continue
        moved = None
        if index < len(before):
            moved = next(
                (at for at in range(shared, len(after)) if after[at] == before[index]), None
            )
        reference["message_index"] = (
            moved if moved is not None else max(0, min(index, len(after) - 1))
        )
    return references


def _only_crashed_results(message: Any) -> bool:
    """Whether a message holds nothing but CodeWhale's crashed results."""
    content = message.get("content") if isinstance(message, dict) else None
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and bool(content)
        and all(
            isinstance(block, dict) and block == crashed_result(str(block.get("tool_use_id")))
            for block in content
        )
    )


def _as_codewhale_repairs(messages: Sequence[tuple[Any, bool]]) -> list[Any]:
    """The messages (each with whether the repair made or changed it) as CodeWhale's own
    repair leaves them: a message the repair left with no blocks goes, and the crashed
    results it put one by one after a call message are one user message."""
    gathered: list[Any] = []
    after_crashed = False
    for message, touched in messages:
        if message is None or (touched and message.get("content") == []):
            continue
        crashed = touched and _only_crashed_results(message)
        if crashed and after_crashed:
            last = gathered[-1]
            gathered[-1] = {**last, "content": [*last["content"], *message["content"]]}
        else:
            gathered.append(message)
        after_crashed = crashed
    return gathered


def repaired_document(
    original: bytes, transcript: Path, repaired: Path, origins: Origins, session_id: str
) -> bytes:
    """The bytes of the document `original` after the repair the transcript's lines
    (`transcript`, read from `original`) became `repaired`'s."""
    document = parse(original)
    new_lines = list(_lines(repaired))
    old_lines = list(_lines(transcript))
    if new_lines == old_lines:
        return original
    if isinstance(document, Unreadable):
        return _unreadable_repaired(original, old_lines, new_lines)
    if isinstance(document, Document) and (
        not new_lines or _decoded(new_lines[0]).get(TAG) != DOCUMENT
    ):
        raise RepairNotWritable("CodeWhale document: a repair may not remove the document line")
    if document.problems:
        raise RepairNotWritable("CodeWhale refuses the document: a repair may not change it")
    if document.journal is None:
        return _messages_repaired(document, new_lines)
    return _journal_repaired(document, old_lines, new_lines, origins, session_id)


def _unreadable_repaired(original: bytes, old: list[bytes], new: list[bytes]) -> bytes:
    """A document that does not parse, whose bytes line a fix changed: only into a
    document CodeWhale loads (a byte-order mark or NUL bytes stripped), written as
    CodeWhale writes one (only a stripped byte-order mark keeps every other byte)."""
    if len(new) != len(old) or new[0] != old[0] or new[2:] != old[2:]:
        raise RepairNotWritable("CodeWhale document that does not parse: only its bytes may change")
    if old[1].startswith(BOM) and new[1] == old[1][len(BOM) :]:
        return original[len(BOM) :]
    fixed = parse(new[1].removesuffix(b"\n"))
    if not isinstance(fixed, Document) or fixed.problems:
        raise RepairNotWritable("CodeWhale document: the fixed bytes would still not load")
    return serialised(fixed.value)


def _messages_repaired(document: Document, new_lines: list[bytes]) -> bytes:
    """A document without a journal (before 0.9.5): its `messages` are the repaired
    lines' (CodeWhale builds the journal from them on its next save)."""
    value = document.value
    messages = []
    for line in new_lines[1:]:
        record = _decoded(line)
        if record.get(TAG) != MESSAGE or not isinstance(record.get(MESSAGE), dict):
            raise RepairNotWritable("CodeWhale document: a repair may only change messages")
        messages.append(record[MESSAGE])
    stored = {orjson.dumps(message) for message in document.messages}
    messages = _as_codewhale_repairs([(m, orjson.dumps(m) not in stored) for m in messages])
    if "context_references" in value:
        _shift_references(value["context_references"], document.messages, messages)
    value["messages"] = messages
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        metadata["message_count"] = len(messages)
    return serialised(value)


def _journal_repaired(
    document: Document,
    old_lines: list[bytes],
    new_lines: list[bytes],
    origins: Origins,
    session_id: str,
) -> bytes:
    value = document.value
    journal = value["journal"]
    stored = list(journal["entries"])
    base = [dict(entry) for entry in stored]
    seen: set[int] = set()
    known = set(by_id(stored))
    broken = _broken_links(stored)
    relinked = False
    repaired: list[dict[str, Any]] = []
    made: set[str] = set()
    changed: set[str] = set()
    for number, line in enumerate(new_lines[1:], start=2):
        record = _decoded(line)
        if record.get(TAG) != ENTRY:
            raise RepairNotWritable("CodeWhale document: a repair may only change entries")
        entry = without_tag(record)
        repaired.append(entry)
        origin, unchanged = origins(number)
        at = origin - 2
        if origin < 2 or at >= len(stored) or at in seen:
            made.add(str(entry.get("id")))
            continue
        seen.add(at)
        if unchanged:
            continue
        changed.add(str(entry.get("id")))
        before = {k: v for k, v in stored[at].items() if k != "parent_id"}
        after = {k: v for k, v in entry.items() if k != "parent_id"}
        if before == after and at in broken:
            base[at] = entry  # a pointer fix: the broken link changes in place
            relinked = relinked or stored[at].get("parent_id") not in known
    raw = [orjson.dumps(entry) for entry in stored]
    kept = {raw[at] for at in seen}
    active = set(root_to_leaf(stored, document.leaf_id))
    gone = {
        at for at in range(len(stored)) if at not in seen and (at not in active or raw[at] in kept)
    }
    # Byte-identical repeats and entries off the active path (a prune) go; an entry of the
    # path a fix dropped stays, and the repaired messages become a branch of their own.
    base = [entry for at, entry in enumerate(base) if at not in gone]
    named = _decoded(new_lines[0]).get("leaf_id")
    leaf_id = named if isinstance(named, str) else None
    index = by_id(repaired)
    leaf = index.get(leaf_id) if leaf_id is not None else None
    while leaf is not None:  # the leaf follows what a repair appended below it
        below = next(
            (
                at
                for at, entry in enumerate(repaired)
                if entry.get("parent_id") == repaired[leaf].get("id") and entry.get("id") in made
            ),
            None,
        )
        if below is None:
            break
        leaf = below
        leaf_id = repaired[leaf].get("id")
    path = root_to_leaf(repaired, leaf_id)
    touched = made | changed
    wanted = _as_codewhale_repairs(
        [(projected(repaired[at]), repaired[at].get("id") in touched) for at in path]
    )
    active_path = root_to_leaf(base, document.leaf_id)
    current = [m for m in (projected(base[at]) for at in active_path) if m is not None]
    if relinked and current != document.messages:
        raise RepairNotWritable(
            "CodeWhale document: re-linking the entry would not give back the messages the "
            "document holds (CodeWhale has saved it since the link broke); left as it is"
        )
    entries, new_leaf = base, document.leaf_id
    if wanted != current and (path or active_path):
        entries, new_leaf = rebranched(
            base, document.leaf_id, wanted, session_id, journal.get("spawn_depth")
        )
    walked = root_to_leaf(entries, new_leaf)
    messages = (
        [m for m in (projected(entries[at]) for at in walked) if m is not None]
        if walked or active_path
        else document.messages  # the walk was empty before: CodeWhale loads `messages`
    )
    journal["entries"] = entries
    if new_leaf is not None:
        journal["leaf_id"] = new_leaf
        if "leaf_id" in value:
            value["leaf_id"] = new_leaf
    elif active_path:  # every message went: the leaf moves to none
        journal.pop("leaf_id", None)
        value.pop("leaf_id", None)
    if "context_references" in value:
        _shift_references(value["context_references"], document.messages, messages)
    value["messages"] = messages
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        metadata["message_count"] = len(messages)
    return serialised(value)
