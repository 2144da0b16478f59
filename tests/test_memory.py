"""Memory bounds of a read, measured on the console command as users run it.

- The index: at most 64 bytes per entry, counted as the peak resident size of the
  largest process of a `check` minus that of a `check` of a header-only file (the
  interpreter and its modules), over a million and a half tiny entries.
- A huge line: at most 1.5 times its size plus 64 MiB, in all, whether it is a valid
  record or garbage.

`make bench` reports the same figures on larger files (five million entries, a
gigabyte line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from .bench_files import generators
from .robustness import LONG_AGO

ENTRIES: Final = 1_500_000
INDEX_BYTES_PER_ENTRY: Final = 64
LINE_BYTES: Final = 200 << 20

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="peak sizes are read from wait4 (Linux units)"
)


LAUNCHER: Final = """
import os, subprocess, sys
process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(process.pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)
"""
"""Runs a command and prints its exit code and peak resident size. The command must be
forked from a small process: the peak a process reports includes that of the process
it was forked from, before the exec (here, the test runner)."""


def peak_bytes(*args: object) -> int:
    """The peak resident size of the largest process of a `sessionfix` run (it and the
    workers it waited for), which must exit 0 or 1 and print nothing on stderr."""
    command = [sys.executable, "-m", "sessionfix", *map(str, args)]
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *command], capture_output=True, text=True, check=True
    )
    code, peak = map(int, done.stdout.split())
    assert code in (0, 1), f"{args}: exit {code}: {done.stderr[-2000:]}"
    assert done.stderr == "", f"{args}: {done.stderr[-2000:]}"
    return peak


def at_rest(path: Path) -> Path:
    os.utime(path, (LONG_AGO, LONG_AGO))
    return path


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_index_takes_at_most_64_bytes_an_entry(tmp_path: Path, jobs: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(generators().TINY_HEADER + b"\n")
    session = tmp_path / "tiny.jsonl"
    generators().generate_tiny(session, ENTRIES)
    at_rest(session)
    baseline = peak_bytes("check", "-q", "--jobs", jobs, empty)
    peak = peak_bytes("check", "-q", "--jobs", jobs, session)
    per_entry = (peak - baseline) / ENTRIES
    assert per_entry <= INDEX_BYTES_PER_ENTRY, f"{per_entry:.1f} bytes an entry"


@pytest.mark.parametrize("record", [True, False], ids=["record", "garbage"])
def test_a_huge_line_is_held_once(tmp_path: Path, record: bool) -> None:
    """`check` and `repair -o` of a file holding a 200 MiB line, read in one process and
    by workers: the line is never joined from its blocks, sliced, stripped or decoded
    whole, and nothing reads it back to name it."""
    session = tmp_path / "huge.jsonl"
    ending = b"\n" if record else b"\r\n"
    generators().generate_huge_line(session, LINE_BYTES, record=record, ending=ending)
    at_rest(session)
    limit = LINE_BYTES * 3 // 2 + (64 << 20)
    out = tmp_path / "out.jsonl"
    for args in (
        ["check", "-q", "--jobs", "1", session],
        ["check", "-q", "--jobs", "2", session],
        ["repair", "-q", "-o", out, session],
    ):
        peak = peak_bytes(*args)
        assert peak <= limit, f"{args[:3]}: peak {peak >> 20} MiB over {limit >> 20} MiB"
    session.unlink()
    out.unlink()


@pytest.mark.parametrize(
    ("line", "count"),
    [(b"", 1 << 20), (b" \t", 1 << 18), (b"not json", 1 << 18)],
    ids=["empty", "whitespace", "junk"],
)
def test_runs_of_blank_or_junk_lines_are_one_finding_in_constant_memory(
    tmp_path: Path, line: bytes, count: int
) -> None:
    """A header then a run of empty, whitespace-only or junk lines (each was a finding
    of its own, about a kilobyte: a million empty lines took 911 MB and 33 s): one
    finding with one edit, and `check` and `repair -o` of it take no more memory than
    of the header alone, give or take 32 MiB."""
    from sessionfix import Settings, check_file

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(generators().TINY_HEADER + b"\n")
    session = tmp_path / "run.jsonl"
    session.write_bytes(generators().TINY_HEADER + b"\n" + (line + b"\n") * count)
    at_rest(session)
    [found] = check_file(session, Settings(quiescence=0.0))
    assert (found.row, found.end_row) == (2, count + 1)
    assert found.fix is not None
    assert [(e.op.value, e.row, e.end_row) for e in found.fix.edits] == [("delete", 2, count + 1)]
    baseline = peak_bytes("check", "-q", empty)
    out = tmp_path / "out.jsonl"
    for args in (["check", "-q", session], ["repair", "-q", "--unsafe-fixes", "-o", out, session]):
        peak = peak_bytes(*args)
        assert peak - baseline <= 32 << 20, f"{args[0]}: {(peak - baseline) >> 20} MiB more"
    assert out.read_bytes() == empty.read_bytes()
