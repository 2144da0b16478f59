"""What a rule is, and the context it runs in."""

from __future__ import annotations

import enum
import os
from collections import Counter
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from msgspec import Struct

from sessionfix import jsonutil
from sessionfix.diagnostics import (
    EXCERPT_BYTES,
    Applicability,
    Diagnostic,
    DropRecord,
    Edit,
    Fix,
    InsertRecord,
    MoveCut,
    RewriteRecord,
    SetAside,
    Severity,
    excerpt_of,
)
from sessionfix.errors import SessionfixError
from sessionfix.formats import Format, RecordEditor, all_formats
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.coverage import coverage, missing, provided
from sessionfix.location import Said, text_of
from sessionfix.model.tracking import Tracking
from sessionfix.model.view import SessionView
from sessionfix.read.reader import FileInfo, LineReport, RecordSource
from sessionfix.settings import Settings
from sessionfix.structs import PartlyCompared

DOCS_URL_ENV = "SESSIONFIX_DOCS_URL"
"""Where the rule pages are published: the base URL of the site's rule pages (a rule's
page is `<base>/<name>/`, as the documentation site serves `docs/rules/<name>.md`)
or a template holding `{name}` and/or `{code}`. Unset: rules have no URL, as only the
publisher knows where the site is (the package ships the pages: `sessionfix rule CODE`)."""

T = TypeVar("T")


class Invariant(enum.Enum):
    """A property of a rule's findings that every repair must keep."""

    NO_MORE = "no-more"
    """The repaired file holds no more of these findings than the input did."""
    NOT_ON_REWRITTEN = "not-on-rewritten"
    """No record the repair rewrote carries one that the input did not have."""


class Counted(enum.Enum):
    """What the repair summary counts a rule's applied fixes as, in the summary's order."""

    STALE_READS_PRUNED = ("stale read", "stale reads", "pruned")
    GLUED_LINES_SPLIT = ("glued line", "glued lines", "split")
    HISTORIES_DROPPED = (
        "superseded replacement history",
        "superseded replacement histories",
        "dropped",
    )

    def phrase(self, count: int) -> str:
        """`3 stale reads pruned`."""
        one, many, verb = self.value
        return f"{count} {one if count == 1 else many} {verb}"


class Weight(enum.Enum):
    """What the records a rule's findings point at are, in a context breakdown
    (`sessionfix context`): weight the model carries for nothing."""

    STALE_READS = "stale reads"


class Rule(PartlyCompared, Struct, frozen=True):
    """A registered rule: identity, defaults, and the check that finds it."""

    uncompared: ClassVar[frozenset[str]] = frozenset({"check"})

    code: str
    name: str
    severity: Severity
    """Default severity; some findings of a rule are reported at another level."""
    fix: str
    """Fix availability as the catalogue states it (e.g. "safe", "unsafe", "none")."""
    requires: frozenset[Capability]
    """What a file's format must provide for the rule to run on it."""
    summary: str
    check: Callable[[RuleContext], Iterable[Diagnostic]]
    invariant: Invariant | None = None
    """What verification of a repair keeps about this rule's findings."""
    prunes_to_leaf: bool = False
    """Its fix drops history off the active path: applied only when asked to prune."""
    counted: Counted | None = None
    """How the repair summary counts its applied fixes."""
    weighs: Weight | None = None
    """What its findings' records are in a context breakdown."""

    def _page(self) -> str:
        """The rule's Markdown page, shipped with the package."""
        from importlib import resources

        return (
            resources.files("sessionfix")
            .joinpath("docs", "rules", f"{self.name}.md")
            .read_text(encoding="utf-8")
        )

    @property
    def doc(self) -> str:
        """The rule's documentation: a title and metadata line, then its Markdown sections."""
        body = self._page()
        covered, tree_only = coverage(self.requires)
        formats = (
            "all"
            if set(covered) == set(all_formats())
            else ", ".join(sorted(f.value for f in covered))
        )
        scope = " (v2/v3 tree sessions)" if tree_only else ""
        return (
            f"# {self.name} ({self.code})\n\n"
            f"Severity: {self.severity.label} · Fix: {self.fix} · Formats: {formats}{scope}\n\n"
            f"{self.summary}.\n\n{body.strip()}\n"
        )

    @property
    def formats(self) -> frozenset[Format]:
        """The formats whose files (some of them, for a tree rule) the rule covers."""
        return frozenset(coverage(self.requires)[0])

    def runs_on(self, provided: frozenset[Capability]) -> bool:
        """Whether a file providing `provided` has everything the rule needs."""
        return self.requires <= provided

    def missing_for(self, fmt: Format, *, tree: bool) -> list[Capability]:
        """What a file of `fmt` lacks for this rule, in declaration order."""
        return missing(self.requires, fmt, tree=tree)

    @property
    def url(self) -> str | None:
        """The rule's page under `SESSIONFIX_DOCS_URL`, or None when none is configured."""
        return docs_url(self.code, self.name)

    @property
    def what_it_does(self) -> str:
        """The first paragraph of the rule's "What it does" section, on one line."""
        body = self._page()
        _, found, rest = body.partition("## What it does")
        if not found:
            return f"{self.summary}."
        paragraph = rest.strip().split("\n\n", 1)[0]
        return " ".join(paragraph.split())


def docs_url(code: str, name: str) -> str | None:
    """A rule's documentation URL from `SESSIONFIX_DOCS_URL` (see `DOCS_URL_ENV`)."""
    base = os.environ.get(DOCS_URL_ENV, "").strip()
    if not base:
        return None
    if "{name}" in base or "{code}" in base:
        return base.replace("{name}", name).replace("{code}", code)
    return f"{base.rstrip('/')}/{name}/"


class RuleContext:
    """Everything a rule may look at for one file, plus helpers to report findings."""

    def __init__(
        self,
        *,
        view: SessionView,
        lines: LineReport,
        settings: Settings,
        source: RecordSource,
        info: FileInfo,
        filename: str,
        enabled: frozenset[str],
        editor: RecordEditor,
        tracking: Tracking,
        origin: Path | None = None,
        excerpts: bool = True,
    ) -> None:
        self.excerpts = excerpts
        """Whether diagnostics carry an excerpt of their record (not for a file that
        is about to go, such as a repair's temporary result)."""
        self.origin = origin or info.path
        """The session's own path, for rules that read its name (a repair is checked
        under a temporary name)."""
        self.editor = editor
        self.tracking = tracking
        self.view = view
        self.lines = lines
        self.settings = settings
        self.source = source
        self.info = info
        self.filename = filename
        self.enabled = enabled
        self._shared: dict[Callable[[RuleContext], Any], Any] = {}

    @property
    def format(self) -> Format:
        return Format(self.view.format)

    def provides(self, capability: Capability) -> bool:
        """Whether this file's format provides `capability` (rules vary a fix by it)."""
        return capability in provided(self.format, tree=self.view.tree)

    def shared(self, analysis: Callable[[RuleContext], T]) -> T:
        """Run an analysis once per file and share its result between rules."""
        if analysis not in self._shared:
            self._shared[analysis] = analysis(self)
        result: T = self._shared[analysis]
        return result

    @cached_property
    def quiescent(self) -> bool:
        """The file has been at rest for the quiescence window (no write in progress)."""
        from sessionfix.safety.locks import busy_reason

        mtime = self.info.mtime_ns / 1e9
        return busy_reason(self.info.path, self.settings.quiescence, mtime=mtime) is None

    def read_record(self, index: int) -> bytes:
        return self.source.read(*self.view.span(index))

    def load_record(self, index: int) -> Any:
        return jsonutil.loads(self.read_record(index))

    def diagnostic(
        self,
        rule: Rule,
        row: int,
        message: str | Said,
        *,
        index: int | None = None,
        severity: Severity | None = None,
        fix: Fix | None = None,
        column: int | None = None,
        span: tuple[int, int] | None = None,
        end_row: int | None = None,
    ) -> Diagnostic:
        view = self.view
        if index is not None:
            column = column or view.column(index)
            span = span or view.span(index)
        return Diagnostic(
            excerpt=self._excerpt(span) if span is not None and self.excerpts else None,
            code=rule.code,
            name=rule.name,
            severity=rule.severity if severity is None else severity,
            message=text_of(message),
            said=message if isinstance(message, Said) else None,
            filename=self.filename,
            row=row,
            column=column or 1,
            entry_id=view.entry_id(index) if index is not None and index < len(view) else None,
            fix=fix,
            format=view.format,
            span=span,
            source=self.info.path,
            end_row=end_row,
        )

    def _excerpt(self, span: tuple[int, int]) -> str | None:
        offset, length = span
        take = min(length, EXCERPT_BYTES)
        try:
            data = self.source.read(offset, take)
        except SessionfixError:
            return None
        return excerpt_of(data, take < length)

    def entry_diagnostic(
        self,
        rule: Rule,
        index: int,
        message: str | Said,
        *,
        severity: Severity | None = None,
        fix: Fix | None = None,
    ) -> Diagnostic:
        return self.diagnostic(
            rule, self.view.rows[index], message, index=index, severity=severity, fix=fix
        )

    # ---- fix helpers -------------------------------------------------------------------

    def rewrite_record(self, index: int, transform: Callable[[Any], Any]) -> RewriteRecord:
        """Change a record by `transform`.

        The record is re-read and re-serialised the way its writer does
        (compact, key order and number lexemes kept) only when the content is asked for.
        """
        offset, size = self.view.span(index)
        row = self.view.rows[index]
        rewrite = _Reserialised(
            self.source, offset, size, offset - self._line_offsets.get(row, offset), transform
        )
        return RewriteRecord(
            row, rewrite.text, record=index, transform=transform, changed=rewrite.change
        )

    @cached_property
    def _line_offsets(self) -> dict[int, int]:
        """Where each damaged line starts (a record on a clean line starts it)."""
        return {finding.row: finding.offset for finding in self.lines.findings}

    def move_cut(self, index: int, entry_id: str | None, position: int | None) -> MoveCut:
        """Make compaction `index` keep from `entry_id` (or, positionally, `position`)."""
        rewrite = self.rewrite_record(index, self.editor.set_first_kept(entry_id, position))
        return MoveCut(
            rewrite.row,
            rewrite.produce,
            record=index,
            transform=rewrite.transform,
            changed=rewrite.changed,
        )

    def drop(self, index: int, survivor: int | None = None) -> DropRecord:
        """Drop a record; a copy names the `survivor` its references move to (§8)."""
        return DropRecord(self.view.rows[index], record=index, survivor=survivor)

    def drop_result(self, index: int, call_id: str | None) -> Edit:
        """Remove one tool result: its block answering `call_id` (the last one: a
        repeat goes, the first result stays), or the record when the result fixes leave
        it nothing (a Claude user record may answer several calls, or one call twice)."""
        editor = self.editor
        going = self._results_going[index]
        if call_id is not None and editor.holds_more_blocks_than(self.load_record(index), going):
            return self.rewrite_record(index, editor.drop_result_blocks(frozenset({call_id})))
        return self.drop(index)

    @cached_property
    def _results_going(self) -> Counter[int]:
        """Record → how many of its results the enabled result fixes drop (each orphan
        for SF401, each repeat for SF403): a record keeps a result whose rule is off."""
        tracking = self.tracking
        going: Counter[int] = Counter()
        if "SF401" in self.enabled:
            going.update(event.index for event in tracking.orphans)
        if "SF403" in self.enabled:
            going.update(event.index for event, _ in tracking.duplicates)
        return going

    def insert_after(
        self, anchor: int, build: Callable[[], dict[str, Any]], new_id: str | None
    ) -> InsertRecord:
        """Insert a record after `anchor`; the entry that followed it moves below the new one."""

        def produce() -> str:
            return jsonutil.stringify(build())

        return InsertRecord(
            self.view.rows[anchor], produce, record=anchor, build=build, new_id=new_id
        )

    def set_aside(self, row: int, path: Path) -> SetAside:
        """Move `path`, a file the agent keeps beside the session, aside (a finding on
        line `row`): the agent builds it again; an in-place repair does it."""
        return SetAside(row, path=path)

    def line_text(self, produce_bytes: Callable[[], bytes]) -> Callable[[], str]:
        """The text a line edit shows for bytes read on demand."""
        return lambda: _display(produce_bytes())

    def line_bytes(self, offset: int, length: int) -> Callable[[], bytes]:
        source = self.source
        return lambda: source.read(offset, length)


class _Reserialised:
    """A record rewritten by `transform` and serialised the way its writer does, made
    only when asked for: its new text, or the bytes of its line that change (kept once
    made). Slots, not closures: a session can hold thousands of these."""

    __slots__ = ("_change", "at", "offset", "size", "source", "transform")

    def __init__(
        self,
        source: RecordSource,
        offset: int,
        size: int,
        at: int,
        transform: Callable[[Any], Any],
    ) -> None:
        self.source = source
        self.offset = offset
        self.size = size
        self.at = at
        """Where the record starts within its line."""
        self.transform = transform
        self._change: tuple[int, int, str] | None = None

    def _rewritten(self, old: bytes) -> bytes:
        return jsonutil.stringify_preserved(self.transform(jsonutil.loads_preserving(old)))

    def text(self) -> str:
        return _display(self._rewritten(self.source.read(self.offset, self.size)))

    def change(self) -> tuple[int, int, str]:
        """The 0-based offsets within the line of the first changed byte and of the byte
        after the last one, and their new text."""
        if self._change is None:
            old = self.source.read(self.offset, self.size)
            first, last, text = changed_bytes(old, self._rewritten(old))
            self._change = (self.at + first, self.at + last, text)
        return self._change


def _display(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def changed_bytes(old: bytes, new: bytes) -> tuple[int, int, str]:
    """The part of `old` that `new` changes: its first and end offsets and the new
    text there. Both ends fall between characters; where the new bytes are not UTF-8
    text, the whole of `old` is named (JSON text cannot carry them exactly anyway)."""
    limit = min(len(old), len(new))
    first = _common_length(old, new, limit, lambda n: (slice(0, n), slice(0, n)))
    last = _common_length(
        old,
        new,
        limit - first,
        lambda n: (slice(len(old) - n, len(old)), slice(len(new) - n, len(new))),
    )
    # Back off to character boundaries: never end inside a multi-byte character.
    while first > 0 and (_continues(old, first) or _continues(new, first)):
        first -= 1
    while last > 0 and (_continues(old, len(old) - last) or _continues(new, len(new) - last)):
        last -= 1
    try:
        text = new[first : len(new) - last].decode("utf-8")
    except UnicodeDecodeError:
        return 0, len(old), _display(new)
    return first, len(old) - last, text


def _common_length(
    old: bytes, new: bytes, limit: int, spans: Callable[[int], tuple[slice, slice]]
) -> int:
    """The largest n up to `limit` for which the two `spans(n)` hold the same bytes, by
    bisection (each comparison a memcmp: a long record's lines compare in C)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        mine, theirs = spans(middle)
        if old[mine] == new[theirs]:
            low = middle
        else:
            high = middle - 1
    return low


def _continues(data: bytes, at: int) -> bool:
    """Whether the byte at `at` continues a character begun before it."""
    return at < len(data) and 0x80 <= data[at] < 0xC0


def safe(message: str | Said, *edits: Edit) -> Fix:
    return _fix(Applicability.SAFE, message, edits)


def unsafe(message: str | Said, *edits: Edit) -> Fix:
    return _fix(Applicability.UNSAFE, message, edits)


def _fix(applicability: Applicability, message: str | Said, edits: tuple[Edit, ...]) -> Fix:
    said = message if isinstance(message, Said) else None
    return Fix(applicability, text_of(message), edits, said)
