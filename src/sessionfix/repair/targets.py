"""Where a verified repair goes: a new file (`repair_to`), a stream
(`repair_to_stream`), or over the session itself (`repair_in_place`, by the
safe-replace recipe of cli-and-safety.md §8). The bytes take a file's place through
the session file container's write protocol (`SessionFile.publish`, `take_back`); a
store's sessions go through `stored`, back through the store's.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, Final

from msgspec import Struct

from sessionfix.containers import SessionFile
from sessionfix.diagnostics import SORT_KEY, Diagnostic
from sessionfix.errors import SessionfixError, described
from sessionfix.model.loaded import Loader
from sessionfix.read.compressed import (
    session_name,
)
from sessionfix.repair import verification
from sessionfix.repair.planned import (
    WRITE_BUFFER,
    PlannedRepair,
    RepairResult,
    check_input_unchanged,
    plan_repair,
    write_new,
)
from sessionfix.repair.verification import verified_in_temp
from sessionfix.replacing import cannot_write, open_for_writing, temp_path
from sessionfix.safety.backups import OwnWrite
from sessionfix.safety.locks import rewrite_access
from sessionfix.safety.writing import (
    FileChanged,
    Snapshot,
    WriteFailed,
    WriteRefused,
    file_digest,
    read_backup_name,
    record_result,
    remove_dead_temps,
    same_file,
    snapshot,
)
from sessionfix.scan.scanner import ProgressCallback
from sessionfix.settings import Settings

SWAP_SETTLE_SECONDS: Final = 0.05
"""Time given to appends in flight at the rename before the replaced file is checked."""


MAX_REDOS: Final = 3
"""Repairs of a file that grew while it was repaired, before giving up (§8.2 step 8)."""


def repair_to(
    path: str | Path,
    output: str | Path,
    settings: Settings | None = None,
    *,
    replace: bool = False,
    filename: str | None = None,
    progress: ProgressCallback | None = None,
    named_as: Path | None = None,
    loader: Loader | None = None,
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
            result = repair_to_stream(
                path, stream, settings, filename=filename, progress=progress, loader=loader
            )
        result.output = output
        return result
    planned = plan_repair(path, settings, filename=filename, progress=progress, loader=loader)
    try:
        if st is not None and os.path.samefile(target, planned.origin):
            raise SessionfixError(f"{output}: is the input file (use --in-place to rewrite it)")
        result = planned.result()
        temp = temp_path(target)
        try:
            with planned.rewriting_ahead():
                write_new(
                    temp, planned.pieces(), mode=planned.mode, shown=output, source=planned.source
                )
            check_input_unchanged(planned)
            result.remaining = _beside_left(
                planned,
                result,
                verification.verify(
                    planned, temp, str(output), named_as=named_as or session_name(target)
                ),
            )
            result.output_size = temp.stat().st_size
            SessionFile(output, str(output)).publish(temp, planned.mode, replace=replace)
        except BaseException:
            with suppress(OSError):
                temp.unlink()
            raise
        result.changed = planned.changes_anything
        result.output = output
        return result
    finally:
        planned.close()


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
    loader: Loader | None = None,
) -> RepairResult:
    """Write the repaired copy of `path` to a stream, after verifying it in a temp file
    (`loader`: as `PlannedRepair` takes it)."""
    planned = plan_repair(path, settings, filename=filename, progress=progress, loader=loader)
    try:
        result = planned.result()
        temp = verified_in_temp(planned, result, filename or str(path))
        result.remaining = _beside_left(planned, result, result.remaining)
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
    own = OwnWrite.of(target)
    with rewrite_access(
        target,
        shown=path,
        quiescence=settings.quiescence,
        fmt=settings.format,
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


def _beside_left(
    planned: PlannedRepair, result: RepairResult, remaining: list[Diagnostic]
) -> list[Diagnostic]:
    """What a repair to another file leaves: the findings of its copy, and those whose
    fixes change only files beside the session, which it does not make (nor count as
    applied)."""
    beside = planned.beside_fixes
    if not beside:
        return remaining
    result.applied[:] = [d for d in result.applied if d not in beside]
    seen = {(d.code, d.row, d.message) for d in remaining}
    left = [d for d in beside if (d.code, d.row, d.message) not in seen]
    return sorted([*remaining, *left], key=SORT_KEY)


def _merged(earlier: RepairResult, later: RepairResult) -> RepairResult:
    """One account of an attempt that changed the file and the repair, after lines were
    carried over, of what it wrote (whose backup, if any, is another, later one)."""
    earlier.applied.extend(later.applied)
    earlier.tally.update(later.tally)
    earlier.remaining = later.remaining
    earlier.output_size = later.output_size
    earlier.changed = earlier.changed or later.changed
    earlier.backup = earlier.backup or later.backup
    earlier.set_aside.extend(later.set_aside)
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
                beside = planned.beside_fixes
                if beside:
                    result.set_aside = planned.set_aside()
                if not planned.changes_anything:
                    result.output_size = result.input_size
                    result.remaining = [d for d in planned.found if d not in beside]
                    result.output = self.target
                    return result
                sizes: list[int] = []
                remaining: list[Diagnostic] = []

                def verify(temp: Path) -> None:
                    remaining.extend(verification.verify(planned, temp, result.filename))
                    sizes.append(temp.stat().st_size)

                # A backup is taken even when not asked for, and dropped at the end:
                # until then, lines written to the old file late are only there.
                with planned.rewriting_ahead():
                    result.backup = SessionFile(self.target, self.filename).take_back(
                        original,
                        planned.chunks(),
                        verify=verify,
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
