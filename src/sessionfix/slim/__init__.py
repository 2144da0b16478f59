"""Slimming: the reductions that bring what an agent loads from a session under a token
budget, and the session's bytes under a size, cheapest loss first, each with the tokens
and bytes it saves.

A slim is a repair with more fixes: `repair`'s own fixes first (stale reads replaced by
their placeholder among them), then, oldest first and outside the protected last turns,
tool outputs cut to a head and a tail around a placeholder (and the copy the agent keeps
of them for its UI the same way), inline media replaced by one, and last the oldest
turns a compaction keeps left out of the context. For a size, what the agent keeps but
never sends goes after them: replacement histories a newer compaction supersedes, the
bookkeeping records children link through (Claude Code's `progress`), and the UI copies
of old outputs. The plan takes reductions until the estimate (`sessionfix.context`'s)
is within the budget and the size; repair's writer, verification and backups write it,
and verification counts the result as context does again and measures its bytes.
Nothing here knows a format's fields: the reductions go through the formats' editors.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final, NamedTuple, cast

from msgspec import Struct, field

from sessionfix.diagnostics import (
    Applicability,
    Diagnostic,
    Fix,
    RecordEdit,
    RewriteRecord,
    Severity,
)
from sessionfix.errors import SessionfixError, UsageError
from sessionfix.formats import ContentBlocks, Format, ResultText, Transform, package_of
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.coverage import provided
from sessionfix.model.loaded import Loader, LoadRefused, Sent
from sessionfix.model.view import Flag, InlineMedia, Kind
from sessionfix.read.reader import RecordSource
from sessionfix.rules.base import RuleContext
from sessionfix.scan.scanner import ScannedFile
from sessionfix.settings import Settings
from sessionfix.units import BYTES_PER_TOKEN, IMAGE_TOKENS, estimated_tokens, human_bytes

HEAD_CHARACTERS: Final = 1_000
"""What a truncated tool output keeps of its start (its first line at least)."""
TAIL_CHARACTERS: Final = 500
"""What it keeps of its end (where a command prints its outcome)."""
MIN_SAVED_BYTES: Final = 2_000
"""A reduction that saves less than this is not worth its loss."""
TRUNCATED: Final = (
    "\n[sessionfix: {cut} characters of this tool output cut to fit the context budget; "
    "the original session file, or the backup slim --in-place kept of it, holds them "
    "(sessionfix restore --list)]\n"
)
REPLACED_MEDIA: Final = (
    "[sessionfix: {what} removed to fit the context budget; the original session file, "
    "or the backup slim --in-place kept of it, holds it (sessionfix restore --list)]"
)
CODE: Final = "slim"
"""The code of a reduction's diagnostic (no rule's: reductions are no findings)."""

MODEL_WINDOWS: Final = {
    # Anthropic, "Context windows" (docs.anthropic.com/en/docs/build-with-claude/context-windows):
    # 200K tokens for every current model (1M for Sonnet 4/4.5 only in a beta).
    "claude-opus-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4": 200_000,
    "claude-3-7-sonnet": 200_000,
    # OpenAI, model pages (platform.openai.com/docs/models): "400,000 context window".
    "gpt-5": 400_000,
    "gpt-5-codex": 400_000,
    "gpt-4.1": 1_047_576,
    "o3": 200_000,
    # Google, "Gemini models" (ai.google.dev/gemini-api/docs/models): 1,048,576 input tokens.
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
}
"""Published context windows in tokens, by model name prefix (the longest one that a
model's name starts with counts: `claude-sonnet-4-5-20250929` is `claude-sonnet-4`)."""

_PERCENT: Final = re.compile(r"^(\d+(?:\.\d+)?)%$")
_SIZE: Final = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?$")


def window_of(model: str) -> int:
    """The published context window of `model`; `UsageError` for a model not listed."""
    name = model.strip().lower()
    matches = [prefix for prefix in MODEL_WINDOWS if name.startswith(prefix)]
    if not matches:
        known = ", ".join(MODEL_WINDOWS)
        raise UsageError(f"--model: no published window known for {model!r} (known: {known})")
    return MODEL_WINDOWS[max(matches, key=len)]


def budget_tokens(budget: str, model: str | None) -> int:
    """Tokens `--budget` allows: a count (`150000`, `150k`), or a share of the window of
    `model` (`80%`)."""
    text = budget.strip().lower().replace("_", "").replace(",", "")
    share = _PERCENT.match(text)
    if share is not None:
        if model is None:
            raise UsageError("--budget as a percentage needs --model (whose window it is of)")
        percent = float(share.group(1))
        if not 0 < percent <= 100:
            raise UsageError("--budget: a percentage must be over 0 and at most 100")
        return int(window_of(model) * percent / 100)
    scale = 1
    if text.endswith("k"):
        text, scale = text[:-1], 1_000
    elif text.endswith("m"):
        text, scale = text[:-1], 1_000_000
    try:
        tokens = int(float(text) * scale)
    except (ValueError, OverflowError):
        raise UsageError(
            f"--budget: {budget!r} is no number of tokens (150000, 150k) or percentage (80%)"
        ) from None
    if tokens <= 0:
        raise UsageError("--budget must be a positive number of tokens")
    return tokens


def size_bytes(size: str) -> int:
    """Bytes `--max-size` allows: `100MB` (decimal), `100MiB` (binary), `5000000`."""
    match = _SIZE.match(size.strip().lower().replace("_", "").replace(",", ""))
    if match is None:
        raise UsageError(
            f"--max-size: {size!r} is no size (a number of bytes, or 100MB, 1.5GiB, 500KB)"
        )
    number, prefix, binary = match.groups()
    power = "_kmgt".index(prefix) if prefix else 0
    try:
        value = int(float(number) * (1024 if binary else 1000) ** power)
    except OverflowError:
        raise UsageError(f"--max-size: {size!r} is too large") from None
    if value <= 0:
        raise UsageError("--max-size must be a positive number of bytes")
    return value


def refuse_size_in_store(path: Path, settings: Settings) -> None:
    """`UsageError` for a size limit on the sessions of a store: a session in a database
    or a document takes no bytes of its own that a slim could bring under a size (the
    database keeps its pages), and the bytes counted would be of sessionfix's reading."""
    if settings.max_size is not None:
        raise UsageError(
            f"{path}: --max-size limits a session file's bytes, and a session kept in a "
            "store has none of its own to bring down; slim it with --budget"
        )


class Step(enum.Enum):
    """A kind of reduction, in the order they are taken (the cheapest loss first): the
    first four for tokens, the last three, which save no tokens, for bytes."""

    REPAIR = "repair's own fixes"
    TOOL_OUTPUT = "old tool outputs cut to a head and a tail"
    MEDIA = "inline media replaced by a placeholder"
    OLD_TURNS = "the oldest turns the last compaction keeps left out of the context"
    HISTORY = "replacement histories a newer compaction supersedes dropped"
    BOOKKEEPING = "progress records the agent never sends dropped"
    KEPT_COPY = "the copies of old tool outputs kept for the UI cut to a head and a tail"

    @property
    def counts(self) -> str:
        """What its count counts."""
        return "turn" if self is Step.OLD_TURNS else "record"

    @property
    def key(self) -> str:
        """Its name in machine output (`tool-output`)."""
        return self.name.lower().replace("_", "-")


class Reduction(Struct, frozen=True):
    """One record changed to save tokens or bytes."""

    step: Step
    record: int
    row: int
    tokens: int
    """What the estimate loses with it."""
    turns: int = 0
    """`Step.OLD_TURNS`: the turns it leaves out."""
    size: int = 0
    """The bytes it takes off the session."""


class PlanStep(NamedTuple):
    """One step of a plan: how many records (or turns) it changes, and what it saves."""

    step: Step
    changed: int
    tokens: int
    size: int


class SlimPlan(Struct):
    """What slimming one session does: the estimate and size before, each reduction,
    and after."""

    budget: int | None
    """Tokens the agent may load (None: no budget, only a size)."""
    before: int
    """Tokens the agent loads from the session now (`SessionContext.tokens`)."""
    repaired: int
    """Tokens after `repair`'s own fixes alone."""
    max_size: int | None = None
    """Bytes the session may take (None: no limit)."""
    size: int = 0
    """Its bytes now."""
    reductions: list[Reduction] = field(default_factory=list)
    after: int = 0
    """The estimate with every reduction taken (the written result is measured again)."""
    size_after: int = 0
    """Its bytes with every reduction taken (measured again once written)."""

    @property
    def over_budget(self) -> bool:
        return self.budget is not None and self.before > self.budget

    @property
    def over_size(self) -> bool:
        return self.max_size is not None and self.size > self.max_size

    @property
    def needed(self) -> bool:
        """The session is over the budget or the size: something is written."""
        return self.over_budget or self.over_size

    @property
    def fits(self) -> bool:
        return (self.budget is None or self.after <= self.budget) and (
            self.max_size is None or self.size_after <= self.max_size
        )

    def steps(self) -> Iterator[PlanStep]:
        """Each step taken: how many records it changes, the tokens and bytes it saves
        (repair's own fixes: their tokens alone)."""
        if self.repaired < self.before:
            yield PlanStep(Step.REPAIR, 0, self.before - self.repaired, 0)
        for step in Step:
            taken = [reduction for reduction in self.reductions if reduction.step is step]
            if taken:
                count = sum(r.turns for r in taken) if step is Step.OLD_TURNS else len(taken)
                tokens = sum(reduction.tokens for reduction in taken)
                yield PlanStep(step, count, tokens, sum(reduction.size for reduction in taken))

    def measured(self, tokens: int | None, size: int | None) -> str:
        """`150,000 tokens`, `95.4 MiB` or both, as far as the plan has each limit."""
        shown = [] if self.budget is None or tokens is None else [f"{tokens:,} tokens"]
        if self.max_size is not None and size is not None:
            shown.append(human_bytes(size))
        return " and ".join(shown)

    def _limits(self, *, figures: bool) -> str:
        """`the budget of 150,000 and the size limit of 95.4 MiB`, or without figures."""
        return " and ".join(self._named_limits(figures=figures))

    def _named_limits(self, *, figures: bool) -> list[str]:
        """The budget and the size limit, as far as the plan has each, by name."""
        limits = []
        if self.budget is not None:
            limits.append("the budget" + (f" of {self.budget:,}" if figures else ""))
        if self.max_size is not None:
            size = f" of {human_bytes(self.max_size)}" if figures else ""
            limits.append("the size limit" + size)
        return limits

    def lines(self, name: str) -> list[str]:
        """The plan in words, a line each."""
        now = f"{name}: {self.before:,} tokens"
        if self.max_size is not None:
            now += f", {human_bytes(self.size)}"
        if not self.needed:
            return [f"{now}, within {self._limits(figures=True)}"]
        over = [self.over_budget] if self.budget is not None else []
        if self.max_size is not None:
            over.append(self.over_size)
        said = [
            f"{'over' if is_over else 'within'} {limit}"
            for is_over, limit in zip(over, self._named_limits(figures=True), strict=True)
        ]
        if all(over):
            said = [f"over {self._limits(figures=True)}"]
        shown = [f"{now}, {', '.join(said)}"]
        for step, count, tokens, size in self.steps():
            noun = step.counts + ("" if count == 1 else "s")
            records = f" ({count:,} {noun})" if count else ""
            saves = [f"{tokens:,} tokens"] if tokens or not size else []
            if size and self.max_size is not None:
                saves.append(human_bytes(size))
            shown.append(f"  - {step.value}{records}: saves {' and '.join(saves)}")
        remain = f"{self.after:,} tokens"
        if self.max_size is not None:
            remain += f" and {human_bytes(self.size_after)}"
        verdict = "within" if self.fits else "still over"
        shown.append(f"  = {remain} remain, {verdict} {self._limits(figures=False)}")
        return shown

    def as_json(self, name: str) -> dict[str, object]:
        """The plan as machine output: the limits, each step, what remains."""
        return {
            "filename": name,
            "budget": self.budget,
            "max_size": self.max_size,
            "before": {"tokens": self.before, "bytes": self.size},
            "needed": self.needed,
            "steps": [
                {
                    "step": step.key,
                    "description": step.value,
                    "count": count,
                    "counts": step.counts,
                    "tokens_saved": tokens,
                    "bytes_saved": size,
                }
                for step, count, tokens, size in self.steps()
            ],
            "after": {"tokens": self.after, "bytes": self.size_after},
            "fits": self.fits,
        }


class DoesNotFit(SessionfixError):
    """Every reduction taken, the session is still over its budget: nothing is written."""

    def __init__(self, message: str, plan: SlimPlan) -> None:
        super().__init__(message)
        self.plan = plan
        """What every reduction would bring it to (`SlimPlan.after`)."""


class Loaded(NamedTuple):
    """What the agent loads of a session: its tokens as `sessionfix.context` counts
    them, and the rows of the records it sends."""

    tokens: int
    rows: frozenset[int]


class _Sent(Struct):
    """What the loader sends of one record."""

    position: int
    """Its place among the messages sent."""
    text_bytes: int = 0
    images: int = 0
    result: bool = False
    """It sends a tool's result (perhaps with its call: opencode keeps both in a part)."""


def plan_slim(
    scanned: ScannedFile,
    applied: list[Diagnostic],
    source: RecordSource,
    settings: Settings,
    filename: str,
    repaired: Callable[[], Loaded],
    loader: Loader | None = None,
) -> tuple[SlimPlan, list[Diagnostic]]:
    """The reductions that bring `scanned` under `settings.budget` and `settings.max_size`,
    as diagnostics whose fixes repair applies after `applied` (its own); `repaired`
    measures what the agent loads after those alone, its records by the rows of
    `scanned` they come from (asked only when they change the session); `loader`: what
    the agent sends, where not what the format's package says (a store's). Raises
    `DoesNotFit` when every reduction leaves it over, `SessionfixError` when its agent
    does not load it."""
    assert settings.slims, "a slim has a budget or a size"
    view = scanned.view
    sent = _sent_records(scanned, source, filename, loader)
    before = tokens_of(sent.values())
    plan = SlimPlan(
        budget=settings.budget,
        before=before,
        repaired=before,
        max_size=settings.max_size,
        size=scanned.info.size,
    )
    if not plan.needed:
        plan.after, plan.size_after = before, plan.size
        return plan, []
    touched = {
        edit.record
        for diagnostic in applied
        if diagnostic.fix is not None
        for edit in diagnostic.fix.edits
        if isinstance(edit, RecordEdit)
    }
    if plan.over_budget and any(_changes_session(diagnostic) for diagnostic in applied):
        # Repair's fixes may leave records out of what the agent loads (a compaction's
        # cut moved forward): a cut of those would save nothing.
        after_repair = repaired()
        plan.repaired = after_repair.tokens
        sent = {
            index: record for index, record in sent.items() if view.rows[index] in after_repair.rows
        }
    ctx = RuleContext(
        view=view,
        lines=scanned.lines,
        settings=settings,
        source=source,
        info=scanned.info,
        filename=filename,
        enabled=frozenset(),
        editor=scanned.editor,
        tracking=scanned.tracking,
        excerpts=False,
    )
    protected = view.last_turns_start(settings.protect_last_turns)
    open_records = [
        index
        for index in sorted(sent, key=lambda index: sent[index].position)
        if index not in touched
        and 0 <= view.path_positions[index] < protected
        and not (view.signed is not None and view.signed(index))
    ]
    capabilities = provided(Format(view.format), tree=view.tree)
    # Bytes of text and images still to lose, from the estimate after repair's fixes.
    excess_bytes = 0 if plan.budget is None else (plan.repaired - plan.budget) * BYTES_PER_TOKEN
    chosen: list[Diagnostic] = []
    saved_text = saved_images = 0
    # Per record, the text bytes and images a reduction already took off it.
    saved: dict[int, tuple[int, int]] = {}

    def over() -> bool:
        return saved_text + saved_images * IMAGE_TOKENS * BYTES_PER_TOKEN < excess_bytes

    if Capability.SHORTENED_RESULTS in capabilities and over():
        results = [index for index in open_records if sent[index].result]
        for index, saving, size, diagnostic in _truncations(ctx, results):
            if not over():
                break
            chosen.append(diagnostic)
            saved_text += saving
            saved[index] = (saving, 0)
            plan.reductions.append(
                Reduction(
                    Step.TOOL_OUTPUT,
                    index,
                    view.rows[index],
                    saving // BYTES_PER_TOKEN,
                    size=size,
                )
            )
    if Capability.INLINE_MEDIA in capabilities and over():
        for index, (count, added, diagnostic) in _media(ctx, open_records):
            if not over():
                break
            chosen.append(diagnostic)
            saved_text -= added
            saved_images += count
            before_text, before_images = saved.get(index, (0, 0))
            saved[index] = (before_text - added, before_images + count)
            tokens = count * IMAGE_TOKENS - added // BYTES_PER_TOKEN
            size = sum(media.encoded for media in view.media[index]) - added
            plan.reductions.append(
                Reduction(Step.MEDIA, index, view.rows[index], tokens, size=size)
            )
    if Capability.SUMMARIES in capabilities and view.tree and over():
        need = excess_bytes - saved_text - saved_images * IMAGE_TOKENS * BYTES_PER_TOKEN
        cut = _old_turns(ctx, sent, touched, protected, saved, need)
        if cut is not None:
            # What other reductions took off the records it leaves out goes with them.
            kept = [
                n
                for n, reduction in enumerate(plan.reductions)
                if reduction.record not in cut.left_out
            ]
            chosen = [chosen[n] for n in kept]
            plan.reductions = [plan.reductions[n] for n in kept]
            text_bytes, images = cut.text_bytes, cut.images
            for index in cut.left_out & saved.keys():
                text_bytes += saved[index][0]
                images += saved[index][1]
            chosen.append(cut.diagnostic)
            saved_text += cut.text_bytes
            saved_images += cut.images
            tokens = text_bytes // BYTES_PER_TOKEN + images * IMAGE_TOKENS
            plan.reductions.append(
                Reduction(Step.OLD_TURNS, cut.boundary, view.rows[cut.boundary], tokens, cut.turns)
            )
    plan.after = max(
        0, plan.repaired - (saved_text // BYTES_PER_TOKEN) - saved_images * IMAGE_TOKENS
    )
    plan.size_after = plan.size - sum(reduction.size for reduction in plan.reductions)
    if plan.max_size is not None and plan.size_after > plan.max_size:
        changed = touched | {reduction.record for reduction in plan.reductions}
        for step, index, size, diagnostic in _unsent(ctx, sent, changed, protected):
            if plan.size_after <= plan.max_size:
                break
            chosen.append(diagnostic)
            plan.size_after -= size
            plan.reductions.append(Reduction(step, index, view.rows[index], 0, size=size))
    if not plan.fits:
        taken = "; ".join(
            f"{step.value}: {plan.measured(tokens, size)}" for step, _, tokens, size in plan.steps()
        )
        raise DoesNotFit(
            f"{filename}: cannot be brought under {plan.measured(plan.budget, plan.max_size)}: "
            f"{plan.measured(plan.before, plan.size)} now, "
            f"{plan.measured(plan.after, plan.size_after)} with every reduction outside the last "
            f"{settings.protect_last_turns} turns ({taken or 'none applies'}); nothing written",
            plan,
        )
    return plan, chosen


def _changes_session(diagnostic: Diagnostic) -> bool:
    return diagnostic.fix is not None and diagnostic.fix.changes_session


def tokens_of(sent: Iterable[_Sent]) -> int:
    """The estimate of `sessionfix.context` (`SessionContext.tokens`) for these records."""
    records = list(sent)
    return estimated_tokens(
        sum(record.text_bytes for record in records), sum(record.images for record in records)
    )


def loaded_tokens(
    scanned: ScannedFile, source: RecordSource, filename: str, loader: Loader | None = None
) -> int:
    """What the agent loads of a read session (by `loader` where not by its format's
    package), in tokens as `sessionfix.context` counts them."""
    return tokens_of(_sent_records(scanned, source, filename, loader).values())


def loaded_after_repair(
    scanned: ScannedFile, source: RecordSource, filename: str, loader: Loader | None = None
) -> Loaded:
    """What the agent loads of what repair's own fixes write of the session `filename`:
    `loaded_tokens`, and the rows it sends; `SessionfixError` when it loads none of it
    (the fixes lay bare what the agent read past: a glued line split, its records in a
    cycle), which a slim cannot change."""
    sent = _sent_records(
        scanned, source, filename, loader, "as repair's own fixes leave it, {}; nothing written"
    )
    rows = scanned.view.rows
    return Loaded(tokens_of(sent.values()), frozenset(rows[index] for index in sent))


def _sent_records(
    scanned: ScannedFile,
    source: RecordSource,
    filename: str,
    loader: Loader | None,
    refused_as: str = "{}; repair it before slimming it",
) -> dict[int, _Sent]:
    """What the loader sends of each record, as `sessionfix.context` counts it."""
    view = scanned.view
    sent: dict[int, _Sent] = {}
    load = loader or package_of(Format(view.format)).loaded_messages
    try:
        for position, message in enumerate(load(view, source, scanned.lines)):
            if message.record < 0:
                continue
            record = sent.setdefault(message.record, _Sent(position))
            record.text_bytes += message.size - message.image_bytes
            record.images += message.images
            record.result = record.result or message.sent is Sent.TOOL_RESULT
    except LoadRefused as refused:
        raise SessionfixError(f"{filename}: {refused_as.format(refused)}") from None
    return sent


def _truncations(
    ctx: RuleContext, records: list[int]
) -> Iterator[tuple[int, int, int, Diagnostic]]:
    """Each of the tool results `records` worth cutting, oldest first: its record, the
    bytes the agent sends less, the bytes the record loses (the UI's copy cut too) and
    the diagnostic whose fix cuts both."""
    view = ctx.view
    editor = cast(ResultText, ctx.editor)
    shortest = HEAD_CHARACTERS + TAIL_CHARACTERS + len(TRUNCATED) + MIN_SAVED_BYTES
    transform = editor.shorten_result_text(HEAD_CHARACTERS, TAIL_CHARACTERS, TRUNCATED)
    copy = editor.shorten_kept_copy(HEAD_CHARACTERS, TAIL_CHARACTERS, TRUNCATED)
    for index in records:
        if view.sizes[index] <= shortest:
            continue
        edit = ctx.rewrite_record(index, transform)
        saving = _saved(edit)
        if saving < MIN_SAVED_BYTES:
            continue
        size = saving
        if copy is not None:
            edit = ctx.rewrite_record(index, _both(transform, copy))
            size = _saved(edit)
        yield index, saving, size, _reduction(ctx, index, Step.TOOL_OUTPUT, size, edit)


def _both(first: Transform, then: Transform) -> Transform:
    return lambda record: then(first(record))


def _saved(edit: RewriteRecord) -> int:
    """The bytes a rewrite takes off its record."""
    assert edit.changed is not None
    start, end, text = edit.changed()
    return end - start - len(text.encode("utf-8", "surrogatepass"))


def _unsent(
    ctx: RuleContext, sent: dict[int, _Sent], changed: set[int], protected: int
) -> Iterator[tuple[Step, int, int, Diagnostic]]:
    """What the agent keeps but never sends, oldest first within each step, outside the
    last turns and the records other fixes change: its step, its record, the bytes it
    saves and the diagnostic whose fix drops or cuts it."""
    view = ctx.view
    path = view.active_path
    # The last turns' records, on the path or beside it, from the first one on.
    end = path[protected] if 0 <= protected < len(path) else len(view.sizes)
    capabilities = provided(Format(view.format), tree=view.tree)
    if (
        Capability.CARRIED_HISTORIES in capabilities
        and next(view.records_flagged(Flag.ROLLBACK), None) is None
    ):
        carriers = view.history_carriers()
        for index in carriers[:-1]:
            if index in changed or index >= end:
                continue
            edit = ctx.rewrite_record(index, ctx.editor.drop_carried_history())
            size = _saved(edit)
            yield Step.HISTORY, index, size, _reduction(ctx, index, Step.HISTORY, size, edit)
    for index in view.records_of_kind(Kind.CONTROL):
        if index >= end:
            break
        if index in changed:
            continue
        size = view.sizes[index] + 1
        drop = ctx.drop(index)
        yield Step.BOOKKEEPING, index, size, _reduction(ctx, index, Step.BOOKKEEPING, size, drop)
    if Capability.SHORTENED_RESULTS not in capabilities:
        return
    copy = cast(ResultText, ctx.editor).shorten_kept_copy(
        HEAD_CHARACTERS, TAIL_CHARACTERS, TRUNCATED
    )
    if copy is None:
        return
    shortest = HEAD_CHARACTERS + TAIL_CHARACTERS + len(TRUNCATED) + MIN_SAVED_BYTES
    for index in sorted(sent, key=lambda index: sent[index].position):
        record = sent[index]
        if (
            not record.result
            or index in changed
            or index >= end
            or view.sizes[index] <= shortest
            or (view.signed is not None and view.signed(index))
        ):
            continue
        edit = ctx.rewrite_record(index, copy)
        size = _saved(edit)
        if size >= MIN_SAVED_BYTES:
            yield Step.KEPT_COPY, index, size, _reduction(ctx, index, Step.KEPT_COPY, size, edit)


class _Cut(NamedTuple):
    boundary: int
    turns: int
    text_bytes: int
    images: int
    diagnostic: Diagnostic
    left_out: frozenset[int]
    """The records it leaves out of the context."""


def _old_turns(
    ctx: RuleContext,
    sent: dict[int, _Sent],
    skip: set[int],
    protected: int,
    saved: dict[int, tuple[int, int]],
    need: int,
) -> _Cut | None:
    """The last compaction made to keep fewer of the turns before it, the oldest whole
    turns first (a turn starts at a user message: a call and its result go together),
    until `need` bytes are off the context, or as many as lie outside the protected
    turns. The records stay in the file; what other reductions took off them counts
    once. None when the compaction keeps no whole turn to leave out."""
    view = ctx.view
    at = view.boundary_position
    if at is None:
        return None
    path = view.active_path
    boundary = path[at]
    facts = view.boundaries.get(boundary)
    if boundary in skip or facts is None or not isinstance(facts.first_kept, str):
        return None
    first = view.resolve(facts.first_kept)
    start = -1 if first is None else view.path_positions[first]
    if not 0 <= start < at:
        return None
    text = images = turns = 0
    best: tuple[int, int, int, int] | None = None
    for position in range(start, min(at, protected)):
        index = path[position]
        if position > start and view.starts_turn(index):
            turns += 1
            best = (index, turns, text, images)
            if text + images * IMAGE_TOKENS * BYTES_PER_TOKEN >= need:
                break
        record = sent.get(index)
        if record is not None and index not in skip:
            taken_text, taken_images = saved.get(index, (0, 0))
            text += record.text_bytes - taken_text
            images += record.images - taken_images
    entry_id = None if best is None else view.entry_id(best[0])
    if best is None or entry_id is None:
        return None
    new_first, turns, text, images = best
    edit = ctx.move_cut(boundary, entry_id, None)
    left_out = frozenset(path[start : view.path_positions[new_first]])
    diagnostic = _reduction(ctx, boundary, Step.OLD_TURNS, text, edit)
    return _Cut(boundary, turns, text, images, diagnostic, left_out)


def _media(
    ctx: RuleContext, records: list[int]
) -> Iterator[tuple[int, tuple[int, int, Diagnostic]]]:
    """Each record's inline media, oldest first: its record, the images it sends, the
    text bytes their placeholders add, and the diagnostic whose fix replaces them."""
    view = ctx.view
    editor = cast(ContentBlocks, ctx.editor)
    for index in records:
        held = view.media.get(index)
        if not held:
            continue
        texts = tuple(REPLACED_MEDIA.format(what=_what(media)) for media in held)
        edit = ctx.rewrite_record(index, editor.replace_media(held, texts))
        added = sum(len(text) + len('{"type":"text","text":""},') for text in texts)
        saving = sum(media.encoded for media in held)
        yield index, (len(held), added, _reduction(ctx, index, Step.MEDIA, saving, edit))


def _what(media: InlineMedia) -> str:
    """`image/png image (3024x4032 px, 6.1 MiB)`."""
    kind = media.media_type or "inline"
    size = human_bytes(media.decoded)
    if media.width is not None and media.height is not None:
        return f"{kind} {media.kind.value} ({media.width}x{media.height} px, {size})"
    return f"{kind} {media.kind.value} ({size})"


def _reduction(
    ctx: RuleContext, index: int, step: Step, saving: int, edit: RecordEdit
) -> Diagnostic:
    view = ctx.view
    message = f"{step.value}: {human_bytes(saving)} less"
    return Diagnostic(
        code=CODE,
        name=step.key,
        severity=Severity.INFO,
        message=message,
        filename=ctx.filename,
        row=view.rows[index],
        column=view.column(index),
        entry_id=view.entry_id(index),
        fix=Fix(Applicability.SAFE, message, (edit,)),
        format=view.format,
        span=view.span(index),
        source=ctx.info.path,
    )
