"""Repairing a session file: scan it, apply the chosen fixes, write, verify.

`plan_repair` reads a file, runs every rule and turns the fixes that apply into a
`RepairPlan`. The repaired bytes then go to a new file (`repair_to`), to a stream
(`repair_to_stream`) or over the original (`repair_in_place`). Every written result
is read back and checked before it takes a path (rules.md §1 step 7): no fix that
applies may remain, and no reference may dangle that did not dangle before.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import shutil
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, Final

import msgspec
from msgspec import Struct, field

from sessionfix import jsonutil, stores
from sessionfix.diagnostics import (
    SORT_KEY,
    Applicability,
    Diagnostic,
    Edit,
    EditOp,
    EndedLine,
    RemovedLine,
    WrittenLine,
)
from sessionfix.engine import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PROBLEMS,
    Inapplicable,
    Notices,
    check_file,
    exit_code,
    inapplicable,
    run_rules,
    shared_files,
)
from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.formats import Format, has_record_shape, make_adapter
from sessionfix.formats.pi.location import is_openclaw_location
from sessionfix.interrupts import signals_deferred
from sessionfix.model.view import SessionView
from sessionfix.read.compressed import (
    compress_file,
    compressed_chunks,
    is_compressed,
    scaled_progress,
    session_name,
    session_text,
)
from sessionfix.read.reader import LineIssue, RecordSource
from sessionfix.repair import summary
from sessionfix.repair.plan import CopiedRange, RepairPlan
from sessionfix.repair.rowmap import PREFIX_ROW, RepairTrace
from sessionfix.rules import RULES, rule_of
from sessionfix.rules.base import Counted, Invariant
from sessionfix.safety.backups import OwnWrite
from sessionfix.safety.locks import rewrite_access
from sessionfix.safety.writing import (
    FileChanged,
    Snapshot,
    WriteFailed,
    WriteRefused,
    cannot_write,
    chown_best_effort,
    file_digest,
    open_for_writing,
    read_backup_name,
    record_result,
    remove_dead_temps,
    replace_file,
    same_file,
    snapshot,
    temp_path,
)
from sessionfix.scan.cores import default_workers
from sessionfix.scan.scanner import (
    ProgressCallback,
    ScannedFile,
    detect_format,
    gc_paused,
    read_session,
)
from sessionfix.scan.splice import read_spliced
from sessionfix.scan.workers import OrderedWorkers, WorkerDied
from sessionfix.settings import Settings
from sessionfix.units import BYTES_PER_TOKEN

PARENT_LINK: Final = "parent link"
WRITE_BUFFER: Final = 1 << 20
SWAP_SETTLE_SECONDS: Final = 0.05
"""Time given to appends in flight at the rename before the replaced file is checked."""
MAX_REDOS: Final = 3
"""Repairs of a file that grew while it was repaired, before giving up (§8.2 step 8)."""
MAX_PASSES: Final = 8
"""Checks of the written result before verification gives up (see `PlannedRepair.verify`).
Every further pass must change the file; real sessions need one, rare shapes three."""


class VerificationFailed(SessionfixError):
    """The repaired bytes did not pass the check; nothing was written in their place."""


def applies(diagnostic: Diagnostic, settings: Settings) -> bool:
    """Whether `repair` applies this diagnostic's fix under `settings`."""
    fix = diagnostic.fix
    if fix is None:
        return False
    rule = rule_of(diagnostic.code)
    if rule is not None and rule.prunes_to_leaf:
        return settings.prune_to_leaf
    return fix.applicability is Applicability.SAFE or settings.unsafe_fixes


class RepairResult(Struct):
    """What a repair did to one file."""

    path: Path
    filename: str
    format: str
    found: list[Diagnostic]
    """Diagnostics of the input."""
    applied: list[Diagnostic]
    """Those whose fixes were applied."""
    remaining: list[Diagnostic] = field(default_factory=list)
    """Diagnostics of the output (what a check of the repaired file reports)."""
    changed: bool = False
    input_size: int = 0
    output_size: int = 0
    tally: Counter[str] = field(default_factory=Counter)
    """What the fixes of every pass did: "dropped", "inserted", and per rule code."""
    backup: Path | None = None
    output: Path | None = None
    redone: int = 0
    """Times an in-place repair started again because the file grew meanwhile."""
    carried_over: int = 0
    """Bytes a writer appended during the swap, carried over to the repaired file."""
    inapplicable: tuple[Inapplicable, ...] = ()
    """Rules selected by code that the file's format cannot run."""
    unsettled: str | None = None
    """Why lines an agent appended during an in-place repair were left as written: not
    checked (the file kept changing), or not carried over (then they are in the backup)."""
    session_id: str = ""
    """In a session store: the session repaired."""

    @property
    def dropped_entries(self) -> int:
        return self.tally["dropped"]

    @property
    def inserted_records(self) -> int:
        return self.tally["inserted"]

    @property
    def reads_pruned(self) -> int:
        return self.counted(Counted.STALE_READS_PRUNED)

    @property
    def lines_split(self) -> int:
        return self.counted(Counted.GLUED_LINES_SPLIT)

    def counted(self, what: Counted) -> int:
        """Applied fixes of the rules the summary counts as `what`."""
        return sum(
            count
            for code, count in self.tally.items()
            if (rule := rule_of(code)) is not None and rule.counted is what
        )

    @property
    def bytes_saved(self) -> int:
        return self.input_size - self.output_size

    @property
    def tokens_saved(self) -> int:
        """Estimate: bytes no longer sent, at about four bytes per token."""
        return max(0, self.bytes_saved) // BYTES_PER_TOKEN


class PlannedRepair:
    """A file read and its fixes decided; nothing written yet."""

    def __init__(
        self,
        path: Path,
        settings: Settings,
        filename: str | None = None,
        progress: ProgressCallback | None = None,
        *,
        trace: bool = False,
    ) -> None:
        self.origin = path
        """The session as given (compressed if its name ends in `.zst`)."""
        self.path = path
        """Where its text is read: `origin`, or a decompressed copy of it."""
        self.settings = settings
        self.filename = filename or str(path)
        self.tracing = trace
        self.trace: RepairTrace | None = None
        """With `trace`, once verified: where every row of the result comes from."""
        self.traced: list[tuple[Diagnostic, int]] = []
        """With `trace`: every applied diagnostic of every pass, in the order the trace's
        causes count them, with the input row it concerns."""
        self.stored: tuple[int, int] | None = None
        """The compressed session's (size, mtime) before it was decompressed."""
        self._stored_mode: int | None = None
        if is_compressed(path):
            with suppress(OSError):
                st = os.stat(path)
                self.stored = (st.st_size, st.st_mtime_ns)
                self._stored_mode = stat.S_IMODE(st.st_mode)
        self.named_as = session_name(path)
        """The name and folder the session is read under."""
        with ExitStack() as text:
            self.path = text.enter_context(session_text(path))
            with gc_paused():
                self.scanned = read_session(
                    self.path,
                    settings.format,
                    scaled_progress(progress, path, self.path),
                    settings.jobs,
                    keep_parts=True,
                    named_as=self.named_as,
                )
                self.found = run_rules(self.scanned, settings, self.filename)
            self.applied = [d for d in self.found if applies(d, settings)]
            """Fixes applied, including those a later pass applied to the written result."""
            self.source = RecordSource(self.path)
            self.plan = RepairPlan(self.scanned, self.applied, self.source, map_rows=trace)
            self.tally: Counter[str] = Counter()
            """What the plans of every pass do (see `RepairResult.tally`)."""
            self._count(self.plan)
            if self.scanned.parts is not None:
                self.scanned.parts = self.scanned.parts.untouched(self.plan.changed_rows())
            self._text = text.pop_all()

    @property
    def compressed(self) -> bool:
        """The session is stored compressed (read through a decompressed copy)."""
        return self.path != self.origin

    def stored_unchanged(self) -> bool:
        """Whether the compressed session is still what was decompressed (True for a
        plain one)."""
        if not self.compressed:
            return True
        try:
            st = os.stat(self.origin)
        except OSError:
            return False
        return (st.st_size, st.st_mtime_ns) == self.stored

    def keep_text(self) -> ExitStack:
        """Hand over the decompressed copy (if any): it stays until the stack is closed,
        not when this repair is."""
        text, self._text = self._text, ExitStack()
        return text

    @property
    def format(self) -> str:
        return self.scanned.view.format

    @property
    def mode(self) -> int:
        if self._stored_mode is not None:  # not that of the private decompressed copy
            return self._stored_mode
        return stat.S_IMODE(self.scanned.info.mode)

    @property
    def changes_anything(self) -> bool:
        return not self.plan.is_empty()

    def chunks(self) -> Iterator[bytes]:
        return self.plan.chunks()

    def pieces(self) -> Iterator[bytes | CopiedRange]:
        return self.plan.pieces()

    def rewriting_ahead(self) -> AbstractContextManager[None]:
        """Workers rewrite records ahead of `chunks()` and `pieces()` while this is open
        (`RepairPlan.rewriting_ahead`)."""
        return self.plan.rewriting_ahead(self.settings.jobs)

    def result(self) -> RepairResult:
        return RepairResult(
            path=self.origin,
            filename=self.filename,
            format=self.format,
            found=self.found,
            applied=self.applied,
            input_size=self.scanned.info.size,
            inapplicable=inapplicable(self.settings, self.scanned.view),
            tally=self.tally,
        )

    def _count(self, plan: RepairPlan) -> None:
        self.tally.update(plan.codes)
        self.tally["dropped"] += plan.dropped_entries
        self.tally["inserted"] += plan.inserted_records
        self.tally["headers"] += plan.header is not None

    def _copied_exactly(self, written: Path) -> bool:
        """The written copy has the input's size and digest (a hash pass over two files
        in the page cache, several times cheaper than reading the copy as a session)."""
        try:
            with open(written, "rb") as copy, open(self.path, "rb") as original:
                size = self.scanned.info.size
                if os.fstat(copy.fileno()).st_size != size:
                    return False
                return file_digest(copy) == file_digest(original, size)
        except OSError:
            return False

    def verify(
        self, written: Path, filename: str, named_as: Path | None = None
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
        settings = self.settings
        named = named_as or self.named_as
        if (
            self.plan.is_empty()
            and not self.tracing
            and self._reads_alike(named)
            and self._copied_exactly(written)
        ):
            # The copy is the input byte for byte (nothing applies), and its name tells
            # its reader what the session's tells: it reads as the input just did. Only
            # the rules, some of which read the name itself, run again if it differs.
            self.scanned.parts = None
            if named == self.named_as:
                return [msgspec.structs.replace(d, filename=filename) for d in self.found]
            with gc_paused():
                return run_rules(self.scanned, settings, filename, origin=named)
        before = self.scanned.view
        dangled = _dangling_names(before)
        guard = _Invariants(self.found)
        rewritten = self.plan.rewritten_ids()
        if self.tracing:
            assert self.plan.row_map is not None, "verify() follows a write of chunks()"
            self.trace = RepairTrace(self.plan.row_map)
            self.traced = [(d, d.row) for d in self.plan.diagnostics]
        for _ in range(MAX_PASSES):
            with gc_paused():
                scanned = self._read_result(written, named)
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
                self._check_detected(written, filename, named)
            dangling = {
                key: owner for key, owner in _dangling_names(view).items() if key not in dangled
            }
            # A name that named nothing in the input is inherited when the input holds it
            # (written so by the agent, or on a record a fix brought back from a damaged
            # line); one that named a record there, or appears nowhere, is the repair's.
            unheard = _absent_from(self.path, {value for _, value in dangling})
            for (name, value), owner in dangling.items():
                if before.resolve(value) is not None or value in unheard:
                    what = name if name == PARENT_LINK else f"`{name}`"
                    raise self._failed(
                        f"{what} {value!r} on its line {view.rows[owner]} names no entry"
                    )
            introduced = guard.broken_by(diagnostics, rewritten)
            if introduced:
                raise self._failed(_described(introduced[0]))
            left = [d for d in diagnostics if applies(d, settings)]
            if not left:
                self._check_records_kept(scanned, written)
                return diagnostics
            rewritten |= self._repair_again(written, scanned, left)
        raise self._failed(_described(left[0]))

    def _check_records_kept(self, result: ScannedFile, written: Path) -> None:
        """No repair writes fewer whole records than its input holds, less those its
        fixes drop by name and plus those they insert: bytes a fix deletes as damage
        (a line that does not parse alone, a run of junk) must never hold a record."""
        held = whole_records(self.scanned, self.path)
        dropped = self.tally["dropped"]
        inserted = self.tally["inserted"] + self.tally["headers"]
        kept = whole_records(result, written)
        if kept < held - dropped + inserted:
            raise self._failed(
                f"it holds {kept} whole records where {held - dropped + inserted} were due: "
                f"the input's {held}, {dropped} dropped by name, {inserted} inserted"
            )

    def _read_result(self, written: Path, name: Path) -> ScannedFile:
        """The written result as a session, read under `name`, the one it is to have
        (what a format reads from a file's name and folder, such as a Claude Code session
        id, is what a later check of it finds: not what a temporary name gives). The first
        pass reuses the kept parts of the input's read (taking them, so that they go
        before a full read) for the byte ranges the result copied, once their digests
        prove them there; later passes, with no parts left, read a result rewritten
        since, all of it."""
        kept, self.scanned.parts = self.scanned.parts, None
        runs = self.plan.copied_runs
        jobs = self.settings.jobs
        if kept is not None and runs:
            spliced = read_spliced(written, kept, runs, jobs, named_as=name)
            if spliced is not None:
                return spliced
        del kept
        return read_session(
            written,
            self._result_format(),
            None,
            jobs,
            session_only=False,
            named_as=name,
        )

    def _reads_alike(self, name: Path) -> bool:
        """Whether what the format takes from a file's name and folder is the same for
        `name` as for the session's."""
        if name == self.named_as:
            return True
        fmt = self._result_format()
        return bool(
            make_adapter(fmt, name, None, name).named
            == make_adapter(fmt, self.named_as, None, self.named_as).named
        )

    def _result_format(self) -> Format:
        """The format the result is read as: the one asked for, else the input's, where
        pi's family is told apart again by the result's own signs (its content, and the
        folder it is to lie in), as a later check would."""
        if self.settings.format is not Format.AUTO:
            return self.settings.format
        detected = Format(self.format)
        return Format.PI if detected.is_pi_family else detected

    def _check_detected(self, written: Path, filename: str, name: Path) -> None:
        """The result must be a fixed point for a later run too, which may read it as
        another format than the input (dropping a first record, or salvaging one, can
        change the detection): then none of that format's fixes may apply to it."""
        detected = detect_format(written)
        same = Format(self.format)
        if detected in (same, Format.UNKNOWN) or (detected.is_pi_family and same.is_pi_family):
            return
        with gc_paused():
            scanned = read_session(
                written,
                detected,
                None,
                self.settings.jobs,
                session_only=False,
                named_as=name,
            )
            later = run_rules(scanned, self.settings, filename, origin=name, excerpts=False)
        left = [d for d in later if applies(d, self.settings)]
        if left:
            raise self._failed(
                f"the result reads as {detected.value}, the input as {same.value}, and a "
                f"later run would apply {left[0].code} on its line {left[0].row}"
            )

    def _repair_again(
        self, written: Path, scanned: ScannedFile, applied: list[Diagnostic]
    ) -> set[str]:
        """Apply the fixes left in `written` (same mode), replacing it; return the ids of
        the records this pass rewrote."""
        again = written.with_name(written.name + ".next")
        st = os.stat(written)
        try:
            with RecordSource(written) as source:
                plan = RepairPlan(scanned, applied, source, map_rows=self.tracing)
                with plan.rewriting_ahead(self.settings.jobs):
                    _write_new(again, plan.chunks(), mode=stat.S_IMODE(st.st_mode), sync=True)
                if not plan.rows_written:
                    raise self._failed(_described(applied[0]))
                rewritten = plan.rewritten_ids()
            if self.trace is not None and plan.row_map is not None:
                offset = len(self.traced)
                self.traced.extend((d, self.trace.origin(d.row)) for d in plan.diagnostics)
                self.trace.then(plan.row_map, offset)
            chown_best_effort(again, st.st_uid, st.st_gid)
            os.replace(again, written)
        except BaseException:
            with suppress(OSError):
                again.unlink()
            raise
        self.applied.extend(applied)
        self._count(plan)
        return rewritten

    def _failed(self, problem: str) -> VerificationFailed:
        return VerificationFailed(
            f"{self.filename}: the repaired file did not pass verification ({problem}); "
            "nothing was written"
        )

    def close(self) -> None:
        self.source.close()
        self._text.close()


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


def _described(problem: Diagnostic) -> str:
    return f"{problem.code} on its line {problem.row}: {problem.message}"


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


def plan_repair(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
) -> PlannedRepair:
    """Read a file and decide its fixes. Raises `InputError` when it cannot be read."""
    return PlannedRepair(Path(path), settings or Settings(), filename, progress)


def repair_to(
    path: str | Path,
    output: str | Path,
    settings: Settings | None = None,
    *,
    replace: bool = False,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
    named_as: Path | None = None,
) -> RepairResult:
    """Write the repaired copy of `path` to `output`, a new file (or, if `replace`, a
    file that exists and is replaced); zstd-compressed when its name ends in `.zst`.
    The copy is checked as it reads under its own name and folder (what some formats
    read from them), or under `named_as` when it stands for a file named so.

    The copy is written beside `output` under a temporary name, verified, then renamed
    into place, so `output` never holds unverified bytes. A symbolic link is written
    through (its target is replaced, not the link); an existing FIFO or device gets the
    verified bytes streamed into it.
    """
    output = Path(output)
    target = Path(os.path.realpath(output))
    try:
        st = os.stat(output)  # through links, as opening it would (/dev/stdout to a pipe)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise WriteFailed(f"{output}: cannot write ({described(exc)})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise WriteFailed(f"{output}: is a directory")
    existing = st is not None and stat.S_ISREG(st.st_mode)
    if existing and not replace and not same_file(target, Path(path)):
        raise WriteRefused(f"{output}: exists (--force to replace it)")
    if st is not None and not stat.S_ISREG(st.st_mode):
        with _open_special(output) as stream:
            result = repair_to_stream(path, stream, settings, filename=filename, progress=progress)
        result.output = output
        return result
    planned = plan_repair(path, settings, filename=filename, progress=progress)
    try:
        if st is not None and os.path.samefile(target, planned.origin):
            raise SessionfixError(f"{output}: is the input file (use --in-place to rewrite it)")
        result = planned.result()
        temp = temp_path(target)
        packed = temp.with_name(temp.name + ".zst")
        try:
            with planned.rewriting_ahead():
                _write_new(
                    temp, planned.pieces(), mode=planned.mode, shown=output, source=planned.source
                )
            _check_input_unchanged(planned)
            result.remaining = planned.verify(
                temp, str(output), named_as=named_as or session_name(target)
            )
            result.output_size = temp.stat().st_size
            if is_compressed(output):
                try:
                    compress_file(temp, packed, planned.mode)
                except OSError as exc:
                    raise WriteFailed(
                        f"{output}: cannot write the repaired file ({described(exc)})"
                    ) from None
                temp.unlink()
                temp = packed
            _publish(temp, target, output, replace=replace)
        except BaseException:
            for leftover in (temp, packed):
                with suppress(OSError):
                    leftover.unlink()
            raise
        result.changed = planned.changes_anything
        result.output = output
        return result
    finally:
        planned.close()


def _publish(temp: Path, target: Path, output: Path, *, replace: bool) -> None:
    """Give the verified copy its name: renamed over the target when replacing is allowed,
    else linked, which fails rather than overwrite a file that appeared meanwhile."""
    try:
        if replace:
            os.replace(temp, target)
            return
        try:
            os.link(temp, target)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            # A file system without hard links: claim the name, then rename over the claim.
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            os.replace(temp, target)
            return
    except FileExistsError:
        raise WriteRefused(f"{output}: exists (--force to replace it)") from None
    except OSError as exc:
        raise WriteFailed(f"{output}: cannot write ({described(exc)})") from None
    with suppress(OSError):
        temp.unlink()


_NO_HARD_LINKS: Final = frozenset(
    {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}
)


@contextmanager
def _open_special(output: Path) -> Iterator[BinaryIO]:
    """Open a FIFO or device for writing without waiting for a reader that never comes."""
    try:
        stream = open_for_writing(output)
    except OSError as exc:
        raise WriteFailed(f"{output}: cannot write ({cannot_write(exc)})") from None
    with stream:
        yield stream


def repair_to_stream(
    path: str | Path,
    stream: BinaryIO,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
) -> RepairResult:
    """Write the repaired copy of `path` to a stream, after verifying it in a temp file."""
    planned = plan_repair(path, settings, filename=filename, progress=progress)
    try:
        result = planned.result()
        temp = _verified_in_temp(planned, result, filename or str(path))
        try:
            with open(temp, "rb") as verified:
                try:
                    shutil.copyfileobj(verified, stream, 1 << 20)
                    stream.flush()
                except BrokenPipeError:
                    raise
                except OSError as exc:
                    raise WriteFailed(
                        f"{filename or path}: cannot write the repaired copy to the output "
                        f"stream ({described(exc)})"
                    ) from None
        finally:
            with suppress(OSError):
                temp.unlink()
        result.changed = planned.changes_anything
        return result
    finally:
        planned.close()


_COMPARE_BLOCK: Final = 1 << 20
"""Bytes compared at a time when checking that a written line is an input line."""


class RepairPreview:
    """What a repair of one file would write, verified like any repair, in a temporary
    file that nothing else sees; with where each of its changes comes from. `--diff`
    and the JSON plan are built from it, so they show exactly what `-o` would write."""

    def __init__(self, planned: PlannedRepair, result: RepairResult, output: Path | None):
        self.path = planned.origin
        self.input = planned.path
        """The input's text (a decompressed copy of a compressed session, kept until the
        preview is closed)."""
        self._text = planned.keep_text()
        self.result = result
        self.output = output
        """The repaired bytes (None when the repair changes nothing)."""
        self.input_size = planned.scanned.lines.size
        self._lines = planned.scanned.lines
        self.trace = planned.trace
        self._traced = planned.traced
        self._first_pass = len(planned.plan.diagnostics)
        self._source: RecordSource | None = None
        self.located: Callable[[list[Diagnostic]], list[Diagnostic]] | None = None
        """Names the plan's findings by the session store the input was read from."""

    def keep(self, stack: ExitStack) -> None:
        """Close `stack` (what the input's text needs) when the preview is closed."""
        self._text.callback(stack.close)

    @property
    def changes_anything(self) -> bool:
        return self.output is not None

    def planned(self, filename: str) -> list[Diagnostic]:
        """Every fix the repair applies, in every pass, as the plan of the input: each on
        the input row it concerns, with the edits of the written result that its
        decisions cause (follow-on changes included: a child re-linked past a dropped
        record is listed with the drop). A line several fixes change is listed once,
        whole, with the first of them (in the order of the rule catalogue), so that
        applying every edit of the plan to the input gives the written result."""
        if self.trace is None or self.output is None:
            return []
        trace = self.trace
        with open(self.output, "rb") as handle:
            located = trace.locate(handle)
        edits: dict[int, list[Edit]] = {}
        source = self._source = self._source or RecordSource(self.output)
        lines = self._lines
        unterminated = 0 if lines.final_newline else lines.line_count
        for k in range(len(trace)):
            row = trace.rows[k]
            written = located.get(row, [])
            change = _edits_of(row, written, source, trace.spans[k])
            if row == unterminated and written:
                offset, length, end = written[0]
                if end and self._is_last_line(offset, length):
                    change[0] = EndedLine(row, end=end)
            edits.setdefault(min(trace.causes(k)), []).extend(change)
        listed: list[Diagnostic] = []
        for cause, (diagnostic, row) in enumerate(self._traced):
            fix = diagnostic.fix
            assert fix is not None
            first_pass = cause < self._first_pass
            listed.append(
                Diagnostic(
                    code=diagnostic.code,
                    name=diagnostic.name,
                    severity=diagnostic.severity,
                    message=diagnostic.message,
                    said=diagnostic.said,
                    filename=filename,
                    row=row,
                    column=diagnostic.column if first_pass else 1,
                    entry_id=diagnostic.entry_id,
                    fix=msgspec.structs.replace(fix, edits=tuple(edits.get(cause, ()))),
                    format=diagnostic.format,
                    span=diagnostic.span if first_pass else None,
                    source=diagnostic.source if first_pass else None,
                    excerpt=diagnostic.excerpt if first_pass else None,
                    end_row=diagnostic.end_row if first_pass else None,
                )
            )
        return listed if self.located is None else self.located(listed)

    def _is_last_line(self, offset: int, length: int) -> bool:
        """Whether the written bytes at `offset` are exactly the input's unterminated last
        line, compared a block at a time (a last line can be a huge record)."""
        assert self.output is not None
        start = self.input_size - length
        if start < 0:
            return False
        with open(self.input, "rb") as before, open(self.output, "rb") as after:
            if start:
                before.seek(start - 1)
                if before.read(1) != b"\n":
                    return False
            else:
                before.seek(0)
            after.seek(offset)
            left = length
            while left:
                block = min(left, _COMPARE_BLOCK)
                if before.read(block) != after.read(block):
                    return False
                left -= block
        return True

    def close(self) -> None:
        if self._source is not None:
            self._source.close()
        if self.output is not None:
            with suppress(OSError):
                self.output.unlink()
        self._text.close()


def _edits_of(
    row: int, lines: list[tuple[int, int, str]], source: RecordSource, span: int = 1
) -> list[Edit]:
    """An input row's change as edits: dropped, replaced by its first new line and the
    rest inserted after it; lines written before the first row go after row 0. Each
    names the terminator written after it, and keeps its exact bytes for the JSON. The
    `span - 1` rows after it that the change covers (a run changed as one) go, in one
    edit."""

    def edit(op: EditOp, line: tuple[int, int, str]) -> Edit:
        offset, length, end = line

        def raw() -> bytes:
            return source.read(offset, length)

        return WrittenLine(
            row, lambda: raw().decode("utf-8", "replace"), placement=op, raw=raw, end=end
        )

    if row == PREFIX_ROW:
        return [edit(EditOp.INSERT_AFTER, line) for line in lines]
    last = row + span - 1
    if not lines:
        return [RemovedLine(row, last=last if span > 1 else None)]
    first, *rest = lines
    covered = [RemovedLine(row + 1, last=last if span > 2 else None)] if span > 1 else []
    return [
        edit(EditOp.REPLACE, first),
        *(edit(EditOp.INSERT_AFTER, line) for line in rest),
        *covered,
    ]


def preview_repair(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
) -> RepairPreview:
    """Repair `path` into a temporary file and verify it, as `repair_to` would, without
    writing anywhere else; close the preview to remove the file."""
    planned = PlannedRepair(Path(path), settings or Settings(), filename, progress, trace=True)
    try:
        result = planned.result()
        if not planned.changes_anything:
            result.remaining = planned.found
            result.output_size = result.input_size
            return RepairPreview(planned, result, None)
        temp = _verified_in_temp(planned, result, filename or str(path))
        result.changed = True
        return RepairPreview(planned, result, temp)
    finally:
        planned.close()


def _verified_in_temp(planned: PlannedRepair, result: RepairResult, filename: str) -> Path:
    """Write the repair to a new file in the system's temporary folder and verify it,
    filling in what `result` says of the written file; the file is gone on failure."""
    handle, name = tempfile.mkstemp(prefix="sessionfix-", suffix=".tmp")
    os.close(handle)
    temp = Path(name)
    try:
        with planned.rewriting_ahead():
            _write_new(temp, planned.chunks(), exclusive=False)
        _check_input_unchanged(planned)
        result.remaining = planned.verify(temp, filename)
        result.output_size = temp.stat().st_size
    except BaseException:
        with suppress(OSError):
            temp.unlink()
        raise
    return temp


def repair_in_place(
    path: str | Path,
    settings: Settings | None = None,
    *,
    backup: bool = True,
    force: bool = False,
    follow_symlinks: bool = False,
    break_stale_lock: bool = False,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
) -> RepairResult:
    """Rewrite `path` with its repair by the safe-replace recipe (cli-and-safety.md §8).

    Refuses symbolic links unless `follow_symlinks`, and unless `force` hard-linked files
    and a file another process holds open for writing (checked before the work and again
    just before the swap). A file an agent may be writing is refused too: an OpenClaw
    session is repaired under OpenClaw's own write lock (a stale one is broken only with
    `break_stale_lock`); any session is refused while it is locked or changed within the
    quiescence window. The repaired bytes are verified before they replace the original,
    which stays as a hard-linked backup unless `backup` is false. A file that only grew
    meanwhile is repaired again with the appended lines (at most `MAX_REDOS` times); any
    other change leaves it untouched.
    """
    path = Path(path)
    settings = settings or Settings()
    original = snapshot(path, allow_hard_links=force, follow_symlinks=follow_symlinks)
    target = original.path
    name = filename or str(path)
    openclaw = settings.format is Format.OPENCLAW or is_openclaw_location(target)
    own = OwnWrite.of(target)
    with rewrite_access(
        target,
        shown=path,
        quiescence=settings.quiescence,
        openclaw=openclaw,
        break_stale_lock=break_stale_lock,
        allow_writers=force,
        written_by_us=own,
    ):
        # Taken again under the locks: another sessionfix run may have just replaced it.
        original = snapshot(path, allow_hard_links=force, follow_symlinks=follow_symlinks)
        if original.path != target:
            raise FileChanged(f"{name}: its link changed while waiting; left untouched", grew=False)
        if own.seen is not None and not original.matches(own.seen):
            raise FileChanged(f"{name}: changed while being repaired; left untouched", grew=False)
        remove_dead_temps(target)
        redone = 0
        earlier: RepairResult | None = None
        """The account of the attempts that replaced the file so far."""
        replaced: list[_ReplacedFile] = []
        """Every file an attempt replaced, watched for lines written to it late."""
        written: str | None = None
        """The digest of what the file holds as this run left it (None: not known)."""
        while True:
            attempt = _InPlaceAttempt(target, original, settings, name, progress, force)
            try:
                result = attempt.run()
            except SessionfixError as exc:
                if earlier is not None:
                    # The file already holds the repair: say what is left, not "untouched".
                    earlier.unsettled = _why_unsettled(exc)
                    return _finished(earlier, target, replaced, redone, backup, written)
                if not isinstance(exc, FileChanged):
                    raise
                if not exc.grew or not attempt.prefix_unchanged():
                    raise FileChanged(
                        f"{name}: changed while being repaired; left untouched", grew=False
                    ) from None
                if redone == MAX_REDOS:
                    raise FileChanged(
                        f"{name}: kept growing while being repaired ({MAX_REDOS + 1} tries); "
                        "left untouched",
                        grew=True,
                    ) from None
            else:
                if result.backup is not None:
                    written = _result_digest(target, result.backup)
                    replaced.append(_ReplacedFile(result.backup, original.size, attempt.digest))
                    # An append opened before the rename lands on the old file: let the
                    # ones in flight land before looking for them.
                    time.sleep(SWAP_SETTLE_SECONDS)
                elif earlier is not None and original.size == earlier.output_size:
                    written = attempt.digest  # the lines carried over needed no change
                earlier = result if earlier is None else _merged(earlier, result)
                carried = sum(_carry_late_lines(late, target, earlier) for late in replaced)
                if carried:
                    written = None
                if not carried or redone == MAX_REDOS or earlier.unsettled:
                    if carried and not earlier.unsettled:
                        earlier.unsettled = (
                            f"{carried} bytes written during the last swap were carried over "
                            "unchecked"
                        )
                    return _finished(earlier, target, replaced, redone, backup, written)
            redone += 1
            original = snapshot(target, allow_hard_links=force)


class _ReplacedFile(Struct):
    """A file an attempt replaced, through the backup link that keeps it: a writer that
    opened it before the rename may still append to it."""

    backup: Path
    read: int
    """How many of its bytes the attempt read (and repaired)."""
    digest: str
    """Their `file_digest`."""
    carried: int = 0
    """Bytes past `read` already carried over to the session."""
    checked: bool = False
    kept: bool = False
    """Holds bytes that could not be carried over: its link stays."""


def _carry_late_lines(late: _ReplacedFile, target: Path, result: RepairResult) -> int:
    """Append to `target` what was written to a replaced file after it was read; return
    how many bytes. When its first bytes changed, nothing is carried (it says so)."""
    try:
        with open(late.backup, "rb") as old:
            grown = os.fstat(old.fileno()).st_size
            start = late.read + late.carried
            if grown <= start:
                return 0
            if not late.checked:
                if file_digest(old, late.read) != late.digest:
                    late.kept = True
                    result.unsettled = (
                        f"the file was rewritten during the swap; its new bytes are in "
                        f"{late.backup.name}"
                    )
                    return 0
                late.checked = True
            old.seek(start)
            fd = os.open(target, os.O_WRONLY | os.O_APPEND)
            with os.fdopen(fd, "ab", buffering=0) as out:
                shutil.copyfileobj(old, out, WRITE_BUFFER)
                os.fsync(out.fileno())
    except OSError as exc:
        late.kept = True
        result.unsettled = (
            f"lines written during the swap could not be carried over ({described(exc)}); "
            f"they are in {late.backup.name}"
        )
        return 0
    late.carried = grown - late.read
    result.carried_over += grown - start
    result.output_size += grown - start
    return grown - start


def _finished(
    result: RepairResult,
    target: Path,
    replaced: list[_ReplacedFile],
    redone: int,
    backup: bool,
    written: str | None,
) -> RepairResult:
    """Keep the backup of the original if asked (or if lines written late are only
    there), its name recording what the file now holds when that is known (`written`);
    drop the links to the intermediate files, whose late lines are carried."""
    result.redone = redone
    for number, late in enumerate(replaced):
        if late.kept or (number == 0 and (backup or result.unsettled)):
            if number == 0 and written is not None:
                renamed = record_result(target, late.backup, written)
                if result.backup == late.backup:
                    result.backup = renamed
            continue
        with suppress(OSError):
            late.backup.unlink()
    if not backup and not result.unsettled:
        result.backup = None
    return result


def _result_digest(target: Path, backup: Path) -> str | None:
    """The digest of the content that replaced a backup, as its name records it."""
    name = read_backup_name(target.name, backup.name)
    return None if name is None or name.record is None else name.record.result


def _why_unsettled(error: SessionfixError) -> str:
    """The reason a check of lines carried over did not finish, without the "nothing was
    written" of a failed first attempt (the repair is in place by then)."""
    text = str(error)
    for tail in ("; left untouched", "; nothing was written"):
        text = text.removesuffix(tail)
    return text


def _merged(earlier: RepairResult, later: RepairResult) -> RepairResult:
    """One account of an attempt that changed the file and the repair, after lines were
    carried over, of what it wrote (whose backup, if any, is another, later one)."""
    earlier.applied.extend(later.applied)
    earlier.tally.update(later.tally)
    earlier.remaining = later.remaining
    earlier.output_size = later.output_size
    earlier.changed = earlier.changed or later.changed
    earlier.backup = earlier.backup or later.backup
    return earlier


class _InPlaceAttempt:
    """One read-repair-replace of a file, and what it left to check afterwards."""

    def __init__(
        self,
        target: Path,
        original: Snapshot,
        settings: Settings,
        filename: str,
        progress: ProgressCallback | None,
        allow_writers: bool,
    ) -> None:
        self.target = target
        self.original = original
        self.settings = settings
        self.filename = filename
        self.progress = progress
        self.allow_writers = allow_writers
        self.digest = ""

    def run(self) -> RepairResult:
        original = self.original
        with open(self.target, "rb") as old:
            if os.fstat(old.fileno()).st_ino != original.inode:
                raise FileChanged(f"{self.target}: replaced meanwhile", grew=False)
            digest = file_digest(old, original.size)
            if digest is None:
                raise FileChanged(f"{self.target}: changed while being read", grew=False)
            self.digest = digest
            planned = plan_repair(
                self.target, self.settings, filename=self.filename, progress=self.progress
            )
            try:
                result = planned.result()
                info = planned.scanned.info
                if planned.compressed:
                    if planned.stored != (original.size, original.mtime_ns):
                        raise FileChanged(f"{self.target}: changed while being read", grew=False)
                elif (info.size, info.mtime_ns) != (original.size, original.mtime_ns):
                    raise FileChanged(
                        f"{self.target}: changed while being read", grew=info.size > original.size
                    )
                if not planned.changes_anything:
                    result.output_size = result.input_size
                    result.remaining = planned.found
                    result.output = self.target
                    return result
                sizes: list[int] = []
                remaining: list[Diagnostic] = []

                def verify(temp: Path) -> None:
                    remaining.extend(planned.verify(temp, result.filename))
                    sizes.append(temp.stat().st_size)

                def verify_compressed(temp: Path) -> None:
                    # The compressed result is checked as written: decompressed again.
                    with session_text(temp, compressed=True, name=planned.path.name) as text:
                        before = os.stat(text)
                        verify(text)
                        if _replaced(text, before):  # a later pass repaired it again
                            _compress_over(text, temp)

                # A backup is taken even when not asked for, and dropped at the end:
                # until then, lines written to the old file late are only there.
                with planned.rewriting_ahead():
                    chunks = planned.chunks()
                    result.backup = replace_file(
                        original,
                        compressed_chunks(chunks) if planned.compressed else chunks,
                        verify=verify_compressed if planned.compressed else verify,
                        original_digest=self.digest,
                        allow_writers=self.allow_writers,
                    )
            finally:
                planned.close()
        result.output_size = sizes[0]
        result.remaining = remaining
        result.changed = True
        result.output = self.target
        return result

    def prefix_unchanged(self) -> bool:
        """Whether the file still starts with the bytes this attempt read."""
        try:
            with open(self.target, "rb") as current:
                return file_digest(current, self.original.size) == self.digest
        except OSError:
            return False


def _replaced(path: Path, before: os.stat_result) -> bool:
    """Whether `path` is no longer the file `before` was taken of."""
    after = os.stat(path)
    return (after.st_ino, after.st_size, after.st_mtime_ns) != (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )


def _compress_over(text: Path, packed: Path) -> None:
    """Replace the compressed file `packed` by `text` compressed (same mode and owner)."""
    st = os.stat(packed)
    again = packed.with_name(packed.name + ".next")
    try:
        compress_file(text, again, st.st_mode, sync=True)
        chown_best_effort(again, st.st_uid, st.st_gid)
        os.replace(again, packed)
    except OSError as exc:
        with suppress(OSError):
            again.unlink()
        raise WriteFailed(f"{packed}: cannot write the repaired file ({described(exc)})") from None


def _check_input_unchanged(planned: PlannedRepair) -> None:
    info = planned.scanned.info
    try:
        st = os.stat(planned.path)
    except OSError as exc:
        raise SessionfixError(
            f"{planned.origin}: gone while being repaired ({exc.strerror})"
        ) from None
    if (st.st_size, st.st_mtime_ns) != (info.size, info.mtime_ns) or not planned.stored_unchanged():
        raise SessionfixError(f"{planned.origin}: changed while being repaired; nothing written")


def _write_new(
    path: Path,
    chunks: Iterator[bytes] | Iterator[bytes | CopiedRange],
    *,
    exclusive: bool = True,
    mode: int = 0o600,
    sync: bool = False,
    shown: Path | None = None,
    source: RecordSource | None = None,
) -> None:
    """Write a new file, its mode that of the session it repairs (synced to disk if
    `sync`: it is about to replace one that was); errors name `shown`, the path the
    user gave, when the file is a temporary one beside it. Ranges of the input that
    the output repeats are copied from `source` in the kernel."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(path, flags, 0o600)
        with suppress(OSError):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", buffering=0) as handle:
            pending = bytearray()
            for chunk in chunks:
                if isinstance(chunk, CopiedRange):
                    assert source is not None, "input ranges need the input to copy from"
                    _write_all(fd, pending)
                    source.copy_to(fd, chunk.start, chunk.end)
                    continue
                if len(chunk) >= WRITE_BUFFER:
                    # A long line goes out as it is: buffering it would hold it twice.
                    _write_all(fd, pending)
                    _write_out(fd, chunk)
                    continue
                pending += chunk
                if len(pending) >= WRITE_BUFFER:
                    _write_all(fd, pending)
            _write_all(fd, pending)
            if sync:
                os.fsync(handle.fileno())
    except OSError as exc:
        raise WriteFailed(
            f"{shown or path}: cannot write the repaired file ({described(exc)})"
        ) from None


def _write_all(fd: int, pending: bytearray) -> None:
    """Write and empty `pending`."""
    _write_out(fd, pending)
    pending.clear()


def _write_out(fd: int, data: bytes | bytearray) -> None:
    with memoryview(data) as whole:
        view = whole
        while view:
            view = view[os.write(fd, view) :]


class RepairRun(Struct):
    """What repairing several files did, and what a report of them shows."""

    results: list[RepairResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Files that could not be repaired, one line each."""
    unrepaired: list[Diagnostic] = field(default_factory=list)
    """The problems of files whose repair was refused, as a check of them finds them:
    a refusal must not read as "no problems"."""
    notices: list[str] = field(default_factory=list)
    """Warnings to print once: rules selected by code that a file's format cannot run."""
    ended_early: bool = False
    """An in-place run stopped before every file was repaired."""
    stopped: BaseException | None = None
    """What stopped it, to raise once the files finished are reported (an interrupt, an
    internal error); None when an error line says it (a worker process died)."""
    stopped_during: list[str] = field(default_factory=list)
    """Files the run was repairing when it stopped that now hold their repair, though
    no result says so (the stop came right after the swap)."""

    @property
    def remaining(self) -> list[Diagnostic]:
        """What is left to report: the results' remaining problems and the refused files'."""
        left = [*(d for r in self.results for d in r.remaining), *self.unrepaired]
        return sorted(left, key=SORT_KEY)

    @property
    def fixed(self) -> int:
        return sum(len(r.applied) for r in self.results)

    @property
    def unsettled(self) -> list[str]:
        """Warnings about lines appended during an in-place repair and left as written."""
        return [
            f"{r.filename}: repaired, but {r.unsettled}"
            for r in self.results
            if r.unsettled is not None
        ]

    @property
    def repaired_before_stop(self) -> list[str]:
        """When the run stopped early: every file it changed, one line each, so that
        none goes unmentioned."""
        if not self.ended_early:
            return []
        lines = [
            f"{r.filename}: repaired before the run stopped"
            + (f"; backup: {r.backup}" if r.backup is not None else "")
            for r in self.results
            if r.changed
        ]
        lines += [
            f"{name}: repaired as the run stopped; its backup is beside it"
            for name in self.stopped_during
        ]
        return lines

    def note(self, *, in_place: bool) -> str | None:
        return summary.repair_note(self.results, in_place=in_place) if self.results else None

    def exit_code(self, settings: Settings, *, exit_zero: bool, exit_on_fix: bool) -> int:
        """2 on any error; 1 when problems remain (or, with `exit_on_fix`, a file
        changed), unless `exit_zero`."""
        if self.errors or self.stopped is not None:
            return EXIT_ERROR
        if exit_zero:
            return EXIT_OK
        if exit_on_fix and any(r.changed for r in self.results):
            return EXIT_PROBLEMS
        return exit_code(self.remaining, False, settings, exit_zero)

    def record(self, outcome: FileOutcome, notices: Notices) -> None:
        """Add one file's outcome."""
        if outcome.result is None:
            assert outcome.error is not None
            self.errors.append(outcome.error)
            self.unrepaired.extend(outcome.unrepaired)
            return
        self.results.append(outcome.result)
        notices.add(outcome.result.inapplicable)


class FileOutcome(Struct):
    """One file's repair: its result, or the line that says why there is none, with the
    findings a check of the file still reports."""

    result: RepairResult | None = None
    error: str | None = None
    unrepaired: list[Diagnostic] = field(default_factory=list)

    def detached(self) -> FileOutcome:
        """The outcome as plain data, to travel from a worker process: the reported
        findings keep their fixes' edits, made now; the input's and the applied ones
        (which a report only counts) lose them."""
        unrepaired = [d.detached(edits=True) for d in self.unrepaired]
        result = self.result
        if result is not None:
            result = msgspec.structs.replace(
                result,
                found=[d.detached(edits=False) for d in result.found],
                applied=[d.detached(edits=False) for d in result.applied],
                remaining=[d.detached(edits=True) for d in result.remaining],
            )
        return FileOutcome(result, self.error, unrepaired)


def repair_paths(
    files: list[Path],
    settings: Settings,
    *,
    in_place: bool = False,
    output: Path | None = None,
    stream: BinaryIO | None = None,
    backup: bool = True,
    force: bool = False,
    follow_symlinks: bool = False,
    break_stale_lock: bool = False,
    keep_stopped: bool = False,
) -> RepairRun:
    """Repair every file in place, or the one file to `output` or `stream`; a file that
    cannot be repaired becomes an error line and its findings are still reported.

    In place, small files are spread over `settings.jobs` worker processes (default one
    per core) as `check_paths` spreads them, when there are enough of them; a large
    file is repaired here, itself read in parallel, and so is a store. The results
    come in the order of `files` whoever made them, and the files repaired by workers
    have their reported findings' edits made there (`FileOutcome.detached`).

    An interrupt or an internal error stops an in-place run without cutting a repair
    short: each worker finishes the file it has under way, and what stopped it is
    raised once every finished file is in the run; with `keep_stopped` the run is
    returned instead, its `stopped` set, for the caller to report what was done before
    raising it. A worker that dies makes its file an error line and stops the run.
    (`--diff` previews, `PreviewRun`, are made one file at a time.)
    """
    run = RepairRun()
    notices = Notices()
    stored: list[str] = []
    if in_place:
        repair = _InPlace(settings, backup, force, follow_symlinks, break_stale_lock)
        _repair_in_place_all(files, settings, run, notices, stored, repair)
    else:
        for path in files:
            if stores.is_store(path):
                stored += _repair_store(
                    path, settings, run, notices, in_place, output, stream, backup, force
                )
                continue
            run.record(_repaired_copy(path, settings, output, stream, force), notices)
    if settings.sessions and not run.ended_early:
        run.errors.extend(stores.unmatched_sessions(settings.sessions, stored))
    run.notices = notices.lines
    if run.stopped is not None and not keep_stopped:
        raise run.stopped
    return run


def _repaired_copy(
    path: Path, settings: Settings, output: Path | None, stream: BinaryIO | None, force: bool
) -> FileOutcome:
    def repair() -> RepairResult:
        if stream is not None:
            return repair_to_stream(path, stream, settings)
        assert output is not None, "repair to a path, a stream or in place"
        return repair_to(path, output, settings, replace=force)

    return _outcome(path, settings, repair)


def _outcome(path: Path, settings: Settings, repair: Callable[[], RepairResult]) -> FileOutcome:
    """`repair()`'s result, or its refusal as an error line with the file's findings."""
    try:
        return FileOutcome(repair())
    except SessionfixError as exc:
        findings = [] if isinstance(exc, InputError) else _findings_of(path, settings)
        return FileOutcome(error=str(exc), unrepaired=findings)
    except BrokenPipeError:
        raise
    except OSError as exc:
        return FileOutcome(
            error=f"{path}: {described(exc)}; nothing written",
            unrepaired=_findings_of(path, settings),
        )


class _InPlace(Struct, frozen=True):
    """How every file of an in-place run is repaired."""

    settings: Settings
    backup: bool
    force: bool
    follow_symlinks: bool
    break_stale_lock: bool

    def __call__(self, path: Path) -> FileOutcome:
        def repair() -> RepairResult:
            return repair_in_place(
                path,
                self.settings,
                backup=self.backup,
                force=self.force,
                follow_symlinks=self.follow_symlinks,
                break_stale_lock=self.break_stale_lock,
            )

        return _outcome(path, self.settings, repair)

    def apart(self, path: Path) -> FileOutcome:
        """`self(path)` in a worker process (`settings.jobs` 1): the outcome as plain
        data."""
        return self(path).detached()


def _repair_in_place_all(
    files: list[Path],
    settings: Settings,
    run: RepairRun,
    notices: Notices,
    stored: list[str],
    repair: _InPlace,
) -> None:
    """Repair `files` in place into `run`, the small ones by worker processes. Whatever
    stops the run is kept in it once every repair under way has ended."""
    shared = shared_files(files, settings)
    tasks = list(shared)  # in the order of `files`
    workers: OrderedWorkers[Path, FileOutcome] | None = None
    if tasks:
        workers = OrderedWorkers(
            msgspec.structs.replace(
                repair, settings=msgspec.structs.replace(settings, jobs=1)
            ).apart,
            tasks,
            default_workers(settings.jobs),
            finish_started=True,
        )
    here: tuple[Path, tuple[int, int] | None] | None = None
    """The file being repaired in this process, and its inode before."""
    try:
        with ExitStack() as stack:
            taken: Iterator[FileOutcome] = iter(())
            if workers is not None:
                taken = iter(stack.enter_context(workers))
            for path in files:
                if path in shared:
                    # Taken and recorded with signals held, so that no result is lost.
                    with signals_deferred():
                        run.record(next(taken), notices)
                elif stores.is_store(path):
                    stored += _repair_store(
                        path, settings, run, notices, True, None, None, repair.backup, repair.force
                    )
                else:
                    here = (path, _inode(path))
                    run.record(repair(path), notices)
                    here = None
    except (KeyboardInterrupt, Exception) as exc:
        run.ended_early = True
        run.stopped = exc
        if here is not None and _swapped_unrecorded(here[0], here[1], run):
            run.stopped_during.append(str(here[0]))
    if workers is None:
        return
    if isinstance(run.stopped, WorkerDied) and workers.cut_short:
        run.stopped = None  # the error line of its file says it
    for _, outcome in workers.finished:
        if isinstance(outcome, BaseException):
            run.errors.append(f"internal error: {type(outcome).__name__}: {outcome}")
        else:
            run.record(outcome, notices)
    for index in workers.cut_short:
        run.errors.append(
            f"{tasks[index]}: the worker process repairing it died; the file holds either "
            "its original or its repair, and the run stopped"
        )


def _swapped_unrecorded(path: Path, before: tuple[int, int] | None, run: RepairRun) -> bool:
    """Whether the file a stop came during holds a new inode (its repair) and no result
    of the run says so."""
    if before is None or _inode(path) == before:
        return False
    return not any(r.path == path for r in run.results)


def _inode(path: Path) -> tuple[int, int] | None:
    """The file at `path` (device, inode): an in-place repair gives it a new one."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _repair_store(
    path: Path,
    settings: Settings,
    run: RepairRun,
    notices: Notices,
    in_place: bool,
    output: Path | None,
    stream: BinaryIO | None,
    backup: bool,
    force: bool,
) -> list[str]:
    """Repair a store's sessions, each a result or an error line of `run` (a refused
    session's findings still reported); returns the ids of the sessions it read."""
    from sessionfix.repair.stored import SessionRefused, repair_store

    read: list[str] = []
    try:
        for outcome in repair_store(
            path,
            settings,
            in_place=in_place,
            output=output,
            stream=stream,
            backup=backup,
            force=force,
        ):
            if isinstance(outcome, SessionRefused):
                run.errors.append(str(outcome.error))
                run.unrepaired.extend(outcome.findings)
                read.append(outcome.session_id)
            elif isinstance(outcome, SessionfixError):
                run.errors.append(str(outcome))
            else:
                run.results.append(outcome)
                notices.add(outcome.inapplicable)
                read.append(outcome.session_id)
    except SessionfixError as exc:
        run.errors.append(str(exc))
    return read


def _findings_of(path: Path, settings: Settings) -> list[Diagnostic]:
    """What a check of a file whose repair was refused finds in it."""
    try:
        return check_file(path, settings)
    except SessionfixError:
        return []


class PreviewRun:
    """Previews of several files' repairs, made one at a time as they are iterated; a
    file that cannot be previewed becomes an error line."""

    def __init__(self, files: list[Path], settings: Settings) -> None:
        self.files = files
        self.settings = settings
        self.errors: list[str] = []
        self.changed = 0
        """Files the repair would change."""
        self._notices = Notices()

    @property
    def notices(self) -> list[str]:
        """Warnings to print once: rules selected by code that a file's format cannot run."""
        return self._notices.lines

    def __iter__(self) -> Iterator[RepairPreview]:
        for path in self.files:
            if stores.is_store(path):
                yield from self._store_previews(path)
                continue
            try:
                preview = preview_repair(path, self.settings)
            except SessionfixError as exc:
                self.errors.append(str(exc))
                continue
            self._notices.add(preview.result.inapplicable)
            if preview.changes_anything:
                self.changed += 1
            yield preview

    def _store_previews(self, path: Path) -> Iterator[RepairPreview]:
        from sessionfix.repair.stored import preview_store

        try:
            for stored in preview_store(path, self.settings):
                if isinstance(stored, SessionfixError):
                    self.errors.append(str(stored))
                    continue
                preview = stored.preview
                preview.path = Path(stored.shown)
                preview.located = stored.locate
                preview.keep(stored.stack)
                self._notices.add(preview.result.inapplicable)
                if preview.changes_anything:
                    self.changed += 1
                yield preview
        except SessionfixError as exc:
            self.errors.append(str(exc))

    def note(self, problems: int) -> str | None:
        return summary.preview_note(problems, self.changed, bool(self.errors))

    def exit_code(self, exit_zero: bool) -> int:
        return summary.preview_exit_code(self.changed, bool(self.errors), exit_zero)
