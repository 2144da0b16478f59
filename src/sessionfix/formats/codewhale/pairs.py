"""CodeWhale's own repair of tool-call pairs on a loaded message list
(`tool_history_repair::repair_tool_call_pairs`, spec formats/codewhale.md §3 step 6):
what its resume sends instead of the stored messages, and what a repair must leave it
nothing to do for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from msgspec import Struct, field

from sessionfix.formats.codewhale.document import CALLER_ROLES

CRASHED_RESULT: Final = (
    "Tool call interrupted by process exit; terminal status: crashed_and_repaired."
)
"""The result CodeWhale gives a call left without one."""


class PairRepair(Struct):
    """The messages after the repair, and what it changed."""

    messages: list[Any]
    crashed: int = 0
    duplicates: int = 0
    orphans: int = 0
    kept_from: list[int] = field(default_factory=list)
    """For each message of `messages`, the place of the message it comes from (-1: made)."""

    @property
    def changed(self) -> bool:
        return bool(self.crashed or self.duplicates or self.orphans)

    @property
    def receipt(self) -> str:
        return (
            f"[tool_history_repair] Repaired {self.crashed} crashed tool call(s); "
            f"quarantined {self.duplicates} duplicate and {self.orphans} orphan terminal "
            "result(s)."
        )


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _of_type(block: Any, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind


def crashed_result(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": CRASHED_RESULT,
        "is_error": True,
    }


def repair_pairs(messages: Sequence[Any], *, receipt: bool = True) -> PairRepair:
    """CodeWhale's repair: in each group (a caller message with `tool_use` blocks and the
    messages after it up to the next caller), the first result of a pending call in a
    later message is kept; repeats and results naming no pending call go, and a message
    left with nothing goes; a call left without a result gets `CRASHED_RESULT` in a new
    user message directly after its call message; with `receipt`, a notice of what
    changed is appended."""
    out = PairRepair([])
    pending: dict[str, bool] = {}
    """The current group's calls: answered yet."""
    unanswered_at: int | None = None
    """Where in `out.messages` to put the current group's made results."""

    def settle() -> None:
        missing = [call for call, answered in pending.items() if not answered]
        if missing and unanswered_at is not None:
            made = {"role": "user", "content": [crashed_result(call) for call in missing]}
            out.messages.insert(unanswered_at, made)
            out.kept_from.insert(unanswered_at, -1)
            out.crashed += len(missing)

    for at, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        blocks = _blocks(message)
        if role in CALLER_ROLES:
            settle()
            pending = {
                block["id"]: False
                for block in blocks
                if _of_type(block, "tool_use") and isinstance(block.get("id"), str)
            }
            unanswered_at = len(out.messages) + 1 if pending else None
            kept = [block for block in blocks if not _of_type(block, "tool_result")]
            out.orphans += len(blocks) - len(kept)
        else:
            kept = []
            for block in blocks:
                if not _of_type(block, "tool_result"):
                    kept.append(block)
                    continue
                call = block.get("tool_use_id")
                if call in pending and not pending[call]:
                    pending[call] = True
                    kept.append(block)
                elif call in pending:
                    out.duplicates += 1
                else:
                    out.orphans += 1
        if len(kept) == len(blocks):
            out.messages.append(message)
            out.kept_from.append(at)
        elif kept:
            out.messages.append({**message, "content": kept})
            out.kept_from.append(at)
    settle()
    if receipt and out.changed:
        out.messages.append(
            {"role": "assistant", "content": [{"type": "text", "text": out.receipt}]}
        )
        out.kept_from.append(-1)
    return out
