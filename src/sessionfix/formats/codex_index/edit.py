"""Changes to a line of Codex's thread index (`transcript`): only a thread's row, made or
mended from its rollout (`transcript.mended`); a rollout is never changed."""

from __future__ import annotations

from typing import Any

from sessionfix.errors import SessionfixError
from sessionfix.formats import Transform
from sessionfix.formats.codex_index.transcript import mended
from sessionfix.model.view import RefRole, SessionView, ToolCall


class IndexEditor:
    """Changes thread rows: a row names no other row."""

    parent_link = "none"

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        return []

    def unlinked(self, role: RefRole) -> object:
        return None

    def get_field(self, record: Any, name: str) -> object:
        return None

    def identity(self, record: Any) -> str | None:
        identity = record.get("id") if isinstance(record, dict) else None
        return identity if isinstance(identity, str) else None

    def holds_more_blocks_than(self, record: Any, going: int) -> bool:
        return False

    def rebuilt_entry(self) -> Transform:
        return mended

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise SessionfixError("a thread index row has no such field to rewrite")

    set_field = set_parent = set_first_kept = replace_result_text = _refuse
    drop_leaked_partial_json = drop_result_blocks = drop_carried_history = _refuse

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        raise SessionfixError("sessionfix inserts no line into a thread index's transcript")

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]:
        raise SessionfixError("a thread index holds no tool calls")
