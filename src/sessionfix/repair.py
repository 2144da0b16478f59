"""Repairing a session file: scan it, apply the chosen fixes, write, verify.

`plan_repair` reads a file, runs every rule and turns the fixes that apply into a
`RepairPlan`. The repaired bytes then go to a new file (`repair_to`), to a stream
(`repair_to_stream`) or over the original (`repair_in_place`). Every written result
is read back and checked before it takes a path (rules.md §1 step 7): no fix that
applies may remain, and no reference may dangle that did not dangle before.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Final

from sessionfix.diagnostics import Applicability, Diagnostic
from sessionfix.engine import run_rules
from sessionfix.errors import SessionfixError
from sessionfix.formats import Format
from sessionfix.locks import lock_state
from sessionfix.plan import RepairPlan
from sessionfix.reader import RecordSource
from sessionfix.scanner import ProgressCallback, ScannedFile, gc_paused, read_session
from sessionfix.settings import Settings
from sessionfix.view import SessionView
from sessionfix.writing import TEMP_MARK, chown_best_effort, replace_file, snapshot

PARENT_LINK: Final = "parent link"
CYCLE_CODE: Final = "SF105"
"""Parent links that loop: a repair must not add any."""
MOVED_CUT_CODE: Final = "SF501"
"""A compaction's kept entry that is gone or not before it: a repair must not cause one
on a compaction it rewrote. (Breaking a cycle or a re-link may reveal one the broken
tree hid; that one stays reported.)"""
WRITE_BUFFER: Final = 1 << 20
BYTES_PER_TOKEN: Final = 4
"""Rough size of a token in JSON session text, for the summary's estimate."""
MAX_PASSES: Final = 8
"""Checks of the written result before verification gives up (see `PlannedRepair.verify`).
Every further pass must change the file; real sessions need one, rare shapes three."""


class VerificationFailed(SessionfixError):
    """The repaired bytes did not pass the check; nothing was written in their place."""


class NotQuiescent(SessionfixError):
    """The file may be in use by an agent: locked, or changed too recently."""


def applies(diagnostic: Diagnostic, settings: Settings) -> bool:
    """Whether `repair` applies this diagnostic's fix under `settings`."""
    fix = diagnostic.fix
    if fix is None:
        return False
    if diagnostic.code == "SF205":
        return settings.prune_to_leaf
    return fix.applicability is Applicability.SAFE or settings.unsafe_fixes


@dataclass(slots=True)
class RepairResult:
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

    @property
    def dropped_entries(self) -> int:
        return self.tally["dropped"]

    @property
    def inserted_records(self) -> int:
        return self.tally["inserted"]

    @property
    def reads_pruned(self) -> int:
        return self.tally["SF301"]

    @property
    def lines_split(self) -> int:
        return self.tally["SF001"]

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
    ) -> None:
        self.path = path
        self.settings = settings
        self.filename = filename or str(path)
        with gc_paused():
            self.scanned = read_session(path, settings.format, progress, settings.jobs)
            self.found = run_rules(self.scanned, settings, self.filename)
        self.applied = [d for d in self.found if applies(d, settings)]
        """Fixes applied, including those a later pass applied to the written result."""
        self.source = RecordSource(path)
        self.plan = RepairPlan(self.scanned, self.applied, self.source)
        self.tally: Counter[str] = Counter()
        """What the plans of every pass do (see `RepairResult.tally`)."""
        self._count(self.plan)

    @property
    def format(self) -> str:
        return self.scanned.view.format

    @property
    def mode(self) -> int:
        return stat.S_IMODE(self.scanned.info.mode)

    @property
    def changes_anything(self) -> bool:
        return not self.plan.is_empty()

    def chunks(self) -> Iterator[bytes]:
        return self.plan.chunks()

    def result(self) -> RepairResult:
        return RepairResult(
            path=self.path,
            filename=self.filename,
            format=self.format,
            found=self.found,
            applied=self.applied,
            input_size=self.scanned.info.size,
            tally=self.tally,
        )

    def _count(self, plan: RepairPlan) -> None:
        self.tally.update(plan.codes)
        self.tally["dropped"] += plan.dropped_entries
        self.tally["inserted"] += plan.inserted_records

    def verify(self, written: Path, filename: str) -> list[Diagnostic]:
        """Check repaired bytes at `written`; return what a check of them reports.

        A fix can make another one applicable (a re-linked entry becomes a clone of its
        new parent; a dropped root leaves a root mid-file, which SF107 re-links): then
        `written` is repaired again, until nothing that applies is left, so that the
        result is a fixed point of `repair`. A pass that changes nothing, or more than
        `MAX_PASSES` checks, fail the repair. So do a name that dangles in the result
        but did not dangle in the input (the children of a dropped entry whose parent
        was already gone inherit that gone name: not a new one), more cycles than the
        input had, and a broken kept entry on a compaction the repair rewrote.
        """
        settings = self.settings
        forced = Format(self.format)
        dangled = _dangling_names(self.scanned.view)
        cycles = sum(d.code == CYCLE_CODE for d in self.found)
        cuts = sum(d.code == MOVED_CUT_CODE for d in self.found)
        broken_cuts = {d.entry_id for d in self.found if d.code == MOVED_CUT_CODE}
        rewritten = self.plan.rewritten_ids()
        for _ in range(MAX_PASSES):
            with gc_paused():
                scanned = read_session(written, forced, None, settings.jobs)
                diagnostics = run_rules(scanned, settings, filename, origin=self.path)
            view = scanned.view
            for (name, value), owner in _dangling_names(view).items():
                if (name, value) not in dangled:
                    what = name if name == PARENT_LINK else f"`{name}`"
                    raise self._failed(
                        f"{what} {value!r} on its line {view.rows[owner]} names no entry"
                    )
            more_cycles = sum(d.code == CYCLE_CODE for d in diagnostics) > cycles
            more_cuts = sum(d.code == MOVED_CUT_CODE for d in diagnostics) > cuts
            introduced = [
                d
                for d in diagnostics
                if (d.code == CYCLE_CODE and more_cycles)
                or (
                    d.code == MOVED_CUT_CODE
                    # Positional formats (pi v1) have no ids: the count decides.
                    and (d.entry_id in rewritten or (d.entry_id is None and more_cuts))
                    and d.entry_id not in broken_cuts
                )
            ]
            if introduced:
                raise self._failed(_described(introduced[0]))
            left = [d for d in diagnostics if applies(d, settings)]
            if not left:
                return diagnostics
            rewritten |= self._repair_again(written, scanned, left)
        raise self._failed(_described(left[0]))

    def _repair_again(
        self, written: Path, scanned: ScannedFile, applied: list[Diagnostic]
    ) -> set[str]:
        """Apply the fixes left in `written` (same mode), replacing it; return the ids of
        the records this pass rewrote."""
        again = written.with_name(written.name + ".next")
        st = os.stat(written)
        try:
            with RecordSource(written) as source:
                plan = RepairPlan(scanned, applied, source)
                _write_new(again, plan.chunks(), mode=stat.S_IMODE(st.st_mode), sync=True)
                if not plan.rows_written:
                    raise self._failed(_described(applied[0]))
                rewritten = plan.rewritten_ids()
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
    filename: str | None = None,
    progress: ProgressCallback | None = None,
) -> RepairResult:
    """Write the repaired copy of `path` to `output` (a new or replaced file).

    The copy is written beside `output` under a temporary name, verified, then renamed
    into place, so `output` never holds unverified bytes.
    """
    output = Path(output)
    planned = plan_repair(path, settings, filename=filename, progress=progress)
    try:
        if output.exists() and os.path.samefile(output, planned.path):
            raise SessionfixError(f"{output}: is the input file (use --in-place to rewrite it)")
        directory = output.parent
        result = planned.result()
        temp = directory / f".{output.name}{TEMP_MARK}{os.getpid()}"
        try:
            _write_new(temp, planned.chunks(), mode=planned.mode)
            _check_input_unchanged(planned)
            result.remaining = planned.verify(temp, str(output))
            result.output_size = temp.stat().st_size
            os.replace(temp, output)
        except BaseException:
            with suppress(OSError):
                temp.unlink()
            raise
        result.changed = planned.changes_anything
        result.output = output
        return result
    finally:
        planned.close()


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
        handle, name = tempfile.mkstemp(prefix="sessionfix-", suffix=".tmp")
        os.close(handle)
        temp = Path(name)
        try:
            _write_new(temp, planned.chunks(), exclusive=False)
            _check_input_unchanged(planned)
            result.remaining = planned.verify(temp, filename or str(path))
            result.output_size = temp.stat().st_size
            with open(temp, "rb") as verified:
                shutil.copyfileobj(verified, stream, 1 << 20)
            stream.flush()
        finally:
            with suppress(OSError):
                temp.unlink()
        result.changed = planned.changes_anything
        return result
    finally:
        planned.close()


def repair_in_place(
    path: str | Path,
    settings: Settings | None = None,
    *,
    backup: bool = True,
    force: bool = False,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
) -> RepairResult:
    """Rewrite `path` with its repair by the safe-replace recipe (cli-and-safety.md §8.2).

    Refuses a file an agent may be writing (a live OpenClaw lock, or a change within
    the quiescence window), symbolic links, and hard-linked files unless `force`.
    The repaired bytes are verified before they replace the original; the original
    stays as a hard-linked backup unless `backup` is false.
    """
    path = Path(path)
    settings = settings or Settings()
    original = snapshot(path, allow_hard_links=force)
    _refuse_live(path, settings)
    planned = plan_repair(path, settings, filename=filename, progress=progress)
    try:
        result = planned.result()
        if planned.scanned.info.size != original.size:
            raise SessionfixError(f"{path}: changed while being read; left untouched")
        if not planned.changes_anything:
            result.output_size = result.input_size
            result.remaining = planned.found
            result.output = path
            return result
        sizes: list[int] = []
        remaining: list[Diagnostic] = []

        def verify(temp: Path) -> None:
            remaining.extend(planned.verify(temp, result.filename))
            sizes.append(temp.stat().st_size)

        result.backup = replace_file(original, planned.chunks(), backup=backup, verify=verify)
        result.output_size = sizes[0] if sizes else 0
        result.remaining = remaining
        result.changed = True
        result.output = path
        return result
    finally:
        planned.close()


def _refuse_live(path: Path, settings: Settings) -> None:
    """cli-and-safety.md §8.1: never rewrite a session an agent may be writing."""
    lock = lock_state(path)
    if lock.live:
        owner = f" by pid {lock.pid}" if lock.pid is not None else ""
        raise NotQuiescent(f"{path}: session is locked{owner}; left untouched")
    try:
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        return
    if age < settings.quiescence:
        raise NotQuiescent(
            f"{path}: modified {max(age, 0):.0f}s ago, within the quiescence window of "
            f"{settings.quiescence:g}s (an agent may be writing it); left untouched"
        )


def _check_input_unchanged(planned: PlannedRepair) -> None:
    info = planned.scanned.info
    try:
        st = os.stat(planned.path)
    except OSError as exc:
        raise SessionfixError(
            f"{planned.path}: gone while being repaired ({exc.strerror})"
        ) from None
    if (st.st_size, st.st_mtime_ns) != (info.size, info.mtime_ns):
        raise SessionfixError(f"{planned.path}: changed while being repaired; nothing written")


def _write_new(
    path: Path,
    chunks: Iterator[bytes],
    *,
    exclusive: bool = True,
    mode: int = 0o600,
    sync: bool = False,
) -> None:
    """Write a new file, its mode that of the session it repairs (synced to disk if
    `sync`: it is about to replace one that was)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_EXCL if exclusive else 0)
    fd = os.open(path, flags, 0o600)
    with suppress(OSError):
        os.fchmod(fd, mode)
    with os.fdopen(fd, "wb", buffering=WRITE_BUFFER) as handle:
        for chunk in chunks:
            handle.write(chunk)
        if sync:
            handle.flush()
            os.fsync(handle.fileno())
