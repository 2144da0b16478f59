"""What CodeWhale 0.9.10 sends the model from a saved session (spec formats/codewhale.md
§3): the journal's root-to-leaf walk (else the document's `messages`), with its resume
repair of tool-call pairs applied, an interrupted turn's output behind its prefix, and a
long result repeated as a back-reference, a mutation tool's confirmation never.

`tests/codewhale_loader.py` holds this to a reimplementation of CodeWhale's load path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import msgspec
import orjson

from sessionfix.formats.codewhale.document import MUTATION_TOOLS
from sessionfix.formats.codewhale.pairs import repair_pairs
from sessionfix.formats.codewhale.transcript import ENTRY, MESSAGE
from sessionfix.model.loaded import MADE_BY_LOADER, Loaded, LoadRefused, Sent
from sessionfix.model.view import Kind, SessionView
from sessionfix.read.reader import LineReport, RecordSource

INTERRUPTED_PREFIX: Final = (
    "[The following assistant output was interrupted before completion and may be "
    "incomplete or wrong]"
)
DEDUP_CHARACTERS: Final = 1024
_SUMMARY_KINDS: Final = frozenset({"compaction", "branch_summary"})


class _Line(msgspec.Struct, gc=False):
    codewhale: str
    kind: Any = None
    message: Any = None
    text: Any = None
    summary: Any = None
    content: Any = None


_LINE: Final = msgspec.json.Decoder(_Line)


def projection(line: _Line) -> dict[str, Any] | None:
    """The message an entry or message line stands for (`document.projected`)."""
    from sessionfix.formats.codewhale.document import projected

    if line.codewhale == MESSAGE:
        return line.message if isinstance(line.message, dict) else None
    fields = {"kind": line.kind, "message": line.message, "text": line.text}
    fields.update(summary=line.summary, content=line.content)
    return projected({k: v for k, v in fields.items() if v is not None})


def _sent(message: dict[str, Any], kind: object) -> Sent:
    role = message.get("role")
    if kind in _SUMMARY_KINDS:
        return Sent.SUMMARY
    if role in ("assistant", "assistant_interrupted"):
        return Sent.ASSISTANT
    if role == "system":
        return Sent.SYSTEM
    content = message.get("content")
    if (
        role == "user"
        and isinstance(content, list)
        and content
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    ):
        return Sent.TOOL_RESULT
    return Sent.USER if role == "user" else Sent.OTHER


class _Wire:
    """CodeWhale's wire shaping of results (`client/chat.rs`): a result of 1,024
    characters or more identical to an earlier one is sent as a back-reference to it,
    except a mutation tool's confirmation (PR #1741: the model would think the write
    never happened)."""

    def __init__(self) -> None:
        self.tools: dict[str, str] = {}
        self.first: dict[str, str] = {}
        """Result text → the call whose result first held it."""

    def size(self, message: dict[str, Any]) -> int:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        shaped = []
        for block in blocks:
            if not isinstance(block, dict):
                shaped.append(block)
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self.tools[block["id"]] = str(block.get("name"))
            if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                block = self._result(block)
            shaped.append(block)
        size = len(orjson.dumps({**message, "content": shaped} if blocks else message))
        if message.get("role") == "assistant_interrupted":
            size += len(INTERRUPTED_PREFIX.encode()) + 1
        return size

    def _result(self, block: dict[str, Any]) -> dict[str, Any]:
        text, call = block["content"], str(block.get("tool_use_id"))
        if len(text) < DEDUP_CHARACTERS or self.tools.get(call) in MUTATION_TOOLS:
            return block
        first = self.first.setdefault(text, call)
        if first == call:
            return block
        return {**block, "content": f'<TOOL_RESULT_REF tool_use_id="{first}">'}


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The messages CodeWhale's resume sends, in order; `LoadRefused` where it cannot
    load the document (it does not parse, or its types refuse it)."""
    if view.unread is not None:
        return
    if lines.findings:
        raise LoadRefused("CodeWhale cannot parse the document")
    header = view.header
    if header is not None and header.problems:
        raise LoadRefused(f"CodeWhale refuses the document ({header.problems[0]})")
    records: list[int] = []
    messages: list[dict[str, Any]] = []
    kinds: list[object] = []
    chosen = list(view.active_path) if view.tree else []
    if not chosen:
        chosen = [
            index
            for index in range(view.first_entry, len(view))
            if not view.tree or view.kinds[index] == Kind.METADATA
        ]
    for index in chosen:
        try:
            line = _LINE.decode(source.read(view.offsets[index], view.sizes[index]))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if line.codewhale not in (ENTRY, MESSAGE):
            continue
        message = projection(line)
        if message is None:
            continue
        records.append(index)
        messages.append(message)
        kinds.append(line.kind)
    repaired = repair_pairs(messages)
    wire = _Wire()
    for message, origin in zip(repaired.messages, repaired.kept_from, strict=True):
        if origin < 0:
            yield Loaded(MADE_BY_LOADER, _sent(message, None), wire.size(message))
        else:
            yield Loaded(records[origin], _sent(message, kinds[origin]), wire.size(message))
