"""SF301 stale-file-read: a file read whose file was later fully rewritten."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sessionfix.analysis import ToolGroup, tool_groups
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.paths import matches_glob
from sessionfix.rules.base import PI_FORMATS, Rule, RuleContext, safe
from sessionfix.view import FileAction, Kind, Role

MARKER = "[sessionfix:"
PLACEHOLDER = (
    "[sessionfix: stale read of {path} removed - file was fully rewritten later "
    "(call {call_id}); re-read it if needed]"
)


@dataclass(frozen=True, slots=True)
class _Write:
    position: int
    """Path position of the assistant entry that issued the write."""
    call_id: str


@dataclass(frozen=True, slots=True)
class StaleRead:
    result: int
    path: str
    """The read call's path argument, as written."""
    write_call_id: str
    write_row: int


def stale_reads(ctx: RuleContext) -> list[StaleRead]:
    """Read results superseded by a later successful full write of the same path (§5.2)."""
    view = ctx.view
    groups = ctx.shared(tool_groups).groups
    writes: dict[str, list[_Write]] = {}
    for group in groups:
        for position, call in enumerate(group.calls):
            if call.action is not FileAction.FULL_WRITE or call.normalized_path is None:
                continue
            result = group.results.get(position)
            facts = view.result(result) if result is not None else None
            if facts is None or not facts.succeeded:
                continue
            writes.setdefault(call.normalized_path, []).append(
                _Write(view.path_positions[group.assistant], call.id)
            )
    if not writes:
        return []
    protected_from = _protected_position(ctx)
    found: list[StaleRead] = []
    for group in groups:
        for position in range(len(group.calls)):
            stale = _check_read(ctx, group, position, writes, protected_from)
            if stale is not None:
                found.append(stale)
    return found


def _check_read(
    ctx: RuleContext,
    group: ToolGroup,
    position: int,
    writes: dict[str, list[_Write]],
    protected_from: int,
) -> StaleRead | None:
    view = ctx.view
    call = group.calls[position]
    if call.action is not FileAction.READ or call.normalized_path is None or call.path is None:
        return None
    result = group.results.get(position)
    if result is None:
        return None
    facts = view.result(result)
    if facts is None or facts.errored or not facts.text_only:
        return None
    read_position = view.path_positions[result]
    if read_position >= protected_from:
        return None
    if any(matches_glob(call.normalized_path, glob) for glob in ctx.settings.protect):
        return None
    later = next(
        (w for w in writes.get(call.normalized_path, ()) if w.position > read_position), None
    )
    if later is None:
        return None
    placeholder = PLACEHOLDER.format(path=call.path, call_id=later.call_id)
    text = _result_text(ctx, result)
    if text is None or text.startswith(MARKER):
        return None
    if len(text.encode("utf-8", "surrogatepass")) <= len(placeholder.encode("utf-8")):
        return None
    return StaleRead(result, call.path, later.call_id, view.rows[view.active_path[later.position]])


def _result_text(ctx: RuleContext, index: int) -> str | None:
    try:
        content = ctx.load_record(index)["message"]["content"]
    except (ValueError, KeyError, TypeError):
        return None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    return "".join(
        block.get("text", "")
        for block in content
        if isinstance(block, dict) and isinstance(block.get("text", ""), str)
    )


def _protected_position(ctx: RuleContext) -> int:
    """Path position from which reads are protected by --protect-last-turns."""
    turns = ctx.settings.protect_last_turns
    view = ctx.view
    if turns <= 0:
        return len(view.active_path)
    seen = 0
    for position in range(len(view.active_path) - 1, -1, -1):
        index = view.active_path[position]
        if view.kinds[index] == Kind.MESSAGE and view.roles[index] == Role.USER:
            seen += 1
            if seen == turns:
                return position
    return 0


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    for stale in ctx.shared(stale_reads):
        placeholder = PLACEHOLDER.format(path=stale.path, call_id=stale.write_call_id)
        yield ctx.entry_diagnostic(
            RULE,
            stale.result,
            f"read of {stale.path!r} is stale: the file was fully rewritten later "
            f"(write {stale.write_call_id} on line {stale.write_row})",
            fix=safe(
                "replace the file contents with a placeholder telling the model to re-read",
                ctx.rewrite_record(stale.result, ctx.editor.replace_result_text(placeholder)),
            ),
        )


RULE = Rule(
    code="SF301",
    name="stale-file-read",
    severity=Severity.INFO,
    fix="safe",
    formats=PI_FORMATS,
    summary="A file read whose file was later fully rewritten",
    check=check,
)
