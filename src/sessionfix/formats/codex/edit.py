"""Record changes in Codex's field names. Rewritten lines are serialised as Codex's
serde_json writes them: compact, keys in the order read, number lexemes kept."""

from __future__ import annotations

from typing import Any, Final

from sessionfix.errors import SessionfixError
from sessionfix.formats import Transform
from sessionfix.formats.content import shortened
from sessionfix.model.view import RefRole, SessionView, ToolCall

CARRIED_HISTORY: Final = "replacement_history"
CARRIED_HISTORY_METADATA: Final = "replacement_history_metadata"
"""Parallel to the carried history, item for item: Codex rejects one without the other."""


class CodexEditor:
    """Changes Codex records: a rollout has no record-to-record references, and only a
    superseded compaction's carried history is ever rewritten."""

    parent_link = "line order"

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        return []

    def unlinked(self, role: RefRole) -> object:
        return None

    def get_field(self, record: Any, name: str) -> object:
        return None

    def identity(self, record: Any) -> str | None:
        return None

    def holds_more_blocks_than(self, record: Any, going: int) -> bool:
        """An output record answers exactly one call."""
        return False

    def drop_carried_history(self) -> Transform:
        def transform(record: Any) -> Any:
            payload = record.get("payload") if isinstance(record, dict) else None
            if isinstance(payload, dict):
                payload.pop(CARRIED_HISTORY, None)
                payload.pop(CARRIED_HISTORY_METADATA, None)
            return record

        return transform

    def shorten_kept_copy(self, head: int, tail: int, note: str) -> Transform | None:
        """None: a rollout keeps no second copy of an output."""
        return None

    def shorten_result_text(self, head: int, tail: int, note: str) -> Transform:
        """A call output's `output` text, or each text item of an output given as
        content items, is shortened (`shortened`)."""

        def transform(record: Any) -> Any:
            payload = record.get("payload") if isinstance(record, dict) else None
            if not isinstance(payload, dict):
                return record
            output = payload.get("output")
            if isinstance(output, str):
                payload["output"] = shortened(output, head, tail, note)
            for item in output if isinstance(output, list) else ():
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    item["text"] = shortened(item["text"], head, tail, note)
            return record

        return transform

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise SessionfixError("Codex records have no such field to rewrite")

    set_field = set_parent = set_first_kept = replace_result_text = _refuse
    drop_leaked_partial_json = drop_result_blocks = drop_content_blocks = _refuse

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        raise SessionfixError("sessionfix inserts no records into Codex rollouts")

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]:
        raise SessionfixError("sessionfix inserts no records into Codex rollouts")
