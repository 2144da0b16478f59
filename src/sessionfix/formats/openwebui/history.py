"""How open-webui 0.12.4 reads a saved chat for the model (spec formats/open-webui.md §3),
on plain values: the message map it walks (`chat_message` rows first, the document's
history where there are none or where a row's parent is missing), the `currentId` it
repairs in memory, the branch it walks from there and the messages it keeps of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

ROW_KEYS: Final = {
    "parent_id": "parentId",
    "model_id": "model",
    "context_summary": "contextSummary",
    "created_at": "timestamp",
}
"""A `chat_message` column's name in a message of the history, where they differ."""
SENT_KEYS: Final = (
    "id",
    "role",
    "content",
    "output",
    "files",
    "contextSummary",
    "usage",
    "model",
    "meta",
)
"""What open-webui keeps of a message it loads for the model (`MESSAGE_REPLAY_KEYS`)."""

Message = dict[str, Any]
Messages = Mapping[str, Message]


class Reading(NamedTuple):
    """What open-webui makes of a chat."""

    messages: dict[str, Message]
    """The map it walks, by message id."""
    from_rows: bool
    """The map is built from `chat_message` rows (else from the document's history)."""
    current: str | None
    """The `currentId` after its in-memory repair."""
    branch: list[str]
    """The ids from the root to `current`, as its parent walk finds them."""


def parent_of(message: Mapping[str, Any]) -> object:
    return message.get("parentId")


def children_of(message: Mapping[str, Any]) -> list[Any]:
    found = message.get("childrenIds")
    return found if isinstance(found, list) else []


def completed_children(messages: Messages) -> dict[str, list[str]]:
    """Each message's `childrenIds` with every message naming it as parent added at the
    end (open-webui's in-memory repair and `merge_history` both do this)."""
    children = {key: list(children_of(message)) for key, message in messages.items()}
    listed: dict[str, set[str]] = {}
    for key, message in messages.items():
        parent = parent_of(message)
        if isinstance(parent, str) and parent and isinstance(messages.get(parent), dict):
            if parent not in listed:
                listed[parent] = {child for child in children[parent] if isinstance(child, str)}
            if key not in listed[parent]:
                listed[parent].add(key)
                children[parent].append(key)
    return children


def rebuilt_children(messages: Messages) -> dict[str, list[str]]:
    """Each message's children as its children's `parentId` say, in the order they
    come in the map (what a save's `merge_history` stores)."""
    children: dict[str, list[str]] = {key: [] for key in messages}
    for key, message in messages.items():
        parent = parent_of(message)
        if isinstance(parent, str) and parent in children:
            children[parent].append(key)
    return children


def mended_children(stored: list[Any], children: list[str]) -> list[str]:
    """A stored child list made to agree with the parent links (`children`): the
    children it lists in its order, once each, then those it lacks."""
    valid = set(children)
    kept = list(
        dict.fromkeys(child for child in stored if isinstance(child, str) and child in valid)
    )
    taken = set(kept)
    return kept + [child for child in children if child not in taken]


def _last_descendant(messages: Messages, children: Mapping[str, list[Any]], start: str) -> str:
    """Down from `start`, each time to the last listed child that is a message with a
    role naming this one as its parent."""
    seen: set[str] = set()
    current = start
    while current in messages and current not in seen:
        seen.add(current)
        following = None
        for child in reversed(children.get(current, [])):
            found = messages.get(child) if isinstance(child, str) else None
            if (
                isinstance(found, dict)
                and child not in seen
                and found.get("id") == child
                and found.get("role")
                and parent_of(found) == current
            ):
                following = child
                break
        if following is None:
            break
        current = following
    return current


def _bad_leaf(messages: Messages, message: Mapping[str, Any]) -> bool:
    """An assistant reply saved without parent or time (open-webui#26257), which
    open-webui does not keep as the current message."""
    output = message.get("output") or []
    role = (
        next(
            (item.get("role") for item in output if isinstance(item, dict) and item.get("role")),
            None,
        )
        if isinstance(output, list)
        else None
    )
    return (
        role == "assistant"
        and parent_of(message) is None
        and not message.get("timestamp")
        and len(messages) > 1
    )


def kept_as_current(messages: Messages, current: str) -> bool:
    """Whether open-webui keeps `current` as the message it reads from (a message with an
    id and a role), moving it down only along valid children; else it picks the newest
    childless message, which the child lists decide."""
    found = messages.get(current)
    return (
        isinstance(found, dict)
        and bool(found.get("id"))
        and bool(found.get("role"))
        and not _bad_leaf(messages, found)
    )


def repaired_current(messages: Messages, current: object) -> str | None:
    """The `currentId` open-webui reads a chat with: a message with an id and a role
    moved down to its last descendant; else the childless message with a role and the
    highest timestamp (spec §3.1). Computed on the document's history."""
    children = completed_children(messages)
    if isinstance(current, str) and kept_as_current(messages, current):
        return _last_descendant(messages, children, current)
    latest: str | None = None
    newest: Any = -1
    for key, message in messages.items():
        if not isinstance(message, dict) or not message.get("role"):
            continue
        stamp = message.get("timestamp") or 0
        if not children.get(key) and _later(stamp, newest):
            latest, newest = key, stamp
    if latest is None:
        return current if isinstance(current, str) else None
    return latest


def _later(stamp: Any, newest: Any) -> bool:
    try:
        return bool(stamp > newest)
    except TypeError:
        return False


def row_message(key: str, values: Mapping[str, Any]) -> Message:
    """A `chat_message` row as the message open-webui builds of it: its columns under
    the history's names, NULL ones left out, `content` at least empty."""
    message: Message = {"id": key}
    for column, value in values.items():
        if value is None:
            continue
        message[ROW_KEYS.get(column, column)] = value
    message.setdefault("content", "")
    return message


def walked(messages: Messages, current: str | None) -> list[str]:
    """The ids from the root to `current` by parent links, a loop cut where it closes."""
    found: list[str] = []
    seen: set[str] = set()
    key: object = current
    while isinstance(key, str) and key and key not in seen and isinstance(messages.get(key), dict):
        seen.add(key)
        found.append(key)
        key = parent_of(messages[key])
    found.reverse()
    return found


def reading(
    document: Messages, rows: Mapping[str, Message] | None, stored_current: object
) -> Reading:
    """What open-webui reads of a chat whose history is `document` and whose
    `chat_message` rows are `rows` (None or empty: it has none)."""
    current = repaired_current(document, stored_current)
    if rows:
        messages = dict(rows)
        unresolved = {
            parent
            for message in rows.values()
            if isinstance(parent := parent_of(message), str) and parent and parent not in rows
        }
        for key in sorted(unresolved):
            if isinstance(document.get(key), dict):
                messages[key] = document[key]
        from_rows = True
    else:
        messages = {key: value for key, value in document.items() if isinstance(value, dict)}
        from_rows = False
    return Reading(messages, from_rows, current, walked(messages, current))


def sent(messages: Iterable[Message]) -> list[Message]:
    """The messages of a branch open-webui keeps for the model, with the fields it keeps
    (an assistant message with neither content nor output is left out)."""
    return [
        {key: value for key, value in message.items() if key in SENT_KEYS}
        for message in messages
        if not (
            message.get("role") == "assistant"
            and not message.get("content")
            and not message.get("output")
        )
    ]
