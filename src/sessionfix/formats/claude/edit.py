"""Record changes in Claude Code's field names; every transform keeps the key order."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from sessionfix.errors import SessionfixError
from sessionfix.formats.common import (
    generate_uuid,
    without_message_blocks,
    without_repeated_results,
)
from sessionfix.formats.content import is_blank_text, shortened
from sessionfix.media import digest
from sessionfix.model.view import InlineMedia, RefRole, SessionView, ToolCall

MISSING_RESULT_TEXT: Final = "[Tool result missing due to internal error]"
"""Claude Code's own placeholder for a tool call without result (rules.md §6.3)."""
_REMINDER: Final = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_COPIED_ENVELOPE: Final = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch")
_COPIED_TAIL: Final = ("slug",)
_INLINE_FILE: Final = "base64"
"""The key of a read image's or document's data in `toolUseResult.file`."""


_MEMBER: Final = RefRole.SEGMENT_MEMBER
_SEGMENT_FIELDS: Final = (
    (("compactMetadata", "preservedSegment", "headUuid"), RefRole.SEGMENT_HEAD),
    (("compactMetadata", "preservedSegment", "tailUuid"), RefRole.SEGMENT_TAIL),
    (("compactMetadata", "preservedMessages", "uuids"), _MEMBER),
    (("compactMetadata", "preservedMessages", "allUuids"), _MEMBER),
)
"""A compaction's kept records, by field path; the anchor is a summary or the boundary
itself, which no fix drops."""


def _get(record: Any, path: tuple[str, ...]) -> object:
    value: object = record
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


class ClaudeEditor:
    """Changes Claude records. Assistant content is signed (thinking): only an unsafe fix
    takes blocks out of it, never changes one."""

    parent_link = "parentUuid"

    def holds_more_blocks_than(self, record: Any, going: int) -> bool:
        """Whether the user record holds more than the `going` blocks fixes drop from it
        (the first result of a repeat in one record stays)."""
        message = record.get("message") if isinstance(record, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        return isinstance(content, list) and len(content) > going

    def identity(self, record: Any) -> str | None:
        uuid = record.get("uuid") if isinstance(record, dict) else None
        return uuid if isinstance(uuid, str) and uuid else None

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        # The anchor's uuid is unique in the file: the file's name adds nothing (and a
        # repair may read the session under a temporary name).
        return generate_uuid("", anchor_id, salt, view.has_id)

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        if not isinstance(record, dict):
            return []
        found: list[tuple[str, RefRole]] = []
        if isinstance(record.get("parentUuid"), str):
            found.append(("parentUuid", RefRole.PARENT))
        if isinstance(record.get("leafUuid"), str):
            found.append(("leafUuid", RefRole.LEAF))
        if isinstance(record.get("logicalParentUuid"), str):
            found.append(("logicalParentUuid", RefRole.LOGICAL_PARENT))
        for path, role in _SEGMENT_FIELDS:
            value = _get(record, path)
            if isinstance(value, str) or (isinstance(value, list) and role is _MEMBER):
                found.append((".".join(path), role))
        return found

    def get_field(self, record: Any, name: str) -> object:
        return _get(record, tuple(name.split(".")))

    def set_field(self, name: str, value: object) -> Callable[[Any], Any]:
        path = name.split(".")

        def transform(record: Any) -> Any:
            holder = record
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = value
            return record

        return transform

    def unlinked(self, role: RefRole) -> object:
        """A parent or leaf link with nothing left to name becomes null."""
        return None

    def set_parent(self, parent_id: str | None) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            record["parentUuid"] = parent_id
            return record

        return transform

    def set_first_kept(self, entry_id: str | None, index: int | None) -> Callable[[Any], Any]:
        raise SessionfixError("Claude compactions keep no first-kept reference to move")

    def replace_result_text(self, text: str) -> Callable[[Any], Any]:
        """The read's `tool_result` text and its `toolUseResult.file.content` become `text`;
        system reminders attached to the result follow it."""

        def transform(record: Any) -> Any:
            for block in record["message"]["content"]:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                content = block.get("content")
                parts = content if isinstance(content, list) else []
                original = (
                    content
                    if isinstance(content, str)
                    else "".join(
                        part["text"]
                        for part in parts
                        if isinstance(part, dict) and isinstance(part.get("text"), str)
                    )
                )
                replaced = text + "".join("\n" + m for m in _REMINDER.findall(original))
                if isinstance(content, str):
                    block["content"] = replaced
                else:
                    block["content"] = [{"type": "text", "text": replaced}]
            sidecar = record.get("toolUseResult")
            read = sidecar.get("file") if isinstance(sidecar, dict) else None
            if isinstance(read, dict) and "content" in read:
                read["content"] = text
            return record

        return transform

    def shorten_result_text(self, head: int, tail: int, note: str) -> Callable[[Any], Any]:
        """The text of each `tool_result` block is shortened (`shortened`); the
        `toolUseResult` copy Claude Code keeps for its UI, never sent, stays."""

        def transform(record: Any) -> Any:
            message = record.get("message")
            blocks = message.get("content") if isinstance(message, dict) else None
            for block in blocks if isinstance(blocks, list) else ():
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                content = block.get("content")
                if isinstance(content, str):
                    block["content"] = shortened(content, head, tail, note)
                    continue
                for part in content if isinstance(content, list) else ():
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        part["text"] = shortened(part["text"], head, tail, note)
            return record

        return transform

    def shorten_kept_copy(self, head: int, tail: int, note: str) -> Callable[[Any], Any]:
        """Every text of the `toolUseResult` copy Claude Code keeps for its UI (a
        command's stdout, a read file's content, an edit's original file...) is shortened
        the same way; an inline file's base64 stays, for a media reduction to replace."""

        def shorten(value: Any) -> Any:
            if isinstance(value, str):
                return shortened(value, head, tail, note)
            if isinstance(value, list):
                return [shorten(item) for item in value]
            if isinstance(value, dict):
                return {
                    key: item if key == _INLINE_FILE else shorten(item)
                    for key, item in value.items()
                }
            return value

        def transform(record: Any) -> Any:
            if "toolUseResult" in record:
                record["toolUseResult"] = shorten(record["toolUseResult"])
            return record

        return transform

    def drop_carried_history(self) -> Callable[[Any], Any]:
        raise SessionfixError("Claude Code compactions carry no history")

    def drop_result_blocks(self, call_ids: frozenset[str]) -> Callable[[Any], Any]:
        """Remove the last `tool_result` block answering each of these calls (the record
        keeps the rest)."""

        def transform(record: Any) -> Any:
            message = record["message"]
            message["content"] = without_repeated_results(message["content"], call_ids)
            return record

        return transform

    def drop_leaked_partial_json(self, blocks: tuple[int, ...]) -> Callable[[Any], Any]:
        raise SessionfixError("Claude assistant content is never edited")

    def replace_media(
        self, media: tuple[InlineMedia, ...], texts: tuple[str, ...]
    ) -> Callable[[Any], Any]:
        """Each block (in the content or a tool result's content, found by its data)
        becomes a text block; a copy in `toolUseResult.file.base64` takes the text too."""
        wanted = {block.digest: text for block, text in zip(media, texts, strict=True)}

        def transform(record: Any) -> Any:
            for holder, position, data in _media_blocks(record["message"]["content"]):
                text = wanted.get(digest(data))
                if text is not None:
                    holder[position] = {"type": "text", "text": text}
            sidecar = record.get("toolUseResult")
            held = sidecar.get("file") if isinstance(sidecar, dict) else None
            copy = held.get("base64") if isinstance(held, dict) else None
            if isinstance(held, dict) and isinstance(copy, str):
                text = wanted.get(digest(copy))
                if text is not None:
                    held["base64"] = text
            return record

        return transform

    def drop_blank_texts(self) -> Callable[[Any], Any]:
        """Remove the text blocks of the content that are empty or whitespace only."""

        def transform(record: Any) -> Any:
            content = record["message"]["content"]
            record["message"]["content"] = [b for b in content if not is_blank_text(b)]
            return record

        return transform

    def drop_content_blocks(self, blocks: tuple[int, ...]) -> Callable[[Any], Any]:
        return without_message_blocks(blocks)

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]:
        """CC's own repair as a record: a user `tool_result` with its placeholder, parented
        to the line that holds the call."""
        record: dict[str, Any] = {"parentUuid": assistant.get("uuid")}
        for name in _COPIED_ENVELOPE:
            if name in assistant:
                record[name] = assistant[name]
        record["type"] = "user"
        record["message"] = {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": call.id,
                    "content": MISSING_RESULT_TEXT,
                    "is_error": True,
                }
            ],
        }
        record["uuid"] = entry_id
        if "timestamp" in assistant:
            record["timestamp"] = assistant["timestamp"]
        for name in _COPIED_TAIL:
            if name in assistant:
                record[name] = assistant[name]
        record["toolUseResult"] = MISSING_RESULT_TEXT
        record["sourceToolAssistantUUID"] = assistant.get("uuid")
        return record


_MEDIA_TYPES: Final = frozenset({"image", "document"})


def _media_blocks(content: Any) -> Iterator[tuple[list[Any], int, str]]:
    """Each inline image or document of a message's content, in tool results' content
    too: the list holding it, its place there and its base64 data."""
    if not isinstance(content, list):
        return
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") in _MEDIA_TYPES:
            source = block.get("source")
            data = source.get("data") if isinstance(source, dict) else None
            if isinstance(data, str):
                yield content, position, data
        elif block.get("type") == "tool_result":
            yield from _media_blocks(block.get("content"))
