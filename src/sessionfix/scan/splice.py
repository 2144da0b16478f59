"""Reading a repair's result without decoding again the byte ranges it copied.

A large input is read as byte ranges in parallel (`scanner._read_parallel`); with
`keep_parts`, each range's part is kept (`scanner.KeptParts`), pickled, beside the
xxh3 digest of the bytes it was decoded from. A repair's result repeats most of its
input byte for byte, so `read_spliced` reads it as a session by taking each kept part
whose bytes the result holds at a line start, proven by their digest there, shifted to
where they lie, and by decoding every other stretch afresh; the parts join in file
order as those of any parallel read do, and the rules then run on the whole.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Final

import xxhash
from msgspec import Struct

from sessionfix.read.reader import open_session
from sessionfix.scan import scanner
from sessionfix.scan.scanner import (
    Chunk,
    JoinedParts,
    KeptPart,
    KeptParts,
    ScannedFile,
    Task,
    finished_read,
    gc_paused,
    peek_format,
    read_range,
    settle_last_line,
    worker_count,
)

DIGEST_BYTES: Final = 1 << 20


class CopiedRun(Struct, frozen=True):
    """Input bytes [start, end) that the output repeats from `to` on."""

    start: int
    end: int
    to: int


def _digest(fd: int, start: int, end: int) -> int | None:
    """xxh3-64 of the file's bytes [start, end); None when the file ends before."""
    state = xxhash.xxh3_64()
    buffer = bytearray(min(DIGEST_BYTES, end - start))
    view = memoryview(buffer)
    position = start
    while position < end:
        got = os.preadv(fd, [view[: min(len(buffer), end - position)]], position)
        if not got:
            return None
        state.update(view[:got])
        position += got
    return state.intdigest()


class _Proof(Struct, frozen=True):
    """The output holds a kept part's bytes from `start`, a line start."""

    fd: int
    start: int
    size: int
    digest: int


def _splice_task(task: Task | _Proof) -> Chunk | bool:
    """Worker: decode a stretch of the output, or prove a kept part's place in it."""
    if isinstance(task, Task):
        return read_range(task)
    if task.start > 0 and os.pread(task.fd, 1, task.start - 1) != b"\n":
        return False
    return _digest(task.fd, task.start, task.start + task.size) == task.digest


def read_spliced(
    path: Path,
    kept: KeptParts,
    copied: Sequence[CopiedRun],
    jobs: int | None,
    named_as: Path | None = None,
) -> ScannedFile | None:
    """Read the session at `path`, a repair's output whose `copied` runs repeat input
    bytes, reusing the input's kept parts where it proves them; None when it reuses
    none (the format, context or name differ, no part lies in a run, a proof fails or
    a worker died), for a full read to decide. It is read under the name `named_as`
    (`read_session`)."""
    handle, info = open_session(path)
    with handle, gc_paused():
        if peek_format(handle, path, kept.format) != (kept.format, kept.context):
            return None
        placed = list(_placed(kept.parts, copied, info.size))
        if not placed:
            return None
        fd = handle.fileno()
        tasks: list[Task | _Proof] = []
        position = 0
        for to, part in placed:
            tasks.extend(_stretch(fd, path, position, to, kept, named_as))
            tasks.append(_Proof(fd, to, part.end - part.start, part.digest))
            position = to + part.end - part.start
        tasks.extend(_stretch(fd, path, position, info.size, kept, named_as))
        workers = worker_count(info.size, jobs)
        joined = JoinedParts(kept.format, path, kept.context, named_as)
        if joined.adapter.named != kept.named:
            return None
        from sessionfix.scan.workers import OrderedWorkers, WorkerDied

        parts = iter(placed)
        try:
            with ExitStack() as stack:
                outcomes: Iterable[Chunk | bool] = (
                    stack.enter_context(OrderedWorkers(_splice_task, tasks, workers))
                    if workers > 1
                    else map(_splice_task, tasks)
                )
                for outcome in outcomes:
                    if isinstance(outcome, Chunk):
                        joined.add(outcome)
                        continue
                    if not outcome:
                        return None
                    to, part = next(parts)
                    joined.add(part.chunk(), to - part.start)
        except WorkerDied:
            return None
        if joined.read_whole:
            return None
        adapter, lines, tracker = joined.done(workers)
        settle_last_line(lines)
        return finished_read(adapter, lines, tracker, handle, info)


def _placed(
    parts: Sequence[KeptPart], copied: Sequence[CopiedRun], size: int
) -> Iterator[tuple[int, KeptPart]]:
    """(output offset, part) of each part a copied run holds whole, where the output
    would read it as the input did: from its start only the first part (read without
    a context), and an unterminated last line only at the output's end."""
    starts = [run.start for run in copied]
    after = 0
    for part in parts:
        run = bisect_right(starts, part.start) - 1
        if run < 0 or part.end > copied[run].end:
            continue
        to = copied[run].to + part.start - copied[run].start
        if (to == 0) != (part.start == 0) or to < after:
            continue
        if not part.terminated and to + part.end - part.start != size:
            continue
        after = to + part.end - part.start
        yield to, part


def _stretch(
    fd: int, path: Path, start: int, end: int, kept: KeptParts, named_as: Path | None
) -> list[Task]:
    """Tasks decoding the output's lines that start in [start, end)."""
    if start >= end:
        return []
    count = -(-(end - start) // scanner.TASK_BYTES)
    bounds = [start + (end - start) * k // count for k in range(count + 1)]
    return [
        Task(
            fd,
            path,
            bounds[k],
            bounds[k + 1],
            kept.format,
            kept.context if bounds[k] else None,
            named_as,
        )
        for k in range(count)
    ]
