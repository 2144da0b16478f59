"""Record changes in pi's field names (and OpenClaw's rows); every transform keeps the
key order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from sessionfix.errors import SessionfixError
from sessionfix.formats.common import without_message_blocks
from sessionfix.formats.content import is_blank_text, shortened
from sessionfix.formats.pi.ids import generate_entry_id
from sessionfix.media import digest
from sessionfix.model.view import InlineMedia, RefRole, SessionView, ToolCall

ROOT_NAME: Final = "root"
"""What a branch summary's `fromId` holds when it branches from the session's start."""

_BACKWARD_ROLES: Final = {
    "label": (("targetId", RefRole.LABEL),),
    "branch_summary": (("fromId", RefRole.FROM),),
    "leaf": (("targetId", RefRole.LEAF), ("appendParentId", RefRole.APPEND_PARENT)),
}


class PiEditor:
    """Record changes in pi's field names; every transform keeps the key order."""

    parent_link = "parentId"

    def holds_more_blocks_than(self, record: Any, going: int) -> bool:
        return False

    def identity(self, record: Any) -> str | None:
        entry_id = record.get("id") if isinstance(record, dict) else None
        return entry_id if isinstance(entry_id, str) and entry_id else None

    def drop_result_blocks(self, call_ids: frozenset[str]) -> Callable[[Any], Any]:
        raise SessionfixError("a pi tool result entry holds one result: drop the entry")

    def drop_carried_history(self) -> Callable[[Any], Any]:
        raise SessionfixError("pi compactions carry no history")

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        header_id = view.header.id if view.header and isinstance(view.header.id, str) else ""
        return generate_entry_id(header_id, anchor_id, salt, view.has_id)

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        if not isinstance(record, dict):
            return []
        found: list[tuple[str, RefRole]] = []
        if isinstance(record.get("parentId"), str):
            found.append(("parentId", RefRole.PARENT))
        kind = record.get("type")
        if kind in ("compaction", "reset"):
            if isinstance(record.get("firstKeptEntryId"), str):
                found.append(("firstKeptEntryId", RefRole.FIRST_KEPT))
            if "firstKeptEntryIndex" in record:
                found.append(("firstKeptEntryIndex", RefRole.FIRST_KEPT_POSITION))
        for name, role in _BACKWARD_ROLES.get(kind, ()) if isinstance(kind, str) else ():
            value = record.get(name)
            if isinstance(value, str) and not (role is RefRole.FROM and value == ROOT_NAME):
                found.append((name, role))
        return found

    def set_field(self, name: str, value: object) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            record[name] = value
            return record

        return transform

    def unlinked(self, role: RefRole) -> object:
        """A branch summary with nothing left to branch from names `"root"`."""
        return ROOT_NAME if role is RefRole.FROM else None

    def get_field(self, record: Any, name: str) -> object:
        return record[name]

    def set_parent(self, parent_id: str | None) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            record["parentId"] = parent_id
            return record

        return transform

    def set_first_kept(self, entry_id: str | None, index: int | None) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            if index is not None and "firstKeptEntryIndex" in record:
                record["firstKeptEntryIndex"] = index
            else:
                record["firstKeptEntryId"] = entry_id
            return record

        return transform

    def replace_result_text(self, text: str) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            record["message"]["content"] = [{"type": "text", "text": text}]
            return record

        return transform

    def shorten_kept_copy(self, head: int, tail: int, note: str) -> Callable[[Any], Any] | None:
        """None: pi keeps no second copy of a tool's output."""
        return None

    def shorten_result_text(self, head: int, tail: int, note: str) -> Callable[[Any], Any]:
        """Each text block of a tool result's content is shortened (`shortened`)."""

        def transform(record: Any) -> Any:
            message = record.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and isinstance(block.get("text"), str):
                    block["text"] = shortened(block["text"], head, tail, note)
            return record

        return transform

    def drop_leaked_partial_json(self, blocks: tuple[int, ...]) -> Callable[[Any], Any]:
        def transform(record: Any) -> Any:
            content = record["message"]["content"]
            for index in blocks:
                content[index].pop("partialJson", None)
            return record

        return transform

    def replace_media(
        self, media: tuple[InlineMedia, ...], texts: tuple[str, ...]
    ) -> Callable[[Any], Any]:
        """Each image block of the message's content (found by its data) becomes a
        text block."""
        wanted = {block.digest: text for block, text in zip(media, texts, strict=True)}

        def transform(record: Any) -> Any:
            content = record["message"]["content"]
            for position, block in enumerate(content):
                if not isinstance(block, dict) or block.get("type") != "image":
                    continue
                data = block.get("data")
                if isinstance(data, str):
                    text = wanted.get(digest(data))
                    if text is not None:
                        content[position] = {"type": "text", "text": text}
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
        record: dict[str, Any] = {"type": "message"}
        if entry_id is not None:
            record["id"] = entry_id
            record["parentId"] = parent_id
        if "timestamp" in assistant:
            record["timestamp"] = assistant["timestamp"]
        message: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call.id,
            "toolName": call.name or "unknown",
            "content": [{"type": "text", "text": text}],
            "isError": True,
        }
        assistant_message = assistant.get("message")
        if isinstance(assistant_message, dict) and "timestamp" in assistant_message:
            message["timestamp"] = assistant_message["timestamp"]
        record["message"] = message
        return record
