"""Checks shared by the hostile-input and fuzz tests.

- `time_limit`: a SIGALRM guard, so that a hang fails a test instead of stalling CI.
- `tree_state`: every entry under a directory (mode, size, mtime, content digest), to
  prove that a run wrote nothing, or only its output.
- `run_cli`: `sessionfix.cli.main` in-process, asserting the exit-code and stderr
  contract of cli-and-safety.md §2: 0, 1 or 2; no traceback; exit 2 if and only if an
  error line was printed, and then exactly one.
- `lost_entries`: the complete entries of an input that a repair lost without an
  applied fix deleting them.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Final

import orjson
import pytest
import xxhash

from sessionfix import Settings
from sessionfix.cli import main
from sessionfix.diagnostics import Diagnostic, EditOp
from sessionfix.interrupts import HELD_SIGNALS
from sessionfix.repair.planned import RepairResult
from sessionfix.repair.targets import repair_to

ERROR_PREFIX: Final = "sessionfix: error: "
SCAN_NOTES: Final = ("Scanned ", "No session files found")
"""What `scan` may print on stderr besides the error (without `-q`)."""
REPAIR_NOTES: Final = (
    "Nothing to repair.",
    "Wrote the repair of ",
    "Repaired ",
    "No fixes.",
    "Would fix ",
)
"""What `repair` may print on stderr besides the error: its summary line."""
RESTORE_NOTES: Final = ("Restored ", "sessionfix: warning: ")
"""What `restore` may print on stderr besides the error: its summary or one warning."""
SKIPPED_NOTE: Final = "sessionfix: warning: "
SKIPPED_WORDS: Final = ": not a session file of a known format"
"""What `scan` and `check` say, once per file, of a JSONL file whose first records no
format reads, before skipping it (without `--strict`)."""
INPUT_NAME: Final = "<input>"
"""The filename the library repairs are run under: diagnostics of the input carry it,
those of later passes over the written result carry the output's name."""
LONG_AGO: Final = 1_700_000_000
"""An mtime far outside any quiescence window."""


class Hang(BaseException):
    """Raised by the alarm. A BaseException, so that the CLI's `except Exception`
    (which turns errors into exit 2) cannot swallow it and hide a hang."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail with `Hang` when the block runs longer than `seconds` (main thread only).

    The alarm also interrupts a blocking `open()` of a FIFO: the handler raises, so
    the system call is not restarted."""

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"no result within {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def digest(path: Path) -> bytes:
    """xxh3-128 of a file's bytes, read in 4 MiB pieces (no whole copy in memory)."""
    hasher = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        while piece := handle.read(4 << 20):
            hasher.update(piece)
    return hasher.digest()


Entry = tuple[int, int, int | None, bytes | None]
"""(st_mode, st_size, st_mtime_ns, digest); mtime and digest only for regular files."""


def tree_state(root: Path) -> dict[str, Entry]:
    """Every entry under `root` by relative path, without following links.

    FIFOs are never opened (that would block). A directory's mtime is left out: a run
    may create and remove a lock or temp file beside a session without changing any
    file, and that moves it. An unreadable file is compared by metadata only."""
    state: dict[str, Entry] = {}
    for folder, directories, files in os.walk(root):
        for name in [*directories, *files]:
            path = Path(folder, name)
            st = path.lstat()
            if stat.S_ISREG(st.st_mode):
                try:
                    content: bytes | None = digest(path)
                except PermissionError:
                    content = None
                entry: Entry = (st.st_mode, st.st_size, st.st_mtime_ns, content)
            elif stat.S_ISDIR(st.st_mode):
                entry = (st.st_mode, 0, None, None)
            else:
                entry = (st.st_mode, st.st_size, st.st_mtime_ns, None)
            state[str(path.relative_to(root))] = entry
    return state


@dataclass(frozen=True, slots=True)
class Run:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str
    out_bytes: bytes = b""
    """stdout as written (`out` is decoded, invalid UTF-8 replaced)."""

    @property
    def err_lines(self) -> list[str]:
        """stderr split on newlines only (`splitlines` would also split on U+2028, FS...)."""
        return self.err.removesuffix("\n").split("\n") if self.err else []

    @property
    def errors(self) -> list[str]:
        return [line for line in self.err_lines if line.startswith(ERROR_PREFIX)]


def run_cli(
    argv: Sequence[object],
    capture: pytest.CaptureFixture[bytes] | pytest.CaptureFixture[str],
    *,
    seconds: float = 60,
) -> Run:
    """Run `main(argv)` under a time limit and check the exit-code and stderr contract."""
    capture.readouterr()
    args = [str(a) for a in argv]
    with time_limit(seconds):
        code = main(args)
    out, err = capture.readouterr()
    run = Run(
        tuple(args),
        code,
        out.decode("utf-8", "replace") if isinstance(out, bytes) else out,
        err.decode("utf-8", "replace") if isinstance(err, bytes) else err,
        out if isinstance(out, bytes) else out.encode(),
    )
    assert_contract(run)
    return run


def _skipped_note(run: Run, line: str) -> bool:
    """The one line `scan` or `check` prints for a file of no known format it skips."""
    return (
        run.argv[0] in ("scan", "check")
        and line.startswith(SKIPPED_NOTE)
        and SKIPPED_WORDS in line
        and line.endswith("; skipped (--format FORMAT reads it as a session)")
    )


def assert_contract(run: Run) -> None:
    """Exit 0/1/2; no traceback; an error is exactly one stderr line and means exit 2.

    Besides that line, stderr may hold only `scan`'s "Scanned N files" note, after a
    written repair its one-line summary, and the line saying that a file of no known
    format is skipped."""
    shown = f"{run.argv}: exit {run.code}\nstderr:\n{run.err[-2000:]}"
    assert run.code in (0, 1, 2), shown
    assert "Traceback" not in run.err, shown
    assert "internal error" not in run.err, shown
    errors = run.errors
    others = [
        line
        for line in run.err_lines
        if not line.startswith(ERROR_PREFIX) and not _skipped_note(run, line)
    ]
    if run.code == 2:
        assert len(errors) == 1, shown
    else:
        assert errors == [], shown
    allowed: tuple[str, ...] = {
        "scan": SCAN_NOTES,
        "repair": REPAIR_NOTES,
        "restore": RESTORE_NOTES,
    }.get(run.argv[0], ())
    assert all(line.startswith(allowed) for line in others), shown
    assert len(others) <= 1, shown


def assert_unchanged(before: dict[str, Entry], after: dict[str, Entry], what: str) -> None:
    """The directory tree is as it was: same names, same bytes, same metadata."""
    assert after.keys() == before.keys(), (
        f"{what}: added {sorted(after.keys() - before.keys())}, "
        f"removed {sorted(before.keys() - after.keys())}"
    )
    changed = [name for name in before if before[name] != after[name]]
    assert not changed, f"{what}: changed {changed}"


def assert_only_added(
    before: dict[str, Entry], after: dict[str, Entry], added: str, what: str
) -> None:
    """The tree is as it was, plus the one new file `added`."""
    assert added not in before, f"{what}: {added} existed before the run"
    assert added in after, f"{what}: {added} was not written"
    rest = {name: entry for name, entry in after.items() if name != added}
    assert_unchanged(before, rest, what)


# ---- the "no complete entry lost" check --------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _decoded(line: bytes) -> Any:
    """A line parsed the way pi reads it: UTF-8 decoded leniently (an invalid byte is
    no reason to skip a line), then strict JSON (no NaN); None if it does not parse."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(line.decode("utf-8", "surrogateescape"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return None


def entry_key(record: Any) -> str | None:
    """The id (pi, OpenClaw) or uuid (Claude Code) of a record, if it has one."""
    if not isinstance(record, dict):
        return None
    for name in ("id", "uuid"):
        value = record.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def glued_objects(line: bytes) -> list[Any]:
    """The objects of a line that is nothing but two or more JSON objects glued together
    (what SF001 splits); [] for anything else."""
    text = line.decode("utf-8", "surrogateescape").strip()
    decoder = json.JSONDecoder()
    found: list[Any] = []
    at = 0
    try:
        while at < len(text):
            value, at = decoder.raw_decode(text, at)
            if not isinstance(value, dict):
                return []
            found.append(value)
            while at < len(text) and text[at] in " \t\r":
                at += 1
    except (ValueError, RecursionError):
        return []
    return found if len(found) > 1 else []


def deletions(applied: Sequence[Diagnostic], first_pass: int) -> tuple[set[int], set[str]]:
    """Rows (of the input) and entry ids that the applied fixes delete.

    The first `first_pass` diagnostics describe the input; later ones come from the
    passes that repaired the written result again, whose rows are the result's, so
    only their entry ids count."""
    rows: set[int] = set()
    ids: set[str] = set()
    for number, diagnostic in enumerate(applied):
        fix = diagnostic.fix
        if fix is None:
            continue
        deleting = [edit for edit in fix.edits if edit.op is EditOp.DELETE]
        if not deleting:
            continue
        if diagnostic.entry_id is not None:
            ids.add(diagnostic.entry_id)
        if number < first_pass:
            rows.update(edit.row for edit in deleting)
    return rows, ids


def lost_entries(
    data: bytes, repaired: bytes, applied: Sequence[Diagnostic], first_pass: int
) -> list[str]:
    """Complete entries of `data` missing from `repaired` without a fix deleting them.

    An entry is a line that parses as one JSON object with an id or uuid (or one of
    the objects of a glued line). It is kept if the same line is in the output, or any
    output record has its id (a re-linked entry is rewritten). A label may go with a
    target that is gone (rules.md §8)."""
    out_lines = set(repaired.split(b"\n"))
    out_records = [_decoded(line) for line in repaired.split(b"\n")]
    out_ids = {key for key in map(entry_key, out_records) if key is not None}
    rows, ids = deletions(applied, first_pass)
    lost: list[str] = []
    for row, line in enumerate(data.split(b"\n"), 1):
        if row in rows or line in out_lines:
            continue
        record = _decoded(line)
        candidates = [record] if isinstance(record, dict) else glued_objects(line)
        for candidate in candidates:
            key = entry_key(candidate)
            if key is None or key in out_ids or key in ids:
                continue
            if candidate.get("type") == "label" and candidate.get("targetId") not in out_ids:
                continue
            lost.append(f"line {row}: {key!r} {line[:120]!r}")
    return lost


def repair_keeping_entries(
    source: Path, output: Path, settings: Settings, *, seconds: float = 60
) -> tuple[RepairResult, bytes]:
    """Repair `source` to `output` with the library and assert that no complete entry
    went missing unless an applied fix (in `RepairResult.applied`) deleted it."""
    data = source.read_bytes()
    with time_limit(seconds):
        result = repair_to(source, output, settings, filename=INPUT_NAME)
    first_pass = 0
    for diagnostic in result.applied:
        if diagnostic.filename != INPUT_NAME:
            break
        first_pass += 1
    repaired = output.read_bytes()
    lost = lost_entries(data, repaired, result.applied, first_pass)
    assert not lost, f"complete entries lost without a deleting fix: {lost[:5]}"
    return result, repaired


def children() -> set[int]:
    """The processes whose parent this one is."""
    pid = os.getpid()
    found: set[int] = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as handle:
            found.update(int(child) for child in handle.read().split())
    return found


def start_deaf(target: Callable[[], object]) -> threading.Thread:
    """A daemon thread that takes no signal meant for the process: the tests send
    SIGINT to the process as a terminal does, and a signal a helper thread takes runs
    its handler in the main thread even while the code under test holds signals back
    there (its threads, the server's request threads among them, inherit the mask)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return thread
