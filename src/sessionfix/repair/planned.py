"""Planning the repair of a session file: read it, run every rule, and turn the fixes
that apply into a `RepairPlan` (`plan_repair`); write a plan's bytes to a new file.

Where the repaired bytes go is `targets`; how they are checked before they take a
path, `verification`.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Final

from msgspec import Struct, field

from sessionfix.diagnostics import Applicability, Diagnostic
from sessionfix.engine import Inapplicable, inapplicable, run_rules
from sessionfix.errors import SessionfixError, described
from sessionfix.location import FILE_NAMES, RecordNames
from sessionfix.model.loaded import Loader
from sessionfix.read.compressed import (
    is_compressed,
    plain_name,
    scaled_progress,
    session_name,
    session_text,
)
from sessionfix.read.reader import RecordSource
from sessionfix.repair.plan import CopiedRange, RepairPlan
from sessionfix.repair.rowmap import RepairTrace
from sessionfix.rules import rule_of
from sessionfix.rules.base import Counted
from sessionfix.safety.writing import WriteFailed, set_aside
from sessionfix.scan.scanner import ProgressCallback, gc_paused, read_session
from sessionfix.scratch import private_folder
from sessionfix.settings import Settings
from sessionfix.units import BYTES_PER_TOKEN

if TYPE_CHECKING:
    from sessionfix.slim import SlimPlan

WRITE_BUFFER: Final = 1 << 20


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
    notes: list[str] = field(default_factory=list)
    """What the store says a rewrite left as it was (opencode: its event log)."""
    set_aside: list[tuple[Path, Path]] = field(default_factory=list)
    """Files beside the session an in-place repair moved aside (for the agent to build
    them again): each path and the backup name it now has."""
    slimmed: SlimPlan | None = None
    """With a budget: what the slim did (`sessionfix.slim`)."""

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
        """Estimate: bytes no longer sent, at about four bytes per token; for a slim,
        what the agent loads less as `context` counts it (its steps for a size, none)."""
        if self.slimmed is not None:
            return max(0, self.slimmed.before - self.slimmed.after)
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
        result_names: RecordNames = FILE_NAMES,
        loader: Loader | None = None,
    ) -> None:
        self.origin = path
        self.loader = loader
        """What the session's agent sends of it, where its container loads it otherwise
        than its format says (a store's session): what a slim counts."""
        """The session as given (compressed if its name ends in `.zst`)."""
        self.path = path
        """Where its text is read: `origin`, or a decompressed copy of it."""
        self.settings = settings
        self.filename = filename or str(path)
        self.tracing = trace
        self.result_names = result_names
        """How the container the result goes to names its records (a file: by line)."""
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
            self.slimmed: SlimPlan | None = None
            """With a budget: the slim's plan (its reductions are among `applied`)."""
            if settings.slims:
                self._slim()
            self.plan = RepairPlan(self.scanned, self.applied, self.source, map_rows=trace)
            self.tally: Counter[str] = Counter()
            """What the plans of every pass do (see `RepairResult.tally`)."""
            self.count(self.plan)
            if self.scanned.parts is not None:
                self.scanned.parts = self.scanned.parts.untouched(self.plan.changed_rows())
            self._text = text.pop_all()

    def _slim(self) -> None:
        """Add the reductions that bring the session under the budget to the applied
        fixes; under it already, apply nothing (the session stays as it is)."""
        from sessionfix.slim import Loaded, loaded_after_repair, plan_slim

        def repaired() -> Loaded:
            """What the agent loads of what repair's own fixes write (their first pass,
            in a private temporary folder), its records named by the rows they come from."""
            plan = RepairPlan(self.scanned, self.applied, self.source, map_rows=True)
            with private_folder(f"{self.origin}: cannot write the repaired copy") as folder:
                target = folder / plain_name(self.origin.name)
                write_new(target, plan.pieces(), source=self.source)
                assert plan.row_map is not None, "the plan maps its rows"
                trace = RepairTrace(plan.row_map)
                settings = self.settings
                scanned = read_session(
                    target, settings.format, None, settings.jobs, named_as=self.named_as
                )
                with RecordSource(target) as source:
                    measured = loaded_after_repair(scanned, source, self.filename, self.loader)
            return Loaded(measured.tokens, frozenset(map(trace.origin, measured.rows)))

        plan, reductions = plan_slim(
            self.scanned,
            self.applied,
            self.source,
            self.settings,
            self.filename,
            repaired,
            self.loader,
        )
        self.slimmed = plan
        self.applied = [*self.applied, *reductions] if plan.needed else []

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

    @property
    def beside_fixes(self) -> list[Diagnostic]:
        """The applied diagnostics whose fixes change only files beside the session, which
        only an in-place repair makes (`set_aside`)."""
        return [d for d in self.applied if d.fix is not None and not d.fix.changes_session]

    def set_aside(self) -> list[tuple[Path, Path]]:
        """Move aside the files beside the session that the applied fixes name (what an
        in-place repair does, before it writes): each path and its backup name."""
        paths = dict.fromkeys(
            path for d in self.beside_fixes if d.fix is not None for path in d.fix.set_aside
        )
        moved = [(path, set_aside(path)) for path in paths]
        return [(path, backup) for path, backup in moved if backup is not None]

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
            slimmed=self.slimmed,
        )

    def count(self, plan: RepairPlan) -> None:
        """Add what `plan` does to the tally (a later pass's plan too)."""
        self.tally.update(plan.codes)
        self.tally["dropped"] += plan.dropped_entries
        self.tally["inserted"] += plan.inserted_records
        self.tally["headers"] += plan.header is not None

    def close(self) -> None:
        self.source.close()
        self._text.close()


def plan_repair(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
    loader: Loader | None = None,
) -> PlannedRepair:
    """Read a file and decide its fixes (`loader`: as `PlannedRepair` takes it). Raises
    `InputError` when it cannot be read."""
    return PlannedRepair(Path(path), settings or Settings(), filename, progress, loader=loader)


def check_input_unchanged(planned: PlannedRepair) -> None:
    info = planned.scanned.info
    try:
        st = os.stat(planned.path)
    except OSError as exc:
        raise SessionfixError(
            f"{planned.origin}: gone while being repaired ({exc.strerror})"
        ) from None
    if (st.st_size, st.st_mtime_ns) != (info.size, info.mtime_ns) or not planned.stored_unchanged():
        raise SessionfixError(f"{planned.origin}: changed while being repaired; nothing written")


def write_new(
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
