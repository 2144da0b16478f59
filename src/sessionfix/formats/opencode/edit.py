"""Changes to opencode rows, in its own field names, on a transcript line (`transcript`):
only the row's `data` is changed, and only the fields a fix owns; the line is written
back to the row as opencode writes it (compact, keys in the order read).

Two changes opencode makes itself, so that a repaired session is what opencode would
have made of it: a tool result superseded by a later write is marked pruned
(`state.time.compacted`, what opencode's own prune sets: the output stays for its UI
and undo, the model is sent opencode's placeholder); a call left `pending`/`running` is
recorded as the interrupted call opencode already sends it as.
"""

from __future__ import annotations

from typing import Any, Final

from sessionfix.errors import SessionfixError
from sessionfix.formats import Transform
from sessionfix.formats.content import shortened
from sessionfix.formats.opencode.context import INTERRUPTED
from sessionfix.model.view import RefRole, SessionView, ToolCall

DATA: Final = "data"
MESSAGE_TIME: Final = "message_time"
"""On a part's line: its message's `time` (`created`, `completed`), for fixes that date
the part by it."""


def _state(record: Any) -> dict[str, Any] | None:
    data = record.get(DATA) if isinstance(record, dict) else None
    state = data.get("state") if isinstance(data, dict) else None
    return state if isinstance(state, dict) else None


class OpencodeEditor:
    """Changes opencode records: rows name each other only by ids no fix changes."""

    parent_link = "parentID"

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
        """A tool part holds one call and its own result."""
        return False

    def pruned_at(self, superseding: Any) -> object | None:
        """When a result superseded by the call `superseding` counts as pruned: the end
        of that call (its `state.time.end`), so that the mark is the same on every run;
        None when the call records no end."""
        state = _state(superseding)
        time = state.get("time") if state is not None else None
        return time.get("end") if isinstance(time, dict) else None

    def mark_pruned(self, at: object) -> Transform:
        """Mark a tool result pruned at `at`, as opencode's own prune does."""

        def transform(record: Any) -> Any:
            state = _state(record)
            if state is None:
                raise SessionfixError("a tool part without a state cannot be marked pruned")
            time = state.get("time")
            if not isinstance(time, dict):
                time = state["time"] = {}
            time["compacted"] = at
            return record

        return transform

    def shorten_kept_copy(self, head: int, tail: int, note: str) -> Transform | None:
        """None: a part's `metadata`, which opencode's UI shows, is left as it is."""
        return None

    def shorten_result_text(self, head: int, tail: int, note: str) -> Transform:
        """A completed tool part's `state.output` is shortened (`shortened`); what its
        `metadata` keeps for opencode's UI stays."""

        def transform(record: Any) -> Any:
            state = _state(record)
            if state is not None and isinstance(state.get("output"), str):
                state["output"] = shortened(state["output"], head, tail, note)
            return record

        return transform

    def interrupted_call(self) -> Transform:
        """Record a call left `pending`/`running` as ended in error, interrupted: the
        result opencode sends for it (spec formats/opencode.md §8.2)."""

        def transform(record: Any) -> Any:
            state = _state(record)
            if state is None:
                raise SessionfixError("a tool part without a state cannot be marked interrupted")
            message_time = record.get(MESSAGE_TIME)
            message_time = message_time if isinstance(message_time, dict) else {}
            time = state.get("time")
            start = time.get("start") if isinstance(time, dict) else None
            if start is None:
                start = message_time.get("created")
            if start is None:
                raise SessionfixError("the interrupted call has no start time to record")
            end = message_time.get("completed")
            if end is None:
                end = start
            ended: dict[str, Any] = {
                "status": "error",
                "input": state.get("input", {}),
                "error": INTERRUPTED,
            }
            if "metadata" in state:
                ended["metadata"] = state["metadata"]
            ended["time"] = {"start": start, "end": end}
            record[DATA]["state"] = ended
            return record

        return transform

    def set_parent(self, parent_id: str | None) -> Transform:
        """Name the message a reply (a summary) answers: its `parentID`."""

        def transform(record: Any) -> Any:
            if parent_id is None:
                raise SessionfixError("a reply's parentID is never removed")
            record[DATA]["parentID"] = parent_id
            return record

        return transform

    def set_first_kept(self, entry_id: str | None, index: int | None) -> Transform:
        """Name the first message a compaction keeps (its part's `tail_start_id`); None
        keeps none (the field goes)."""

        def transform(record: Any) -> Any:
            data = record[DATA]
            if entry_id is None:
                data.pop("tail_start_id", None)
            else:
                data["tail_start_id"] = entry_id
            return record

        return transform

    def set_sort_time(self, ms: int | float) -> Transform:
        """Stamp a message with the time opencode orders it by: its `time_created` column
        and its info's `time.created`, which opencode keeps equal."""

        def transform(record: Any) -> Any:
            record["time_created"] = ms
            time = record[DATA].get("time")
            if not isinstance(time, dict):
                time = record[DATA]["time"] = {}
            time["created"] = ms
            return record

        return transform

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise SessionfixError("opencode rows have no such field to rewrite")

    set_field = replace_result_text = _refuse
    drop_leaked_partial_json = drop_result_blocks = drop_carried_history = _refuse
    drop_content_blocks = _refuse

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        raise SessionfixError("sessionfix inserts no rows into an opencode session")

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]:
        raise SessionfixError("sessionfix inserts no rows into an opencode session")
