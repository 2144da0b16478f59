"""Checking a repair's written result before it takes a path (rules.md §1 step 7).

The result is read back as a session, under the name it is to have: no fix that
applies may remain (a later pass repairs it again, up to `MAX_PASSES`), no reference
may dangle that did not dangle before, no rule's invariant may break, and no whole
record may be lost.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import tempfile
from collections import Counter
from contextlib import suppress
from pathlib import Path
from typing import Final

import msgspec

from sessionfix import jsonutil
from sessionfix.diagnostics import Diagnostic
from sessionfix.engine import run_rules
from sessionfix.errors import SessionfixError
from sessionfix.formats import (
    Format,
    has_record_shape,
    make_adapter,
    package_of,
    read_as,
    same_package,
)
from sessionfix.location import Said, on_its_line, said
from sessionfix.model.loaded import LoadRefused
from sessionfix.model.view import SessionView
from sessionfix.read.reader import LineIssue, RecordSource
from sessionfix.repair.plan import RepairPlan
from sessionfix.repair.planned import (
    PlannedRepair,
    RepairResult,
    applies,
    check_input_unchanged,
    write_new,
)
from sessionfix.repair.rowmap import RepairTrace
from sessionfix.replacing import chown_best_effort
from sessionfix.rules import RULES
from sessionfix.rules.base import Invariant
from sessionfix.safety.writing import file_digest
from sessionfix.scan.scanner import ScannedFile, detect_format, gc_paused, read_session
from sessionfix.scan.splice import read_spliced
from sessionfix.units import human_bytes

PARENT_LINK: Final = "parent link"
MAX_PASSES: Final = 8
"""Checks of the written result before verification gives up (see `verify`).
Every further pass must change the file; real sessions need one, rare shapes three."""


class VerificationFailed(SessionfixError):
    """The repaired bytes did not pass the check; nothing was written in their place."""


def _copied_exactly(planned: PlannedRepair, written: Path) -> bool:
    """The written copy has the input's size and digest (a hash pass over two files
    in the page cache, several times cheaper than reading the copy as a session)."""
    try:
        with open(written, "rb") as copy, open(planned.path, "rb") as original:
            size = planned.scanned.info.size
            if os.fstat(copy.fileno()).st_size != size:
                return False
            return file_digest(copy) == file_digest(original, size)
    except OSError:
        return False


def verify(
    planned: PlannedRepair, written: Path, filename: str, named_as: Path | None = None
) -> list[Diagnostic]:
    """Check repaired bytes at `written`, read under the name and folder `named_as`
    (where they are to lie; default the session's); return what a check of them
    reports there.

    A fix can make another one applicable (a re-linked entry becomes a clone of its
    new parent; a dropped root leaves a root mid-file, which a later fix re-links): then
    `written` is repaired again, until nothing that applies is left, so that the
    result is a fixed point of `repair`. A pass that changes nothing, or more than
    `MAX_PASSES` checks, fail the repair. So do a result that reads as another format
    than the input (a later run would apply other rules to it), a name that dangles in
    the result but named a record in the input (the children of a dropped entry whose
    parent was already gone inherit that gone name: not a new one), more cycles than
    the input had, and a broken kept entry on a compaction the repair rewrote: each
    rule's `invariant`.
    """
    settings = planned.settings
    named = named_as or planned.named_as
    if (
        planned.plan.is_empty()
        and not planned.tracing
        and _reads_alike(planned, named)
        and _copied_exactly(planned, written)
    ):
        # The copy is the input byte for byte (nothing applies), and its name tells
        # its reader what the session's tells: it reads as the input just did. Only
        # the rules, some of which read the name itself, run again if it differs.
        planned.scanned.parts = None
        if named == planned.named_as:
            return [msgspec.structs.replace(d, filename=filename) for d in planned.found]
        with gc_paused():
            return run_rules(planned.scanned, settings, filename, origin=named)
    before = planned.scanned.view
    dangled = _dangling_names(before)
    guard = _Invariants(planned.found)
    rewritten = planned.plan.rewritten_ids()
    if planned.tracing:
        assert planned.plan.row_map is not None, "verify() follows a write of chunks()"
        planned.trace = RepairTrace(planned.plan.row_map)
        planned.traced = [(d, d.row) for d in planned.plan.diagnostics]
    for _ in range(MAX_PASSES):
        with gc_paused():
            scanned = _read_result(planned, written, named)
            # Held: the written file's name goes (renamed over the session, linked to
            # the output, or removed) before a report reads the fixes' edits.
            diagnostics = run_rules(
                scanned,
                settings,
                filename,
                origin=named,
                excerpts=False,
                hold=True,
            )
        view = scanned.view
        if settings.format is Format.AUTO:
            _check_detected(planned, written, filename, named)
        dangling = {
            key: owner for key, owner in _dangling_names(view).items() if key not in dangled
        }
        # A name that named nothing in the input is inherited when the input holds it
        # (written so by the agent, or on a record a fix brought back from a damaged
        # line); one that named a record there, or appears nowhere, is the repair's.
        unheard = _absent_from(planned.path, {value for _, value in dangling})
        for (name, value), owner in dangling.items():
            if before.resolve(value) is not None or value in unheard:
                what = name if name == PARENT_LINK else f"`{name}`"
                raise _failed(
                    planned,
                    said(f"{what} {value!r} ", on_its_line(view.rows[owner]), " names no entry"),
                )
        introduced = guard.broken_by(diagnostics, rewritten)
        if introduced:
            raise _failed(planned, _described(introduced[0]))
        # A fix of files beside the session is no fix of the written bytes.
        left = [d for d in diagnostics if applies(d, settings) and _changes_session(d)]
        if not left:
            _check_records_kept(planned, scanned, written)
            _check_still_loaded(planned, scanned, written)
            _check_budget(planned, scanned, written, filename)
            return diagnostics
        rewritten |= _repair_again(planned, written, scanned, left)
    raise _failed(planned, _described(left[0]))


def _check_budget(
    planned: PlannedRepair, result: ScannedFile, written: Path, filename: str
) -> None:
    """A slim's result, loaded as `context` loads a session, is within its budget, and
    its bytes within its size."""
    plan = planned.slimmed
    if plan is None or not plan.needed:
        return
    from sessionfix.slim import loaded_tokens

    with RecordSource(written) as source:
        try:
            plan.after = loaded_tokens(result, source, filename, planned.loader)
        except SessionfixError as refused:
            raise _failed(planned, f"the slimmed session is not loaded: {refused}") from None
    plan.size_after = result.info.size
    if plan.budget is not None and plan.after > plan.budget:
        raise _failed(
            planned,
            f"the slimmed session still loads {plan.after:,} tokens, over the budget "
            f"of {plan.budget:,}",
        )
    if plan.max_size is not None and plan.size_after > plan.max_size:
        raise _failed(
            planned,
            f"the slimmed session still takes {human_bytes(plan.size_after)}, over the size "
            f"limit of {human_bytes(plan.max_size)}",
        )


def _check_still_loaded(planned: PlannedRepair, result: ScannedFile, written: Path) -> None:
    """A repair leaves no session its agent loaded one it does not load at all: records
    a fix brings back from a line the agent could not read may close a parent cycle on
    the path it walks. Asked only of a result whose active path meets a cycle."""
    if not result.view.cycle_on_path:
        return
    with RecordSource(written) as source:
        refused = _refusal(planned, result, source)
    if refused is None:
        return
    with RecordSource(planned.path) as source:
        if _refusal(planned, planned.scanned, source) is None:
            raise _failed(planned, f"the agent would not load the repaired session: {refused}")


def _refusal(planned: PlannedRepair, scanned: ScannedFile, source: RecordSource) -> str | None:
    """Why the agent loads nothing of `scanned`, or None when it loads it."""
    view = scanned.view
    load = planned.loader or package_of(Format(view.format)).loaded_messages
    try:
        for _ in load(view, source, scanned.lines):
            pass
    except LoadRefused as refused:
        return str(refused)
    return None


def _changes_session(diagnostic: Diagnostic) -> bool:
    return diagnostic.fix is not None and diagnostic.fix.changes_session


def _check_records_kept(planned: PlannedRepair, result: ScannedFile, written: Path) -> None:
    """No repair writes fewer whole records than its input holds, less those its
    fixes drop by name and plus those they insert: bytes a fix deletes as damage
    (a line that does not parse alone, a run of junk) must never hold a record."""
    held = whole_records(planned.scanned, planned.path)
    dropped = planned.tally["dropped"]
    inserted = planned.tally["inserted"] + planned.tally["headers"]
    kept = whole_records(result, written)
    if kept < held - dropped + inserted:
        raise _failed(
            planned,
            f"it holds {kept} whole records where {held - dropped + inserted} were due: "
            f"the input's {held}, {dropped} dropped by name, {inserted} inserted",
        )


def _read_result(planned: PlannedRepair, written: Path, name: Path) -> ScannedFile:
    """The written result as a session, read under `name`, the one it is to have
    (what a format reads from a file's name and folder, such as a Claude Code session
    id, is what a later check of it finds: not what a temporary name gives). The first
    pass reuses the kept parts of the input's read (taking them, so that they go
    before a full read) for the byte ranges the result copied, once their digests
    prove them there; later passes, with no parts left, read a result rewritten
    since, all of it."""
    kept, planned.scanned.parts = planned.scanned.parts, None
    runs = planned.plan.copied_runs
    jobs = planned.settings.jobs
    if kept is not None and runs:
        spliced = read_spliced(written, kept, runs, jobs, named_as=name)
        if spliced is not None:
            return spliced
    del kept
    return read_session(
        written,
        _result_format(
            planned,
        ),
        None,
        jobs,
        session_only=False,
        named_as=name,
    )


def _reads_alike(planned: PlannedRepair, name: Path) -> bool:
    """Whether what the format takes from a file's name and folder is the same for
    `name` as for the session's."""
    if name == planned.named_as:
        return True
    fmt = _result_format(
        planned,
    )
    return bool(
        make_adapter(fmt, name, None, name).named
        == make_adapter(fmt, planned.named_as, None, planned.named_as).named
    )


def _result_format(
    planned: PlannedRepair,
) -> Format:
    """The format the result is read as: the one asked for, else the input's, where
    pi's family is told apart again by the result's own signs (its content, and the
    folder it is to lie in), as a later check would."""
    if planned.settings.format is not Format.AUTO:
        return planned.settings.format
    return read_as(Format(planned.format))


def _check_detected(planned: PlannedRepair, written: Path, filename: str, name: Path) -> None:
    """The result must be a fixed point for a later run too, which may read it as
    another format than the input (dropping a first record, or salvaging one, can
    change the detection): then none of that format's fixes may apply to it."""
    detected = detect_format(written)
    same = Format(planned.format)
    if detected in (same, Format.UNKNOWN) or same_package(detected, same):
        return
    with gc_paused():
        scanned = read_session(
            written,
            detected,
            None,
            planned.settings.jobs,
            session_only=False,
            named_as=name,
        )
        later = run_rules(scanned, planned.settings, filename, origin=name, excerpts=False)
    left = [d for d in later if applies(d, planned.settings) and _changes_session(d)]
    if left:
        raise _failed(
            planned,
            said(
                f"the result reads as {detected.value}, the input as {same.value}, and a "
                f"later run would apply {left[0].code} ",
                on_its_line(left[0].row),
            ),
        )


def _repair_again(
    planned: PlannedRepair, written: Path, scanned: ScannedFile, applied: list[Diagnostic]
) -> set[str]:
    """Apply the fixes left in `written` (same mode), replacing it; return the ids of
    the records this pass rewrote."""
    again = written.with_name(written.name + ".next")
    st = os.stat(written)
    try:
        with RecordSource(written) as source:
            plan = RepairPlan(scanned, applied, source, map_rows=planned.tracing)
            with plan.rewriting_ahead(planned.settings.jobs):
                write_new(again, plan.chunks(), mode=stat.S_IMODE(st.st_mode), sync=True)
            if not plan.rows_written:
                raise _failed(planned, _described(applied[0]))
            rewritten = plan.rewritten_ids()
        if planned.trace is not None and plan.row_map is not None:
            offset = len(planned.traced)
            planned.traced.extend((d, planned.trace.origin(d.row)) for d in plan.diagnostics)
            planned.trace.then(plan.row_map, offset)
        chown_best_effort(again, st.st_uid, st.st_gid)
        os.replace(again, written)
    except BaseException:
        with suppress(OSError):
            again.unlink()
        raise
    planned.applied.extend(applied)
    planned.count(plan)
    return rewritten


def _failed(planned: PlannedRepair, problem: str | Said) -> VerificationFailed:
    """The refusal, naming records as the container the result goes to names them."""
    if isinstance(problem, Said):
        problem = problem.text(planned.result_names)
    return VerificationFailed(
        f"{planned.filename}: the repaired file did not pass verification ({problem}); "
        "nothing was written"
    )


class _Invariants:
    """The findings of the input that the rules' invariants compare a result with."""

    def __init__(self, found: list[Diagnostic]) -> None:
        self.kept = {rule.code: rule.invariant for rule in RULES if rule.invariant is not None}
        self.counts = Counter(d.code for d in found if d.code in self.kept)
        self.present = {(d.code, d.entry_id) for d in found if d.code in self.kept}

    def broken_by(self, diagnostics: list[Diagnostic], rewritten: set[str]) -> list[Diagnostic]:
        """The findings of a result that break an invariant, in report order."""
        kept = self.kept
        counts = Counter(d.code for d in diagnostics if d.code in kept)
        more = {code for code, count in counts.items() if count > self.counts[code]}
        broken: list[Diagnostic] = []
        for d in diagnostics:
            invariant = kept.get(d.code)
            if invariant is Invariant.NO_MORE:
                if d.code in more:
                    broken.append(d)
            elif invariant is Invariant.NOT_ON_REWRITTEN and (
                # Positional formats (pi v1) have no ids: the count decides.
                (d.entry_id in rewritten or (d.entry_id is None and d.code in more))
                and (d.code, d.entry_id) not in self.present
            ):
                broken.append(d)
        return broken


def _described(problem: Diagnostic) -> Said:
    return said(f"{problem.code} ", on_its_line(problem.row), ": ") + (
        problem.said or problem.message
    )


def _dangling_names(view: SessionView) -> dict[tuple[str, str], int]:
    """Every (field, name) that names no record → the first record holding it."""
    names: dict[tuple[str, str], int] = {}
    for index in view.dangling():
        names.setdefault((PARENT_LINK, str(view.parent_id(index))), index)
    for index, references in view.references.items():
        for reference in references:
            if view.resolve(reference.target) is None:
                names.setdefault((reference.field, reference.target), index)
    return names


def whole_records(scanned: ScannedFile, path: Path) -> int:
    """How many whole records the file read as `scanned` (its text at `path`) holds:
    those read, and each complete record of its format's shape that ends a damaged
    line (a partial line followed by a full one)."""
    count = len(scanned.view)
    recoverable = [
        finding
        for finding in scanned.lines.findings
        if finding.issue is LineIssue.UNPARSABLE and finding.recoverable is not None
    ]
    if not recoverable:
        return count
    fmt = Format(scanned.view.format)
    with RecordSource(path) as source:
        for finding in recoverable:
            assert finding.recoverable is not None
            start, end = finding.recoverable
            try:
                value = jsonutil.loads(source.read(finding.offset + start, end - start))
            except ValueError:
                continue
            count += has_record_shape(fmt, value)
    return count


def _absent_from(path: Path, names: set[str]) -> set[str]:
    """Those of `names` that the file at `path` never holds as a JSON string."""
    if not names:
        return set()
    quoted = {jsonutil.stringify_bytes(name): name for name in names}
    pattern = re.compile(b"|".join(re.escape(q) for q in sorted(quoted, key=len, reverse=True)))
    absent = set(names)
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return absent
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            for match in pattern.finditer(data):
                absent.discard(quoted[match.group()])
                if not absent:
                    break
    return absent


def verified_in_temp(planned: PlannedRepair, result: RepairResult, filename: str) -> Path:
    """Write the repair to a new file in the system's temporary folder and verify it,
    filling in what `result` says of the written file; the file is gone on failure."""
    handle, name = tempfile.mkstemp(prefix="sessionfix-", suffix=".tmp")
    os.close(handle)
    temp = Path(name)
    try:
        with planned.rewriting_ahead():
            write_new(temp, planned.chunks(), exclusive=False)
        check_input_unchanged(planned)
        result.remaining = verify(planned, temp, filename)
        result.output_size = temp.stat().st_size
    except BaseException:
        with suppress(OSError):
            temp.unlink()
        raise
    return temp
