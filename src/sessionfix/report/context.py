"""`sessionfix context` output: a table with bars for people, JSON for programs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import orjson

from sessionfix.context import TOKEN_METHOD, Part, SessionContext
from sessionfix.escapes import escape
from sessionfix.formats import Format, agent_of
from sessionfix.units import human_bytes

BAR_WIDTH: Final = 24
_EIGHTHS: Final = " ▏▎▍▌▋▊▉"


def bar(share: float, width: int = BAR_WIDTH) -> str:
    """`share` (0 to 1) of `width` cells, in eighths of a cell."""
    eighths = round(max(0.0, min(1.0, share)) * width * 8)
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest] if rest else "")


def _counted(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def render_text(context: SessionContext, before: SessionContext | None = None) -> str:
    """One session's report; with `before`, `context` is after repair and each figure
    shows what it was."""
    agent = agent_of(Format(context.format))
    title = f"{escape(context.filename)}  ({context.format}, {human_bytes(context.file_bytes)})"
    limits = [] if context.budget is None else [f"{context.budget:,} tokens"]
    if context.max_size is not None:
        limits.append(human_bytes(context.max_size))
    if limits:
        title += f"  after slim to {' and '.join(limits)}"
    elif context.repaired:
        title += "  after repair"
    if before is not None:
        title += f" (now {human_bytes(before.file_bytes)})"
    lines = [title]
    if agent is None:
        return "\n".join([*lines, "  no agent is known to load this file"]) + "\n"
    if context.refused is not None:
        lines.append(f"  {escape(context.refused)}: it loads nothing")
    else:
        was = "" if before is None else f" (now {before.messages:,})"
        tokens = "" if before is None else f" (now {before.tokens:,})"
        lines.append(
            f"  {agent} loads {_counted(context.messages, 'message')}{was}, "
            f"about {context.tokens:,} tokens{tokens}"
        )
    if context.by_sent:
        lines.append(
            "    " + " · ".join(f"{n:,} {sent.value}" for sent, n in context.by_sent.items())
        )
    if context.damaged_lines:
        lines.append(
            f"  {_counted(context.damaged_lines, 'damaged line')} the agent may not read "
            "(sessionfix check tells which)"
        )
    lines.append("")
    rows: list[tuple[str, int, str]] = []
    whole = context.file_bytes
    for part in Part:
        size = context.parts.get(part, 0)
        if size or part is Part.SENT:
            rows.append((part.value, size, bar(_share(size, whole))))
        if part is Part.SENT:
            if context.stale_reads:
                label = f"  of which {_counted(context.stale_reads, 'stale read')}"
                rows.append((label, context.stale_read_bytes, ""))
            if context.images:
                label = f"  of which {_counted(context.images, 'inline image')}"
                rows.append((label, context.image_bytes, ""))
    label_width = max(len(label) for label, _, _ in rows)
    for label, size, drawn in rows:
        share = f"{100 * _share(size, whole):5.1f}%"
        row = f"  {label:<{label_width}}  {human_bytes(size):>10}  {share}  {drawn}"
        lines.append(row.rstrip())
    return "\n".join(lines) + "\n"


def render_all_text(
    contexts: Sequence[SessionContext], befores: Sequence[SessionContext | None]
) -> bytes:
    blocks = [render_text(c, b) for c, b in zip(contexts, befores, strict=True)]
    footer = f"\nTokens are estimated: {TOKEN_METHOD}.\n" if contexts else ""
    return ("\n".join(blocks) + footer).encode("utf-8", "replace")


def render_json(
    contexts: Sequence[SessionContext], befores: Sequence[SessionContext | None]
) -> bytes:
    """One object per session; with `--after-repair`, `now` beside it."""
    entries = []
    for context, before in zip(contexts, befores, strict=True):
        entry = context.as_json()
        if before is not None:
            entry["now"] = before.as_json()
        entries.append(entry)
    return orjson.dumps(entries, option=orjson.OPT_INDENT_2) + b"\n"
