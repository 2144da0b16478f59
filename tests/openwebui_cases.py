"""open-webui chats as they are found in the field (spec formats/open-webui.md §3, §6),
each built on the clean chat u1 → a1 → u2 → a2 (`openwebui_chats.PLAIN`)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .openwebui_chats import add_chat, add_summary, message, plain

Build = Callable[[Path, str], None]


def _clean(db: Path, chat: str) -> None:
    add_chat(db, chat, plain(), "a2")


def _clean_rows(db: Path, chat: str) -> None:
    add_chat(db, chat, plain(), "a2", rows=True)


def _current_dangling(db: Path, chat: str) -> None:
    add_chat(db, chat, plain(), "gone", rows=True)


def _current_inner(db: Path, chat: str) -> None:
    add_chat(db, chat, plain(), "u2", rows=True)


def _current_column_differs(db: Path, chat: str) -> None:
    """`current_message_id` left on an older message than the document's `currentId`."""
    add_chat(db, chat, plain(), "a2", rows=True, column="u2")


def _children_missing(db: Path, chat: str) -> None:
    found = plain()
    found["a1"]["childrenIds"] = []
    found["u1"]["childrenIds"].append("u2")
    add_chat(db, chat, found, "a2", rows=True)


def _dangling_parent(db: Path, chat: str) -> None:
    found = plain()
    found["u2"]["parentId"] = "gone"
    add_chat(db, chat, found, "a2")


def _dangling_adoptable(db: Path, chat: str) -> None:
    """#29216: the reply's parent link lost, its parent still listing it as a child."""
    found = plain()
    found["a2"]["parentId"] = "lost"
    add_chat(db, chat, found, "a2", rows=True)


def _dangling_unlisted(db: Path, chat: str) -> None:
    """A lost parent no message lists as its child: nothing tells where it belongs."""
    found = plain()
    found["u2"]["parentId"] = "gone"
    found["a1"]["childrenIds"] = []
    add_chat(db, chat, found, "a2", rows=True)


def _cycle(db: Path, chat: str) -> None:
    found = plain()
    found["u1"]["parentId"] = "a2"
    add_chat(db, chat, found, "a2")


def _roleless(db: Path, chat: str) -> None:
    found = plain()
    del found["a1"]["role"]
    add_chat(db, chat, found, "a2")


def _roleless_off_branch(db: Path, chat: str) -> None:
    """A regenerated reply saved without a role, on the branch the chat left."""
    found = plain()
    found["b2"] = message("b2", None, "u2", at=5, content="lost")
    found["u2"]["childrenIds"].insert(0, "b2")
    add_chat(db, chat, found, "a2", rows=False)


def _legacy_nan(db: Path, chat: str) -> None:
    """A `NaN` an older open-webui (Python's `json`) wrote in a reply's usage, which
    orjson refuses and open-webui's codec reads with Python's `json`; a child list lost."""
    found = plain()
    found["a2"]["usage"] = {"response_token/s": float("nan")}
    found["a1"]["childrenIds"] = []
    add_chat(db, chat, found, "a2", rows=True)


def _rows_differ(db: Path, chat: str) -> None:
    found = plain()
    rows = plain()
    rows["a2"]["content"] = "ok (edited)"
    add_chat(db, chat, found, "a2", rows=rows)


def _rows_missing(db: Path, chat: str) -> None:
    found = plain()
    rows = plain()
    del rows["a1"]
    add_chat(db, chat, found, "a2", rows=rows)


def _regenerated(db: Path, chat: str) -> None:
    found = plain()
    found["b2"] = message("b2", "assistant", "u2", at=5, content="ok again")
    found["u2"]["childrenIds"].append("b2")
    add_chat(db, chat, found, "a2", rows=True)


def _context_summary(db: Path, chat: str) -> None:
    found = plain()
    found["u2"]["contextSummary"] = "they said hi"
    add_chat(db, chat, found, "a2", rows=True)


def _tool_output(db: Path, chat: str) -> None:
    found = plain()
    found["a2"]["output"] = [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "ls",
            "arguments": "{}",
            "id": "f1",
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "a.txt"}],
        },
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "ls",
            "arguments": "{}",
            "id": "f2",
            "status": "completed",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok"}],
        },
    ]
    add_chat(db, chat, found, "a2", rows=True)


def _tool_images(db: Path, chat: str) -> None:
    """Two calls answered in one go, one with an image; a call still running; a result
    whose call is gone; a code interpreter run; a reasoning item."""
    found = plain()
    found["a2"]["output"] = [
        {"type": "reasoning", "summary": [{"type": "output_text", "text": "thinking"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "looking"}],
        },
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "shot",
            "arguments": {"x": 1},
            "status": "completed",
        },
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "ls",
            "arguments": "{}",
            "status": "failed",
        },
        {
            "type": "function_call",
            "call_id": "c3",
            "name": "ls",
            "arguments": "{}",
            "status": "in_progress",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "shot taken"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            ],
        },
        {
            "type": "function_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "error"}],
        },
        {
            "type": "function_call_output",
            "call_id": "c9",
            "output": [{"type": "input_text", "text": "orphan"}],
        },
        {"type": "open_webui:code_interpreter", "code": "print(1)", "output": {"stdout": "1"}},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "done"}],
        },
    ]
    add_chat(db, chat, found, "a2", rows=True)


def _tool_paired(db: Path, chat: str) -> None:
    found = plain()
    found["a1"]["output"] = [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "ls",
            "arguments": "{}",
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [{"type": "input_text", "text": "a.txt"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        },
    ]
    add_chat(db, chat, found, "a2", rows=True)


def _tool_unanswered(db: Path, chat: str) -> None:
    """A call the turn finished without a result, before the next prompt (Fu-Jie#56)."""
    found = plain()
    found["a1"]["output"] = [
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "ls",
            "arguments": "{}",
            "status": "completed",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}],
        },
    ]
    add_chat(db, chat, found, "a2", rows=True)


def _summary_past_branch(db: Path, chat: str) -> None:
    add_chat(db, chat, plain(), "a2", rows=True)
    add_summary(db, chat, 9, "2026-05-28 20:30:00")


def _summary_fits(db: Path, chat: str) -> None:
    add_chat(db, chat, plain(), "a2", rows=True)
    add_summary(db, chat, 2, "2026-05-28 20:30:00")


def _summary_splits_tools(db: Path, chat: str) -> None:
    """The filter's count ends between a1's tool call and its result (Fu-Jie#68)."""
    _tool_paired(db, chat)
    add_summary(db, chat, 2, "2026-05-28 20:30:00")


def _summary_predates(db: Path, chat: str) -> None:
    add_chat(db, chat, plain(), "a2", rows=True)
    add_summary(db, chat, 3, "2026-05-28 20:26:41")


CASES: dict[str, Build] = {
    "clean": _clean,
    "clean-rows": _clean_rows,
    "current-dangling": _current_dangling,
    "current-inner": _current_inner,
    "current-column-differs": _current_column_differs,
    "children-missing": _children_missing,
    "dangling-parent": _dangling_parent,
    "dangling-adoptable": _dangling_adoptable,
    "dangling-unlisted": _dangling_unlisted,
    "cycle": _cycle,
    "roleless": _roleless,
    "roleless-off-branch": _roleless_off_branch,
    "legacy-nan": _legacy_nan,
    "rows-differ": _rows_differ,
    "rows-missing": _rows_missing,
    "regenerated": _regenerated,
    "context-summary": _context_summary,
    "tool-output": _tool_output,
    "tool-images": _tool_images,
    "tool-paired": _tool_paired,
    "tool-unanswered": _tool_unanswered,
    "summary-past-branch": _summary_past_branch,
    "summary-predates": _summary_predates,
    "summary-fits": _summary_fits,
    "summary-splits-tools": _summary_splits_tools,
}
"""Chat id → how it is built."""


def build(db: Path) -> Path:
    for chat, how in CASES.items():
        how(db, chat)
    return db


def random_chats(seed: int, count: int) -> dict[str, tuple[dict[str, Any], str | None, bool]]:
    """`count` chat trees of up to five messages damaged at random (parents naming
    anything, child lists listing anything, a current message anywhere, a role
    missing, rows or none), the same for a seed: chat id → (messages, currentId, rows)."""
    generator = random.Random(seed)
    ids = ("u1", "a1", "u2", "a2", "b2")
    found = {}
    for number in range(count):
        size = generator.randint(1, len(ids))
        names = [*ids[:size], "gone"]
        messages: dict[str, Any] = {}
        for at, key in enumerate(ids[:size]):
            parent = generator.choice([None, *names]) if at else None
            if at and generator.random() < 0.6:
                parent = ids[at - 1]
            role = None if at and generator.random() < 0.15 else ("user", "assistant")[at % 2]
            children = [generator.choice(names) for _ in range(generator.randint(0, 2))]
            messages[key] = message(key, role, parent, children, at=at + 1, content=f"text {key}")
        current = generator.choice([None, *names])
        found[f"random-{seed}-{number}"] = (messages, current, generator.random() < 0.5)
    return found
