"""Entry changes in CodeWhale's field names (an entry line of the transcript: the entry
as stored, tagged); every transform keeps the key order. What a change to an entry's
content means for the document (a sibling branch, never an edited entry) is the
writer's (`write`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from sessionfix.errors import SessionfixError
from sessionfix.formats.codewhale.pairs import crashed_result
from sessionfix.formats.codewhale.transcript import DOCUMENT, ENTRY, MESSAGE, TAG
from sessionfix.formats.common import (
    generate_uuid,
    without_message_blocks,
    without_repeated_results,
)
from sessionfix.model.view import RefRole, SessionView, ToolCall

Transform = Callable[[Any], Any]
PARENT: Final = "parent_id"
LEAF: Final = "leaf_id"
"""The document line's copy of the journal's leaf pointer."""


def _message(record: Any) -> dict[str, Any]:
    message = record.get("message") if isinstance(record, dict) else None
    if not isinstance(message, dict):
        raise SessionfixError("a CodeWhale entry of this kind holds no content blocks")
    return message


class CodeWhaleEditor:
    """Changes CodeWhale journal entries (`kind: message` entries hold `message.content`)."""

    parent_link = PARENT

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        if not isinstance(record, dict):
            return []
        if record.get(TAG) == DOCUMENT:
            return [(LEAF, RefRole.LEAF)] if isinstance(record.get(LEAF), str) else []
        return [(PARENT, RefRole.PARENT)] if isinstance(record.get(PARENT), str) else []

    def get_field(self, record: Any, name: str) -> object:
        return record.get(name) if isinstance(record, dict) else None

    def set_field(self, name: str, value: object) -> Transform:
        def transform(record: Any) -> Any:
            record[name] = value
            return record

        return transform

    def set_parent(self, parent_id: str | None) -> Transform:
        """A root omits `parent_id`; a parent is put where the entry holds it, else after its id."""

        def transform(record: Any) -> Any:
            if parent_id is None:
                record.pop(PARENT, None)
                return record
            if PARENT in record:
                record[PARENT] = parent_id
                return record
            items = list(record.items())
            at = next((n + 1 for n, (key, _) in enumerate(items) if key == "id"), len(items))
            items.insert(at, (PARENT, parent_id))
            record.clear()
            record.update(items)
            return record

        return transform

    def unlinked(self, role: RefRole) -> object:
        return None

    def set_first_kept(self, entry_id: str | None, index: int | None) -> Transform:
        raise SessionfixError("CodeWhale compactions keep no first-kept reference")

    def replace_result_text(self, text: str) -> Transform:
        def transform(record: Any) -> Any:
            for block in _message(record).get("content", []):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    block["content"] = text
            return record

        return transform

    def drop_leaked_partial_json(self, blocks: tuple[int, ...]) -> Transform:
        raise SessionfixError("CodeWhale tool calls carry no streaming state")

    def drop_content_blocks(self, blocks: tuple[int, ...]) -> Transform:
        return without_message_blocks(blocks)

    def holds_more_blocks_than(self, record: Any, going: int) -> bool:
        """Whether the message holds more than the `going` blocks fixes drop from it
        (the first result of a repeat in one message stays). A message a repair leaves
        without blocks goes when the document is written, as in CodeWhale's own repair."""
        content = _message(record).get("content") if isinstance(record, dict) else None
        return isinstance(content, list) and len(content) > going

    def drop_result_blocks(self, call_ids: frozenset[str]) -> Transform:
        """Remove the last `tool_result` block answering each of these calls."""

        def transform(record: Any) -> Any:
            message = _message(record)
            message["content"] = without_repeated_results(message.get("content", []), call_ids)
            return record

        return transform

    def drop_carried_history(self) -> Transform:
        raise SessionfixError("CodeWhale compactions carry no history")

    def identity(self, record: Any) -> str | None:
        entry_id = record.get("id") if isinstance(record, dict) else None
        return entry_id if isinstance(entry_id, str) and entry_id else None

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        return generate_uuid("", anchor_id, salt, view.has_id)

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]:
        """CodeWhale's own repair as an entry: a user message with its crashed result,
        below the call's entry, dated as it is (never the wall clock); in a document without
        a journal, the message alone."""
        message = {"role": "user", "content": [crashed_result(call.id)]}
        if assistant.get(TAG) == MESSAGE:
            return {TAG: MESSAGE, MESSAGE: message}
        record: dict[str, Any] = {TAG: ENTRY, "id": entry_id}
        if parent_id is not None:
            record[PARENT] = parent_id
        record["kind"] = "message"
        record["message"] = message
        if "created_at" in assistant:
            record["created_at"] = assistant["created_at"]
        if "spawn_depth" in assistant:
            record["spawn_depth"] = assistant["spawn_depth"]
        return record
