"""SF201 overflow-clone-message: a user message re-appended by overflow recovery."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import compress

from msgspec import Struct

from sessionfix.diagnostics import Diagnostic, Edit, Severity
from sessionfix.formats.capabilities import Capability
from sessionfix.location import on_line, said
from sessionfix.model.tracking import UserEvent
from sessionfix.model.view import MISSING
from sessionfix.rules.base import Rule, RuleContext, safe, unsafe


class Clone(Struct, frozen=True):
    clone: int
    survivor: int
    answered_between: bool
    """An assistant message lies between survivor and clone on the path."""


def user_clones(ctx: RuleContext) -> dict[int, Clone]:
    """Identical user messages re-appended on the active path (rules.md §4.1).

    Copies count only within one compaction window. Messages are first bucketed by a
    cheap key (their timestamp); only messages sharing a key are read back, and a copy
    repeats its survivor's message object byte for byte: values that merely parse
    equal (`1e2` and `100.0`, `"A"` and `"\\u0041"`) are different messages.
    """
    clones: dict[int, Clone] = {}
    users = ctx.tracking.users
    if ctx.provides(Capability.MESSAGE_PARTS):
        return _part_clones(ctx)
    if not ctx.view.tree or not users:
        return clones
    keys = users.keys
    candidates: Iterable[int]
    try:
        repeated = {key for key, count in Counter(keys).items() if count > 1}
        candidates = compress(range(len(keys)), map(repeated.__contains__, keys))
    except TypeError:  # an unhashable key: compare through its repr below
        candidates = range(len(keys))
    buckets: dict[tuple[int, object], list[UserEvent]] = {}
    for position in candidates:
        event = users[position]
        try:
            buckets.setdefault((event.boundaries_before, event.key), []).append(event)
        except TypeError:
            buckets.setdefault((event.boundaries_before, repr(event.key)), []).append(event)
    copied_bytes = ctx.view.copied_bytes
    if copied_bytes is None:
        return clones
    for bucket in buckets.values():
        if len(bucket) < 2:
            continue
        first_seen: dict[bytes, UserEvent] = {}
        for event in bucket:
            message = copied_bytes(event.record)
            if message is None:
                continue
            survivor = first_seen.setdefault(message, event)
            if survivor is not event:
                clones[event.record] = Clone(
                    event.record,
                    survivor.record,
                    event.assistants_before != survivor.assistants_before,
                )
    return clones


def _part_clones(ctx: RuleContext) -> dict[int, Clone]:
    """A user message stored again right after itself (spec formats/opencode.md §8.4):
    the same content and parts under new ids, the prompt before it in load order."""
    clones: dict[int, Clone] = {}
    users = ctx.tracking.users
    for position in range(1, len(users)):
        previous, event = users[position - 1], users[position]
        if event.key != previous.key or event.boundaries_before != previous.boundaries_before:
            continue
        survivor = clones[previous.record].survivor if previous.record in clones else None
        clones[event.record] = Clone(
            event.record,
            previous.record if survivor is None else survivor,
            event.assistants_before != previous.assistants_before,
        )
    return clones


def survivor_of(ctx: RuleContext, entry_id: str) -> str:
    """The id a reference to `entry_id` resolves to once SF201 clones are dropped (when
    the rule that drops them runs)."""
    if RULE.code not in ctx.enabled:
        return entry_id
    index = ctx.view.resolve(entry_id)
    if index is None:
        return entry_id
    clone = ctx.shared(user_clones).get(index)
    if clone is None:
        return entry_id
    return ctx.view.entry_id(clone.survivor) or entry_id


def check(ctx: RuleContext) -> Iterator[Diagnostic]:
    view = ctx.view
    same = (
        "same content and parts"
        if ctx.provides(Capability.MESSAGE_PARTS)
        else "same content and message.timestamp"
    )
    for index, clone in sorted(ctx.shared(user_clones).items()):
        survivor = clone.survivor
        survivor_id = view.entry_id(survivor)
        where = said(f"entry {survivor_id} ", on_line(view.rows[survivor]))
        edits = _dropped(ctx, index, survivor)
        remap = f"drop the clone; references to it move to {survivor_id}"
        if clone.answered_between:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "user message is identical to "
                + where
                + f" ({same}) but comes after an assistant answered it",
                fix=unsafe(remap + " (the answered prompt disappears from the dialogue)", *edits),
            )
        else:
            yield ctx.entry_diagnostic(
                RULE,
                index,
                "user message is identical to "
                + where
                + f" ({same}): a clone appended by context-overflow recovery",
                fix=safe(remap, *edits),
            )


def _dropped(ctx: RuleContext, index: int, survivor: int) -> list[Edit]:
    """Drop a clone: in a format whose messages are made of the records after them, those
    too, and the replies naming it then name its survivor (no reference is remapped
    for them)."""
    if not ctx.provides(Capability.MESSAGE_PARTS):
        return [ctx.drop(index, survivor)]
    view = ctx.view
    edits: list[Edit] = [ctx.drop(index, survivor)]
    edits.extend(ctx.drop(part) for part in range(index + 1, index + 1 + view.part_counts[index]))
    clone_id, survivor_id = view.entry_id(index), view.entry_id(survivor)
    if survivor_id is None or clone_id is None:
        return edits
    for reply in ctx.shared(replies).get(clone_id, ()):
        if reply != index:
            edits.append(ctx.rewrite_record(reply, ctx.editor.set_parent(survivor_id)))
    return edits


def replies(ctx: RuleContext) -> dict[str, list[int]]:
    """The messages naming each message as the one they answer, by its id."""
    view = ctx.view
    found: dict[str, list[int]] = {}
    for index in view.part_counts:
        parent = view.parent_id(index)
        if isinstance(parent, str) and parent != MISSING:
            found.setdefault(parent, []).append(index)
    return found


RULE = Rule(
    code="SF201",
    name="overflow-clone-message",
    severity=Severity.WARNING,
    fix="safe / unsafe",
    requires=frozenset({Capability.ENTRIES, Capability.RETRY_COPIES}),
    summary="A user message re-appended by context-overflow recovery",
    check=check,
)
