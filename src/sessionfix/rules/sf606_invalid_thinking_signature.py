"""SF606 invalid-thinking-signature: signed thinking the provider refuses, or that was
signed for another model."""

from __future__ import annotations

from collections.abc import Iterator

from sessionfix.diagnostics import Diagnostic, Edit, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.model.view import (
    NO_MODEL,
    BadSignature,
    BrokenThinking,
    Kind,
    Role,
    SessionView,
    SignatureFault,
    key_of,
)
from sessionfix.rules.base import Rule, RuleContext, unsafe


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    if not view.signed_thinking:
        return
    sent = _Sent(view)
    continuing = _continuing_model(view) if view.foreign_thinking_as_text else None
    for index, broken in sorted(view.broken_thinking.items()):
        if sent(index) and (continuing is None or broken.model in (continuing[0], NO_MODEL)):
            yield _refused(ctx, index, broken)
    if continuing is None:
        return
    # Another model's thinking is sent as plain text, without its signature, whatever it is.
    for model, records in view.signed_thinking.items():
        if model in (continuing[0], NO_MODEL):
            continue
        their = view.in_path_order([index for index in records if sent(index)])
        if their:
            yield _other_model(ctx, their, continuing[1])


class _Sent:
    """Whether the agent sends a record's thinking signed: in the context window (and
    after the last boundary, where the agent strips the signatures of the records a
    compaction keeps from before it)."""

    def __init__(self, view: SessionView) -> None:
        self.view = view
        boundary = view.boundary_position
        self.after = -1
        if view.unsigns_kept_before_boundary and boundary is not None:
            self.after = boundary

    def __call__(self, index: int) -> bool:
        view = self.view
        return view.in_context(index) and view.path_positions[index] > self.after


def _continuing_model(view: SessionView) -> tuple[int, str] | None:
    """The model the session continues with, as its agent resumes it: the one the last
    assistant message or model change on the active path names."""
    model_of = view.model_of
    if model_of is None:
        return None
    path = view.active_path
    kinds, roles = view.kinds, view.roles
    for position in range(len(path) - 1, -1, -1):
        index = path[position]
        if kinds[index] == Kind.SETTING or roles[index] == Role.ASSISTANT:
            name = model_of(index)
            if name is not None:
                return key_of(name), name
    return None


def _refused(ctx: RuleContext, index: int, broken: BrokenThinking) -> Diagnostic:
    bad = broken.bad
    edit: Edit
    if len(bad) == broken.blocks:
        edit = ctx.drop(index)
        what = "delete the entry, which holds nothing else; its children move to its parent"
    else:
        places = tuple(signature.block for signature in bad)
        edit = ctx.rewrite_record(index, ctx.editor.drop_content_blocks(places))
        what = f"remove the thinking block{'s' if len(bad) > 1 else ''}; the rest stays"
    return ctx.entry_diagnostic(
        RULE,
        index,
        f"{_faults(bad)}: the provider refuses every request that resends it "
        "(Invalid `signature` in `thinking` block)",
        fix=unsafe(f"{what} (the reasoning is lost)", edit),
    )


def _faults(bad: tuple[BadSignature, ...]) -> str:
    """`thinking block 2 has an empty signature`, or several blocks, one clause each."""
    clauses = []
    for signature in bad:
        fault = signature.fault.value
        if signature.fault is SignatureFault.MALFORMED:
            fault += f" ({signature.length} characters)"
        clauses.append(f"{signature.block + 1} has {fault}")
    if len(clauses) == 1:
        return f"thinking block {clauses[0]}"
    return "thinking blocks " + ", ".join(clauses[:-1]) + " and " + clauses[-1]


def _other_model(ctx: RuleContext, records: list[int], continuing: str) -> Diagnostic:
    """One finding for the thinking of one other model, on its first message."""
    view = ctx.view
    first = records[0]
    model = view.model_of(first) if view.model_of is not None else None
    count = len(records)
    where = "this message" if count == 1 else f"{count} messages from here on"
    return ctx.entry_diagnostic(
        RULE,
        first,
        f"thinking of {model} in {where}, but the session continues with {continuing}: "
        "the agent sends that thinking as plain text, without its signatures",
        severity=Severity.INFO,
    )


RULE = Rule(
    code="SF606",
    name="invalid-thinking-signature",
    severity=Severity.ERROR,
    fix="unsafe (error cases), none (other models' thinking)",
    requires=frozenset({Capability.THINKING_SIGNATURES}),
    summary="Signed thinking the provider refuses, or signed by another model",
    check=check,
)
