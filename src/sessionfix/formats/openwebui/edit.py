"""Changes to open-webui messages, in its own field names, on a transcript line: a
message's parent link is changed in the document's copy and in its row alike (open-webui
writes both in one transaction, spec formats/open-webui.md §4)."""

from __future__ import annotations

from typing import Any

from sessionfix.errors import SessionfixError
from sessionfix.formats import Transform
from sessionfix.model.view import RefRole, SessionView, ToolCall

COPIES = ("data", "row")
"""Where a message line holds the message: the document's copy and the row's."""


class WebuiEditor:
    """Changes open-webui messages: they name each other only by ids no fix changes."""

    parent_link = "parentId"

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
        return True

    def set_parent(self, parent_id: str | None) -> Transform:
        """Name the message's parent in each copy of it the line holds."""

        def transform(record: Any) -> Any:
            for copy in COPIES:
                message = record.get(copy)
                if isinstance(message, dict):
                    message["parentId"] = parent_id
            return record

        return transform

    def set_children(self, children: tuple[str, ...]) -> Transform:
        """Store a message's `childrenIds` (the document's copy: rows keep none)."""

        def transform(record: Any) -> Any:
            message = record.get("data")
            if not isinstance(message, dict):
                raise SessionfixError("a message only a row holds has no childrenIds to store")
            message["childrenIds"] = list(children)
            return record

        return transform

    def set_leaf_pointer(self, entry_id: str) -> Transform:
        """Store the chat's `currentId` (and `current_message_id`, which open-webui keeps
        equal to it) on the chat's own line."""

        def transform(record: Any) -> Any:
            facts = record.get("data")
            if not isinstance(facts, dict):
                raise SessionfixError("the chat's line holds no facts to change")
            facts["current_id"] = entry_id
            facts["current_message_id"] = entry_id
            return record

        return transform

    def drop_covered_count(self) -> Transform:
        """Remove the compression filter's row from the chat's line (the writer deletes
        it: the filter summarises anew on the next turn)."""

        def transform(record: Any) -> Any:
            facts = record.get("data")
            if isinstance(facts, dict):
                facts.pop("summary_count", None)
                facts.pop("summary_updated", None)
            return record

        return transform

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise SessionfixError("open-webui messages have no such field to rewrite")

    set_field = set_first_kept = replace_result_text = _refuse
    drop_leaked_partial_json = drop_result_blocks = drop_carried_history = _refuse
    drop_content_blocks = _refuse

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        raise SessionfixError("sessionfix adds no message to an open-webui chat")

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]:
        raise SessionfixError("sessionfix adds no message to an open-webui chat")
