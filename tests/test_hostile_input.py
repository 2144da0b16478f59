"""Hostile inputs: huge lines, invalid UTF-8, NUL runs, paths that are not session files,
degenerate files, very deep parent chains, cycles and duplicate ids.

For each, `scan` / `check`, `repair -o` and `repair --in-place` must answer (a time limit
turns a hang into a failure) with exit 0, 1 or 2, print no traceback, report any error
as exactly one stderr line with exit 2, and change no file when they refuse or fail
(cli-and-safety.md §2, §8). Where the input can be salvaged, the repair must keep every
complete entry that no applied fix deleted, and copy untouched lines byte for byte.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson
import pytest

from sessionfix import Settings, check_file
from sessionfix.diagnostics import Applicability, Diagnostic, DropLine, Fix, Severity
from sessionfix.report.render import escape

from .conftest import FIXTURES, ROOT
from .diffs import apply_diff
from .pi_loader import load_with_pi, require_pi
from .robustness import (
    LONG_AGO,
    Entry,
    Run,
    assert_only_added,
    assert_unchanged,
    lost_entries,
    repair_keeping_entries,
    run_cli,
    tree_state,
)
from .sessions import HEADER_ID, Session, dumps, stamp

Capture = pytest.CaptureFixture[bytes]
LIMIT: Final = 60.0
"""Seconds any one command may take before the test fails as a hang."""
BIG: Final = 200 * 1024 * 1024
HEADER: Final = (
    dumps({"type": "session", "version": 3, "id": HEADER_ID, "timestamp": stamp(0), "cwd": "/p"})
    + "\n"
).encode()
CLONES: Final = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
BAD_UTF8: Final = b"\xff\xfe\xc3\x28"
"""Bytes that are not UTF-8: two never-valid bytes and a broken two-byte sequence."""


@dataclass
class Outcome:
    """What the commands of `exercise` did."""

    runs: dict[str, Run]
    repaired: bytes | None
    """The bytes `repair -o` wrote (None when it refused)."""


def at_rest(path: Path) -> Path:
    """Date the file back, so that no quiescence window keeps a fix (SF002) from applying."""
    os.utime(path, (LONG_AGO, LONG_AGO))
    return path


def exercise(path: Path, capsysbinary: Capture, *, light: bool = False) -> Outcome:
    """Run scan, check, repair --diff, repair -o and repair --in-place on `path` (only
    check, repair -o and --in-place when `light`), asserting the CLI contract and,
    after each run, what it may have written.

    Everything lives in `path.parent`: the read-only commands and every refused run
    leave it as it was, `repair -o` adds only its output, `repair --in-place` changes
    only the file (to the bytes `repair -o` wrote) and adds only its backup."""
    root = path.parent
    out = root / "repaired.out"
    runs: dict[str, Run] = {}
    before = tree_state(root)
    reading = {
        "scan": ["scan", "--no-progress", path],
        "check": ["check", "--no-progress", path],
        "diff": ["repair", "--diff", "--no-progress", path],
    }
    for name, argv in reading.items():
        if light and name != "check":
            continue
        runs[name] = run_cli(argv, capsysbinary, seconds=LIMIT)
        assert_unchanged(before, tree_state(root), name)

    runs["repair"] = run_cli(
        ["repair", "--no-progress", "-o", out, path], capsysbinary, seconds=LIMIT
    )
    repaired: bytes | None = None
    if runs["repair"].code == 2:
        assert_unchanged(before, tree_state(root), "repair -o (refused)")
    else:
        assert_only_added(before, tree_state(root), out.name, "repair -o")
        repaired = out.read_bytes()
        out.unlink()

    diff = runs.get("diff")
    if diff is not None and diff.code != 2:
        # The diff shows exactly what -o writes (and nothing when it writes the input).
        expected = path.read_bytes() if repaired is None else repaired
        assert apply_diff(path.read_bytes(), diff.out_bytes) == expected, "--diff and -o differ"

    argv = ["repair", "--in-place", "--quiescence", "0", "--no-progress", path]
    runs["in-place"] = run = run_cli(argv, capsysbinary, seconds=LIMIT)
    after = tree_state(root)
    if run.code == 2:
        assert_unchanged(before, after, "repair --in-place (refused)")
    else:
        assert_in_place(before, after, path, repaired)
    return Outcome(runs, repaired)


def assert_in_place(
    before: dict[str, Entry],
    after: dict[str, Entry],
    path: Path,
    repaired: bytes | None,
) -> None:
    """Only the file changed, to what `repair -o` wrote; its backup holds the original."""
    name = str(path.relative_to(path.parent))
    added = sorted(after.keys() - before.keys())
    assert before.keys() <= after.keys(), "repair --in-place removed a file"
    assert all(".sessionfix-bak-" in n for n in added), f"unexpected files {added}"
    others = [n for n in before if n != name and before[n] != after[n]]
    assert not others, f"repair --in-place changed {others}"
    if before[name][3] == after[name][3]:
        assert not added, "a backup of an unchanged file"
        return
    assert repaired is not None, "--in-place changed a file that repair -o refused"
    assert path.read_bytes() == repaired, "--in-place and -o disagree"
    assert len(added) <= 1
    if added:
        assert after[added[0]][3] == before[name][3], "the backup is not the original"


def assert_nothing_lost(tmp_path: Path, data: bytes, *, unsafe: bool) -> None:
    """Repair `data` through the library and check that no complete entry went missing
    unless an applied fix (reported in `RepairResult.applied`) deleted it."""
    work = tmp_path / ("lib-unsafe" if unsafe else "lib-safe")
    work.mkdir()
    source = work / "in.jsonl"
    source.write_bytes(data)
    at_rest(source)
    settings = Settings(unsafe_fixes=unsafe, quiescence=0.0)
    repair_keeping_entries(source, work / "out.jsonl", settings, seconds=LIMIT)


def write(tmp_path: Path, data: bytes, name: str = "s.jsonl") -> Path:
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return at_rest(path)


# ---- 200 MiB on one line ------------------------------------------------------------------


def write_big(path: Path, head: bytes, fill: bytes, tail: bytes, size: int) -> None:
    """`head`, then `fill` repeated up to `size` bytes in all, then `tail`: written in
    1 MiB pieces, so the test never holds the line in memory."""
    piece = fill * ((1 << 20) // len(fill))
    remaining = size - len(head) - len(tail)
    with open(path, "wb") as handle:
        handle.write(head)
        while remaining > 0:
            handle.write(piece[:remaining])
            remaining -= len(piece)
        handle.write(tail)


RECORD_HEAD: Final = (
    b'{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-07-24T06:21:04.000Z",'
    b'"message":{"role":"user","content":[{"type":"text","text":"'
)
RECORD_TAIL: Final = b'"}],"timestamp":1784874064000}}\n'


@pytest.mark.parametrize(
    ("head", "fill", "tail", "problems"),
    [
        pytest.param(
            HEADER + RECORD_HEAD, b"0123456789abcdef", RECORD_TAIL, {"SF603"}, id="record"
        ),
        pytest.param(b"", b"not json, ", b"\n", None, id="not-json"),
    ],
)
def test_a_200_mb_line_is_read_and_repaired(
    tmp_path: Path,
    capsysbinary: Capture,
    head: bytes,
    fill: bytes,
    tail: bytes,
    problems: set[str] | None,
) -> None:
    """A ~200 MiB line: a valid record after a pi header is reported and copied unchanged
    by `repair -o`; plain text is no session file, and both commands refuse it with one
    line. Each within the time limit, writing nothing but the output. (Only these two
    commands: every run reads 200 MB.)"""
    path = tmp_path / "big.jsonl"
    write_big(path, head, fill, tail, BIG)
    at_rest(path)
    before = tree_state(tmp_path)
    check = run_cli(["check", "--output-format", "concise", path], capsysbinary, seconds=LIMIT)
    assert_unchanged(before, tree_state(tmp_path), "check")
    out = tmp_path / "out.jsonl"
    repair = run_cli(["repair", "-q", "-o", out, path], capsysbinary, seconds=LIMIT)
    after = tree_state(tmp_path)
    if problems is None:
        for run in (check, repair):
            assert run.code == 2
            assert "not a session file of a known format (1 of 1 lines" in run.err
        assert_unchanged(before, after, "repair -o")
    else:
        codes = {line.split()[1] for line in check.out.splitlines() if line.startswith(str(path))}
        assert codes == problems
        assert check.code == 0
        assert_only_added(before, after, out.name, "repair -o")
        assert repair.code == check.code
        assert after[out.name][3] == before[path.name][3], "nothing to fix, yet the copy differs"
        out.unlink()
    # pytest keeps the last runs' temp dirs: do not leave 200 MB behind in each.
    path.unlink()


# ---- invalid UTF-8 -------------------------------------------------------------------------


def invalid_utf8_session() -> tuple[bytes, list[bytes]]:
    """A pi session with invalid UTF-8 inside JSON strings (in a record left alone, in a
    record re-linked past a dropped clone, in a glued record) and outside any string (a
    garbage line). Returns the file and the lines that must survive byte for byte."""
    s = Session()
    s.user("hello")
    s.assistant([])
    s.user("clone me", ts=1_784_874_000_000)
    s.user("clone me", ts=1_784_874_000_000)  # SF201: dropped, its child re-linked
    s.user("child of the clone MARK")
    s.assistant([])
    s.user("left alone MARK")
    s.assistant([])
    s.user("glued MARK")
    s.assistant([])
    lines = [line.encode().replace(b"MARK", BAD_UTF8) for line in s.lines]
    garbage = b"garbage " + BAD_UTF8 + b" outside any string"
    untouched = [lines[7], garbage, lines[9]]
    body = [*lines[:8], garbage, lines[8], lines[9] + lines[10]]
    return b"".join(line + b"\n" for line in body), untouched


def test_invalid_utf8_survives_repair_byte_for_byte(tmp_path: Path, capsysbinary: Capture) -> None:
    """Invalid UTF-8 inside a string is data pi reads (it decodes leniently): every
    invalid byte sequence must still be in the repair, lines no fix touches must be
    copied byte for byte (a glued record's bytes included), and no entry may go."""
    data, untouched = invalid_utf8_session()
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary)
    assert outcome.runs["check"].code == 1
    repaired = outcome.repaired
    assert repaired is not None
    assert repaired.count(BAD_UTF8) == data.count(BAD_UTF8)
    out_lines = repaired.split(b"\n")
    for line in untouched:
        assert line in out_lines, line
    assert b"clone me" in repaired
    assert repaired.count(b'"text":"clone me"') == 1
    assert_nothing_lost(tmp_path, data, unsafe=False)
    assert_nothing_lost(tmp_path, data, unsafe=True)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(b'{"type":"message",' + BAD_UTF8 + b'"id":"zz"}', id="between-tokens"),
        pytest.param(b'{"type":"message","id":"a00000ff","text":"\xe2\x82', id="torn-mid-char"),
        pytest.param(b"\xef\xbb\xbf" + BAD_UTF8, id="bom-then-invalid"),
        pytest.param(BAD_UTF8 * 1000, id="only-invalid"),
    ],
)
def test_invalid_utf8_outside_strings(tmp_path: Path, capsysbinary: Capture, damage: bytes) -> None:
    """Invalid UTF-8 between JSON tokens, in a torn last line cut inside a multi-byte
    character, after a BOM, or alone: no command fails, no entry is lost."""
    s = Session()
    s.user("first")
    s.assistant([])
    data = ("".join(line + "\n" for line in s.lines)).encode() + damage
    path = write(tmp_path, data)
    exercise(path, capsysbinary)
    assert_nothing_lost(tmp_path, data, unsafe=False)
    assert_nothing_lost(tmp_path, data, unsafe=True)


# ---- escaped surrogates and raw bytes in rewritten records -------------------------------

ESCAPED: Final = rb"\udc9f"
"""A lone-surrogate escape: `JSON.parse` gives U+DC9F."""
RAW: Final = b"\x9f"
"""The same low byte, raw: not UTF-8, so pi's lenient decoding gives U+FFFD."""
ODD_TEXT: Final = (
    b"a" + ESCAPED + b"b a" + RAW + b"b " + rb"\udbff" + RAW + b" " + b"\xed\xb2\x9f" + rb" \ud800"
)
"""Escaped and raw forms side by side, an escaped high surrogate before a raw byte, a
surrogate's UTF-8 bytes (three invalid bytes), and a lone high surrogate escape."""
ODD_MEMBER: Final = b'"k' + ESCAPED + b'":"' + RAW + b'","k' + RAW + b'":"' + ESCAPED + b'"'
"""Both forms in keys and in values."""


def odd_line(fields: str, message: str) -> bytes:
    """A pi entry (compact, in the writer's key order) with `ODD_MEMBER` among the entry's
    and the message's fields; `ODD` in either stands for `ODD_TEXT`."""
    line = '{"type":"message",' + fields + ',"ODD_MEMBER","message":' + message + "}"
    return line.encode().replace(b'"ODD_MEMBER"', ODD_MEMBER).replace(b"ODD", ODD_TEXT)


def odd_session() -> tuple[bytes, dict[int, bytes]]:
    """A pi session whose rewritten records hold `ODD_TEXT` and `ODD_MEMBER`: a stale read
    (SF301 replaces its text), a user message re-linked past a dropped clone (SF201), an
    assistant with leaked `partialJson` (SF601). Returns the file and, by line index,
    what each rewritten line must become: its own bytes but for the intended change."""
    ts = '"timestamp":"2026-07-24T06:21:0{n}.000Z"'
    long_text = "file contents " * 20
    lines = [
        HEADER.rstrip(b"\n"),
        odd_line(
            '"id":"b0000001","parentId":null,' + ts.format(n=1),
            '{"role":"user","content":[{"type":"text","text":"read it"}],"timestamp":1}',
        ),
        odd_line(
            '"id":"b0000002","parentId":"b0000001",' + ts.format(n=2),
            '{"role":"assistant","content":[{"type":"toolCall","id":"toolu_r","name":"read",'
            '"arguments":{"path":"notes.txt"}}],"stopReason":"toolUse","timestamp":2}',
        ),
        odd_line(
            '"id":"b0000003","parentId":"b0000002",' + ts.format(n=3),
            '{"role":"toolResult","toolCallId":"toolu_r","toolName":"read","content":[{"type":'
            f'"text","text":"{long_text}ODD"}}],"details":{{"ODD":"ODD"}},"isError":false,'
            '"timestamp":3}',
        ),
        odd_line(
            '"id":"b0000004","parentId":"b0000003",' + ts.format(n=4),
            '{"role":"assistant","content":[{"type":"toolCall","id":"toolu_w","name":"write",'
            '"arguments":{"path":"notes.txt","content":"new"}}],"stopReason":"toolUse",'
            '"timestamp":4}',
        ),
        odd_line(
            '"id":"b0000005","parentId":"b0000004",' + ts.format(n=5),
            '{"role":"toolResult","toolCallId":"toolu_w","toolName":"write","content":[{"type":'
            '"text","text":"Successfully wrote 3 bytes"}],"isError":false,"timestamp":5}',
        ),
        *[
            odd_line(
                f'"id":"b000000{n}","parentId":"b000000{n - 1}",' + ts.format(n=n),
                '{"role":"user","content":[{"type":"text","text":"again ODD"}],"timestamp":6}',
            )
            for n in (6, 7)
        ],
        odd_line(
            '"id":"b0000008","parentId":"b0000007",' + ts.format(n=8),
            '{"role":"user","content":[{"type":"text","text":"child ODD"}],"ODD":"ODD",'
            '"timestamp":8}',
        ),
        odd_line(
            '"id":"b0000009","parentId":"b0000008",' + ts.format(n=9),
            '{"role":"assistant","content":[{"type":"thinking","thinking":"ODD"},{"type":'
            '"toolCall","id":"toolu_p","name":"bash","arguments":{"ODD":"ODD"},"partialJson":'
            '"{\\"pa"}],"stopReason":"aborted","timestamp":9}',
        ),
    ]
    placeholder = (
        b'[{"type":"text","text":"[sessionfix: stale read of notes.txt removed - file was '
        b'fully rewritten later (call toolu_w); re-read it if needed]"}]'
    )
    read_content = lines[3].split(b'"content":', 1)[1].split(b',"details"', 1)[0]
    rewritten = {
        3: lines[3].replace(read_content, placeholder),
        8: lines[8].replace(b'"parentId":"b0000007"', b'"parentId":"b0000006"'),
        9: lines[9].replace(b',"partialJson":"{\\"pa"', b""),
    }
    return b"".join(line + b"\n" for line in lines), rewritten


def odd_v1_session() -> tuple[bytes, dict[int, bytes]]:
    """A pi v1 session: an orphan result (SF401) dropped before a compaction whose kept
    position then moves down by one, the compaction holding `ODD_TEXT` and `ODD_MEMBER`."""
    v1_header = HEADER.replace(b'"version":3,', b"").rstrip(b"\n")
    ts = '"timestamp":"2026-07-24T06:21:0{n}.000Z"'
    lines = [
        v1_header,
        odd_line(ts.format(n=1), '{"role":"user","content":"hi","timestamp":1}'),
        odd_line(
            ts.format(n=2),
            '{"role":"toolResult","toolCallId":"toolu_gone","toolName":"bash","content":'
            '[{"type":"text","text":"orphan"}],"isError":false,"timestamp":2}',
        ),
        odd_line(ts.format(n=3), '{"role":"user","content":"ODD","timestamp":3}'),
        odd_line(
            ts.format(n=4),
            '{"role":"assistant","content":[{"type":"text","text":"ODD"}],"stopReason":"stop",'
            '"timestamp":4}',
        ),
        (
            '{"type":"compaction",' + ts.format(n=5) + ',"summary":"ODD","ODD_MEMBER",'
            '"firstKeptEntryIndex":3,"tokensBefore":900}'
        )
        .encode()
        .replace(b'"ODD_MEMBER"', ODD_MEMBER)
        .replace(b"ODD", ODD_TEXT),
        odd_line(ts.format(n=6), '{"role":"user","content":"next","timestamp":6}'),
    ]
    rewritten = {5: lines[5].replace(b'"firstKeptEntryIndex":3', b'"firstKeptEntryIndex":2')}
    return b"".join(line + b"\n" for line in lines), rewritten


@pytest.mark.parametrize(
    ("build", "dropped"), [(odd_session, (7,)), (odd_v1_session, (2,))], ids=["v3", "v1"]
)
def test_escaped_surrogates_and_raw_bytes_keep_their_values_through_rewrites(
    tmp_path: Path,
    capsysbinary: Capture,
    build: Callable[[], tuple[bytes, dict[int, bytes]]],
    dropped: tuple[int, ...],
) -> None:
    """`\\udc9f` (U+DC9F to `JSON.parse`) and a raw 0x9F byte (U+FFFD to pi) in the keys
    and values of records that fixes rewrite (a stale read, a re-link, leaked
    `partialJson`, a v1 kept position): each rewritten line is its input bytes but for
    the intended change, and pi reads every value as before but for those changes."""
    data, rewritten = build()
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary)
    assert outcome.repaired is not None
    expected = [rewritten.get(n, line) for n, line in enumerate(data.split(b"\n"))]
    expected = [line for n, line in enumerate(expected) if n not in dropped]
    assert outcome.repaired.split(b"\n") == expected, "a rewritten record changed beyond its fix"

    original, repaired = tmp_path / "original.jsonl", tmp_path / "repaired.jsonl"
    original.write_bytes(data)
    repaired.write_bytes(outcome.repaired)
    loaded = load_with_pi([original, repaired])
    assert loaded[original].skipped == loaded[repaired].skipped == ()
    before, after = loaded[original].messages, loaded[repaired].messages
    if build is odd_v1_session:
        # The same summary, and the kept range still starts at the same entry.
        assert after == before
        assert before[0]["summary"] == ODD_VALUE
        return
    assert before[2].pop("content") != after[2].pop("content")
    for block in before[-1]["content"]:
        block.pop("partialJson", None)
    del before[6]  # the dropped clone
    assert after == before
    assert before[6]["content"][0]["text"] == "child " + ODD_VALUE


ODD_VALUE: Final = "a\udc9fb a\ufffdb \udbff\ufffd \ufffd\ufffd\ufffd \ud800"
"""`ODD_TEXT` as pi reads it."""


@pytest.mark.parametrize("odd_id", [b"a" + RAW, b"a" + ESCAPED, rb"a\ud800"], ids=repr)
def test_a_record_inserted_below_an_odd_id_names_it_exactly(
    tmp_path: Path, capsysbinary: Capture, odd_id: bytes
) -> None:
    """An unanswered call in an assistant entry whose id holds a raw byte or a lone
    surrogate escape: the synthetic result SF402 inserts below it names that id in the
    same bytes (`\\udc9f` written raw would name a record pi does not have)."""
    ts = '"timestamp":"2026-07-24T06:21:0{n}.000Z"'
    lines = [
        HEADER.rstrip(b"\n"),
        '{"type":"message","id":"u1","parentId":null,'
        + ts.format(n=1)
        + ',"message":{"role":"user","content":"hi","timestamp":1}}',
        '{"type":"message","id":"ODD","parentId":"u1",'
        + ts.format(n=2)
        + ',"message":{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":'
        '"bash","arguments":{}}],"stopReason":"toolUse","timestamp":2}}',
        '{"type":"message","id":"u2","parentId":"ODD",'
        + ts.format(n=3)
        + ',"message":{"role":"user","content":"next","timestamp":3}}',
        '{"type":"message","id":"a2","parentId":"u2",'
        + ts.format(n=4)
        + ',"message":{"role":"assistant","content":"ok","stopReason":"stop","timestamp":4}}',
    ]
    data = b"".join(
        (line if isinstance(line, bytes) else line.encode().replace(b"ODD", odd_id)) + b"\n"
        for line in lines
    )
    path = write(tmp_path, data)
    exercise(path, capsysbinary, light=True)
    out = tmp_path / "unsafe.jsonl"
    run = run_cli(["repair", "-q", "--unsafe-fixes", "-o", out, path], capsysbinary)
    assert run.code == 0
    repaired = out.read_bytes().split(b"\n")
    assert b'"parentId":"' + odd_id + b'"' in repaired[3]
    assert b'"toolCallId":"t1"' in repaired[3]
    inserted_id = repaired[3].split(b'"id":"', 1)[1].split(b'"', 1)[0]
    assert repaired[4] == data.split(b"\n")[3].replace(
        b'"parentId":"' + odd_id + b'"', b'"parentId":"' + inserted_id + b'"'
    )


CLAUDE_EXAMPLES: Final = sorted((ROOT / "examples" / "sessions").glob("claude-*.jsonl"))


def _with_member(data: bytes, member: bytes) -> bytes:
    """`data` with `member` written first into every line that holds one JSON object."""
    return b"\n".join(
        line[:1] + member + b"," + line[1:] if line.startswith(b"{") else line
        for line in data.split(b"\n")
    )


@pytest.mark.parametrize("example", CLAUDE_EXAMPLES, ids=[p.name for p in CLAUDE_EXAMPLES])
def test_a_lone_surrogate_in_a_key_of_every_claude_record_changes_no_finding(
    tmp_path: Path, capsysbinary: Capture, example: Path
) -> None:
    """A member whose key holds a lone surrogate escape and a byte that is not UTF-8
    (both of which `JSON.parse` reads), in every record of a Claude Code session: the
    findings are those with a plain member of the same length in its place (what a
    replayed record repeats was written again with its keys as Python text: internal
    error: UnicodeEncodeError)."""
    data = example.read_bytes()
    odd = write(tmp_path, _with_member(data, b'"k\\ud800\xff":"\\udc00 v \\ud83d"'), example.name)
    plain = tmp_path / "plain" / example.name
    plain.parent.mkdir()
    plain.write_bytes(_with_member(data, b'"kAAAAAAA":"AAAAAA v AAAAAA"'))
    at_rest(plain)

    def found(path: Path) -> list[tuple[str, int]]:
        return [(d.code, d.row) for d in check_file(path)]

    assert found(odd) == found(plain)
    exercise(odd, capsysbinary, light=True)


# ---- NUL bytes -----------------------------------------------------------------------------


def small_session() -> list[bytes]:
    s = Session()
    s.user("first")
    s.assistant([])
    s.user("second")
    s.assistant([])
    return [line.encode() for line in s.lines]


NUL_CASES: Final[dict[str, Callable[[list[bytes]], bytes]]] = {
    "line-start": lambda ls: b"\n".join([ls[0], b"\0" * 64 + ls[1], *ls[2:]]) + b"\n",
    "line-end": lambda ls: b"\n".join([ls[0], ls[1] + b"\0" * 7, *ls[2:]]) + b"\n",
    "mid-file-line": lambda ls: b"\n".join([*ls[:2], b"\0" * 4096, *ls[2:]]) + b"\n",
    "mid-file-run": lambda ls: b"\n".join(ls[:2]) + b"\n" + b"\0" * 5000 + b"\n".join(ls[2:]),
    "inside-a-string": lambda ls: b"\n".join([*ls[:3], ls[3].replace(b"second", b"se\0c"), ls[4]]),
    "file-start": lambda ls: b"\0" * 100 + b"\n".join(ls) + b"\n",
    "tail": lambda ls: b"\n".join(ls) + b"\n" + b"\0" * 8192,
    "whole-file": lambda ls: b"\0" * 65536,
    "whole-file-lines": lambda ls: (b"\0" * 100 + b"\n") * 100,
}


@pytest.mark.parametrize("case", NUL_CASES)
def test_nul_runs(tmp_path: Path, capsysbinary: Capture, case: str) -> None:
    """Zero-filled regions (a crash after the size grew but before the data landed):
    every command answers, the repair loses no entry, and a record that only has NULs
    before or after it on its line is still in the repair (SF004 strips the NULs)."""
    lines = small_session()
    data = NUL_CASES[case](lines)
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary)
    assert outcome.runs["check"].code == 1, "NUL bytes went unreported"
    assert_nothing_lost(tmp_path, data, unsafe=False)
    assert_nothing_lost(tmp_path, data, unsafe=True)
    if case in ("line-start", "line-end"):
        assert outcome.repaired is not None
        assert lines[1] in outcome.repaired.split(b"\n"), "the record beside the NULs is gone"
        assert b"\0" not in outcome.repaired


# ---- records that only look alike --------------------------------------------------------

ALIKE: Final = {
    "escaped-surrogate-and-raw-byte": (b'"t":"\\udc9f"', b'"t":"\x9f"'),
    "long-integers": (b'"n":123456789012345678901234567890', b'"n":123456789012345678901234567891'),
    "exponent-and-decimal": (b'"n":1e2', b'"n":100.0'),
    "escaped-letter": (b'"t":"A"', b'"t":"\\u0041"'),
    "repeated-key": (b'"t":"x","t":"y"', b'"t":"y"'),
    "zero-and-negative-zero": (b'"n":0', b'"n":-0'),
}


@pytest.mark.parametrize("case", ALIKE)
def test_records_that_parse_alike_are_not_copies(
    tmp_path: Path, capsysbinary: Capture, case: str
) -> None:
    """Two records with one id whose bytes differ are both kept by every repair, even
    where a parser would call their values equal (or `JSON.parse` would not)."""
    first, second = ALIKE[case]
    lines = small_session()
    # A new user entry below the last, twice with one id: only the payload differs.
    template = lines[3].replace(b'"id":"a0000003"', b'"id":"b0000001"')
    template = template.replace(b'"parentId":"a0000002"', b'"parentId":"a0000004"')
    template = template[:-1] + b",PAYLOAD}"
    body = [*lines, template.replace(b"PAYLOAD", first), template.replace(b"PAYLOAD", second)]
    data = b"\n".join(body) + b"\n"
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary)
    assert outcome.repaired is not None
    kept = outcome.repaired.split(b"\n")
    assert body[-2] in kept
    assert body[-1] in kept
    assert_nothing_lost(tmp_path, data, unsafe=True)


# ---- a writer holding the session open -------------------------------------------------


def test_a_session_held_open_for_writing_is_not_swapped(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """An agent that keeps its session open would append to the replaced file after the
    swap: `repair --in-place` refuses (one line naming the process) and changes nothing,
    while every reading command and `-o` still answer."""
    data = b"\n".join(small_session()) + b"\n\n"
    path = write(tmp_path, data)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_FOR_WRITING, str(path)],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == b"open\n"
        outcome = exercise(path, capsysbinary)
    finally:
        holder.kill()
        holder.wait()
    refused = outcome.runs["in-place"]
    assert refused.code == 2
    assert f"open for writing by pid {holder.pid}" in refused.errors[0]
    assert path.read_bytes() == data
    assert outcome.repaired is not None


HOLD_FOR_WRITING: Final = (
    "import sys, time\n"
    "handle = open(sys.argv[1], 'ab')\n"
    "print('open', flush=True)\n"
    "time.sleep(120)\n"
)


# ---- what --diff shows ---------------------------------------------------------------------


def test_the_diff_shows_what_a_later_pass_drops(
    tmp_path: Path, capsysbinary: Capture, corpus: Path
) -> None:
    """A copy of line 6 appended to a real session: dropping it (SF104) moves the leaf
    onto an orphan tool result, which a second pass drops (SF401). `exercise` applies the
    diff to the input and compares it with what `-o` wrote; the orphan must be gone."""
    data = (corpus / "openclaw" / "letta-trajectory__pi-cleanup.v3.corrupt.jsonl").read_bytes()
    path = write(tmp_path, data + data.split(b"\n")[5] + b"\n")
    outcome = exercise(path, capsysbinary)
    assert outcome.repaired is not None
    assert b'"id":"77ab90ef"' not in outcome.repaired
    assert b'-{"type":"message","id":"77ab90ef"' in outcome.runs["diff"].out_bytes


# ---- paths that are not session files ------------------------------------------------------


def refused_everywhere(path: Path, capsysbinary: Capture, *, scan_walks: bool = False) -> None:
    """Every command exits 2 with one error line and changes nothing (a directory given
    to `scan` is walked instead)."""
    outcome = exercise(path, capsysbinary)
    for name, run in outcome.runs.items():
        if name == "scan" and scan_walks:
            continue
        assert run.code == 2, f"{name}: exit {run.code}"
        assert str(path) in run.errors[0] or path.name in run.errors[0], run.errors


def session_lines() -> list[bytes]:
    """A pi session with CRLF endings, blank lines and a missing final newline: what a
    line-level fix would rewrite, had the bytes been a session."""
    lines = [HEADER.rstrip(b"\n"), *small_session()[1:]]
    return [line + b"\r\n\n" for line in lines]


def sqlite_store(path: Path) -> bytes:
    """An SQLite database whose rows hold pi lines, the header first (as OpenClaw's store
    keeps a session): its pages hold JSON records, blank lines and CRLF pairs."""
    import sqlite3

    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE transcript_events (seq INTEGER PRIMARY KEY, event_json TEXT)")
        for seq, line in enumerate(session_lines() * 50):
            db.execute("INSERT INTO transcript_events VALUES (?, ?)", (seq, line.decode()))
        db.commit()
    return path.read_bytes()


def sqlite_side_file(mode: str) -> Callable[[Path], bytes]:
    """The write-ahead log or the rollback journal beside an SQLite store whose rows hold
    pi lines, copied while the store is open: pages of pi records. A journal's header is
    zeroed once its transaction commits (`persist` mode), so only its pages tell."""

    def build(path: Path) -> bytes:
        import sqlite3

        store = path.with_name("store.sqlite")
        text = b"".join(session_lines()).decode()
        with closing(sqlite3.connect(store)) as db:
            db.execute(f"PRAGMA journal_mode={mode}")
            db.execute("PRAGMA wal_autocheckpoint=0")
            db.execute("CREATE TABLE transcript_events (event_json TEXT)")
            for _ in range(5):
                db.execute("INSERT INTO transcript_events VALUES (?)", (text,))
            db.commit()
            if mode == "persist":
                db.execute("UPDATE transcript_events SET event_json = event_json || ' '")
                db.commit()
            side = store.with_name(store.name + ("-wal" if mode == "wal" else "-journal"))
            data = side.read_bytes()
        for leftover in path.parent.glob("store.sqlite*"):
            leftover.unlink()
        path.write_bytes(data)
        return data

    return build


def compressed(kind: str) -> Callable[[Path], bytes]:
    def build(path: Path) -> bytes:
        data = b"".join(session_lines())
        # A zstd frame's magic number, then the bytes unpacked: only the signature matters.
        packed = gzip.compress(data) if kind == "gzip" else b"\x28\xb5\x2f\xfd" + data
        path.write_bytes(packed)
        return packed

    return build


def tar_archive(path: Path) -> bytes:
    """A tar archive holding a session: its lines are the session's, after a binary header."""
    import io
    import tarfile

    data = b"".join(session_lines())
    member = tarfile.TarInfo("session.jsonl")
    member.size = len(data)
    with tarfile.open(path, "w") as archive:
        archive.addfile(member, io.BytesIO(data))
    return path.read_bytes()


def unlabelled_binary(path: Path) -> bytes:
    """Binary data with no known signature, a session header first: its later "lines"
    hold blank lines and CRLF pairs between bytes that are no JSON."""
    noise = bytes(b for b in range(256) if b != ord("\n")) * 4
    chunks = [HEADER]
    for k in range(40):
        chunks.append(noise[k:] + b"\r\n\n" + noise[: 255 - k] + b"\n")
    data = b"".join(chunks)
    path.write_bytes(data)
    return data


def long_text(path: Path) -> bytes:
    """Text of many lines and no JSON at all (base64 data): refused without reading on."""
    data = b"".join(b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo%06d=\n" % k for k in range(5000))
    path.write_bytes(data)
    return data


def text_log(path: Path) -> bytes:
    """A log file with one JSON object (no session record) among many plain lines."""
    data = b'{"level":"info","msg":"start"}\n' + b"".join(
        f"12:00:{k:02d} INFO step {k}\r\n\n".encode() for k in range(30)
    )
    path.write_bytes(data)
    return data


@pytest.mark.parametrize(
    ("build", "what"),
    [
        pytest.param(sqlite_store, "an SQLite database", id="sqlite"),
        pytest.param(compressed("gzip"), "gzip-compressed data", id="gzip"),
        pytest.param(compressed("zstd"), "zstd-compressed data", id="zstd"),
        pytest.param(tar_archive, "a tar archive", id="tar"),
        pytest.param(sqlite_side_file("wal"), "an SQLite write-ahead log", id="sqlite-wal"),
        pytest.param(sqlite_side_file("persist"), "SQLite database pages", id="sqlite-journal"),
        pytest.param(
            unlabelled_binary,
            (
                "binary data: 4952 control bytes no JSON text holds; --format FORMAT reads it as "
                "a session anyway"
            ),
            id="binary",
        ),
        pytest.param(text_log, "30 of 31 lines are not JSON objects", id="log"),
        pytest.param(
            long_text,
            "its first 1000 lines that are not blank hold no JSON object",
            id="long-text",
        ),
    ],
)
def test_bytes_that_are_not_jsonl_are_never_fixed(
    tmp_path: Path, capsysbinary: Capture, build: Callable[[Path], bytes], what: str
) -> None:
    """No fix may touch bytes that are not a session, even where they hold JSON records,
    blank lines or CRLF pairs (an OpenClaw SQLite store, compressed rollouts, binary
    data, a log): every command says once that the file is not a session file and exits
    2, and the file is left as it was (an SQLite store still passes its integrity check)."""
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "openclaw-agent.sqlite"
    data = build(path)
    at_rest(path)
    outcome = exercise(path, capsysbinary)
    for name, run in outcome.runs.items():
        assert run.code == 2, f"{name}: exit {run.code}"
        expected = f"sessionfix: error: {path}: not a session file of a known format ({what})"
        assert run.errors == [expected], f"{name}: {run.errors}"
        assert "SF0" not in run.out, f"{name} reported line problems in a non-session file"
    assert path.read_bytes() == data
    if what == "an SQLite database":
        import sqlite3

        with closing(sqlite3.connect(path)) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_damaged_session_is_still_a_session(tmp_path: Path, capsysbinary: Capture) -> None:
    """A session whose header is right reads as one however many lines of text junk it
    holds; binary junk in one (a block of random bytes) is refused unless `--format`
    says what the file is, and then checked and repaired like any session."""
    lines = small_session()
    junk = [b"some text", b"more text", b"and more"]
    path = write(tmp_path, b"\n".join([*lines[:2], *junk]) + b"\n", "junk.jsonl")
    outcome = exercise(path, capsysbinary)
    assert outcome.runs["check"].code == 1
    assert ": SF008 " in outcome.runs["check"].out

    noise = random.Random(7).randbytes(4096)
    data = b"\n".join([*lines[:2], noise, *lines[2:]]) + b"\n"
    spliced = write(tmp_path, data, "spliced.jsonl")
    refused = run_cli(["check", spliced], capsysbinary, seconds=LIMIT)
    assert refused.code == 2
    assert "binary data" in refused.errors[0]
    assert "--format FORMAT reads it as a session anyway" in refused.errors[0]
    forced = run_cli(["check", "--format", "pi", spliced], capsysbinary, seconds=LIMIT)
    assert forced.code == 1
    assert ": SF008 " in forced.out


def test_a_directory_is_refused(tmp_path: Path, capsysbinary: Capture) -> None:
    """A directory named like a session is no session: check and repair refuse it."""
    folder = tmp_path / "run" / "dir.jsonl"
    folder.mkdir(parents=True)
    (folder / "inner.jsonl").write_bytes(HEADER)
    refused_everywhere(folder, capsysbinary, scan_walks=True)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, capsysbinary: Capture) -> None:
    """Opening a FIFO for reading blocks until a writer comes: every command must refuse
    it instead (or the time limit fails the test). `scan` of a folder holding one must
    not block either."""
    folder = tmp_path / "run"
    folder.mkdir()
    fifo = folder / "pipe.jsonl"
    os.mkfifo(fifo)
    refused_everywhere(fifo, capsysbinary)
    before = tree_state(folder)
    run = run_cli(["scan", "--no-progress", folder], capsysbinary, seconds=LIMIT)
    assert run.code in (0, 2)
    assert_unchanged(before, tree_state(folder), "scan of a folder with a FIFO")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_where_documents_are_kept_does_not_block_a_scan(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """A FIFO named as a CodeWhale session document, in a folder CodeWhale keeps them
    in: telling a document from another JSON file reads its first bytes, which must
    not open a FIFO (or the time limit fails the test)."""
    folder = tmp_path / ".codewhale" / "sessions"
    folder.mkdir(parents=True)
    fifo = folder / "s.json"
    os.mkfifo(fifo)
    run = run_cli(["scan", "--no-progress", folder], capsysbinary, seconds=LIMIT)
    assert run.code in (0, 2)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_missing_path_is_refused(tmp_path: Path, capsysbinary: Capture) -> None:
    """A path that does not exist: one error line, exit 2, nothing created."""
    folder = tmp_path / "run"
    folder.mkdir()
    refused_everywhere(folder / "missing.jsonl", capsysbinary)


def test_a_symlink_loop_is_refused(tmp_path: Path, capsysbinary: Capture) -> None:
    """A symbolic link that points at itself (ELOOP) is refused like a missing file."""
    folder = tmp_path / "run"
    folder.mkdir()
    loop = folder / "loop.jsonl"
    loop.symlink_to(loop.name)
    refused_everywhere(loop, capsysbinary)


@pytest.mark.parametrize("device", [d for d in ("/dev/zero", "/dev/null") if Path(d).exists()])
def test_a_device_is_refused(tmp_path: Path, capsysbinary: Capture, device: str) -> None:
    """A character device (an endless /dev/zero) is no session: refused, not read
    forever. Run from a folder of its own, so that `repair -o` has somewhere to write."""
    folder = tmp_path / "run"
    folder.mkdir()
    out = folder / "out.jsonl"
    for argv in (["check", device], ["repair", "-o", out, device]):
        run = run_cli(argv, capsysbinary, seconds=LIMIT)
        assert run.code == 2
    assert not out.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_refused(tmp_path: Path, capsysbinary: Capture) -> None:
    """A file without read permission: one error line, exit 2, nothing changed."""
    path = write(tmp_path, HEADER + small_session()[1] + b"\n")
    path.chmod(0)
    try:
        refused_everywhere(path, capsysbinary)
    finally:
        path.chmod(0o600)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory whatever its mode")
def test_an_unreadable_folder_is_reported_by_scan(tmp_path: Path, capsysbinary: Capture) -> None:
    """`scan` of a tree with a folder it may not list reports it on one line (exit 2)."""
    folder = tmp_path / "run"
    (folder / "closed").mkdir(parents=True)
    (folder / "open.jsonl").write_bytes(HEADER)
    (folder / "closed").chmod(0)
    try:
        run = run_cli(["scan", "--no-progress", folder], capsysbinary, seconds=LIMIT)
    finally:
        (folder / "closed").chmod(0o700)
    assert run.code == 2


def test_an_error_about_a_path_with_a_newline_is_one_line(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """A file name may hold any byte but "/" and NUL: an error naming it must still be
    one stderr line, or scripts that read errors line by line mis-parse them."""
    folder = tmp_path / "run"
    folder.mkdir()
    missing = folder / "two\nlines.jsonl"
    for argv in (["check", missing], ["repair", "-o", folder / "out.jsonl", missing]):
        run_cli(argv, capsysbinary, seconds=LIMIT)


def test_an_entry_id_with_a_newline_stays_on_its_line(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """Ids come from the session file: printed, they must not start new output lines
    (cli-and-safety.md §11.2, untrusted text is escaped)."""
    record = {
        "type": "message",
        "id": "a\nFAKE:1:1: SF999 injected",
        "parentId": "gone",
        "timestamp": stamp(1),
        "message": {"role": "user", "content": "hi", "timestamp": 1},
    }
    path = write(tmp_path, HEADER + dumps(record).encode() + b"\n")
    run = run_cli(["check", "--no-progress", path], capsysbinary, seconds=LIMIT)
    assert run.code == 1
    assert not any(line.startswith("FAKE") for line in run.out.splitlines()), run.out


# ---- files named like backups -----------------------------------------------------------------


def test_things_named_like_backups_are_never_restored_by_default(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """Beside a session (a newline in its name) with one real backup: entries named like
    its backups that are none (a folder, a FIFO, a symbolic link, a stamp that is no
    date, a record in capitals) are not listed; one named the old way, dated far ahead,
    is listed as unverified. Listing opens no FIFO; the default restore puts the real
    backup back, with one warning line; a damaged one is refused, nothing changed."""
    path = write(tmp_path, CLONES.read_bytes(), "two\nlines.jsonl")
    repaired = run_cli(["repair", "-q", "--in-place", "--quiescence", "0", path], capsysbinary)
    assert repaired.code == 0
    (real,) = [p for p in path.parent.iterdir() if ".sessionfix-bak-" in p.name]
    mark = path.name + ".sessionfix-bak-"
    hex16 = "0123456789abcdef"
    (path.parent / f"{mark}20990101T000000Z-3-{hex16}-{hex16}").mkdir()
    os.mkfifo(path.parent / f"{mark}20990101T000001Z")
    (path.parent / f"{mark}20990101T000002Z").symlink_to(path.name)
    (path.parent / f"{mark}99999999T999999Z").write_bytes(CLONES.read_bytes())
    (path.parent / f"{mark}20990101T000003Z-9-{hex16.upper()}-{hex16}").write_bytes(b"x")
    old_style = path.parent / f"{mark}20990101T000004Z"
    old_style.write_bytes(b"junk\n")
    listed = run_cli(
        ["restore", "--list", "--output-format", "json", path], capsysbinary, seconds=LIMIT
    )
    assert [(Path(b["path"]).name, b["status"]) for b in orjson.loads(listed.out)] == [
        (old_style.name, "unverified"),
        (real.name, "verified"),
    ]
    before = tree_state(path.parent)
    restored = run_cli(["restore", "-q", "--quiescence", "0", path], capsysbinary, seconds=LIMIT)
    assert restored.code == 0
    assert restored.err_lines == [
        f"sessionfix: warning: {escape(str(path))}: passed over 1 newer backup(s) that do not "
        "verify or are dated ahead of the clock (restore --list shows them)"
    ]
    assert path.read_bytes() == CLONES.read_bytes()
    (added,) = tree_state(path.parent).keys() - before.keys()
    assert added.startswith(mark)
    os.truncate(real, 10)
    before = tree_state(path.parent)
    refused = run_cli(
        ["restore", "--backup", real.name, "--quiescence", "0", path], capsysbinary, seconds=LIMIT
    )
    assert refused.code == 2
    assert "is damaged" in refused.errors[0]
    assert_unchanged(before, tree_state(path.parent), "restore of a damaged backup")


# ---- where repair -o writes ----------------------------------------------------------------


def test_repair_output_into_a_missing_folder_or_onto_a_folder(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """`-o` into a folder that does not exist, or onto an existing folder, fails with one
    line, writes nothing and leaves no temp file."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n")
    folder = path.parent
    (folder / "taken").mkdir()
    before = tree_state(folder)
    for out in (folder / "nowhere" / "out.jsonl", folder / "taken"):
        run = run_cli(["repair", "-o", out, path], capsysbinary, seconds=LIMIT)
        assert run.code == 2
        assert_unchanged(before, tree_state(folder), f"repair -o {out}")


def test_an_output_error_names_the_output(tmp_path: Path, capsysbinary: Capture) -> None:
    """When `-o` names a folder, the error must say which path is the folder."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n")
    taken = path.parent / "taken"
    taken.mkdir()
    run = run_cli(["repair", "-o", taken, path], capsysbinary, seconds=LIMIT)
    assert run.code == 2
    assert str(taken) in run.errors[0], run.errors[0]


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_repair_output_onto_a_fifo_or_symlink_keeps_it(
    tmp_path: Path, capsysbinary: Capture, kind: str
) -> None:
    """`-o` naming an existing FIFO or symbolic link must not replace that node with a
    regular file (as root, `-o /dev/stdout` would replace the /dev/stdout link): write
    through it or refuse (exit 2), as --in-place refuses links."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n")
    folder = path.parent
    out = folder / "out.jsonl"
    target = folder / "target.txt"
    if kind == "fifo":
        os.mkfifo(out)
    else:
        target.write_bytes(b"")
        out.symlink_to(target.name)
    try:
        run_cli(["repair", "-o", out, path], capsysbinary, seconds=10)
    finally:
        mode = out.lstat().st_mode
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISLNK(mode)


def test_repair_output_onto_the_input_is_refused(tmp_path: Path, capsysbinary: Capture) -> None:
    """`-o` naming the input itself (directly or through a link) is refused: a repair
    with -o never rewrites its input."""
    data = b"\n".join(small_session()) + b"\n"
    path = write(tmp_path, data)
    link = path.parent / "link.jsonl"
    link.symlink_to(path.name)
    before = tree_state(path.parent)
    for out in (path, link):
        run = run_cli(["repair", "-o", out, path], capsysbinary, seconds=LIMIT)
        assert run.code == 2
        assert_unchanged(before, tree_state(path.parent), f"repair -o {out.name}")


def test_repair_output_onto_an_existing_file_needs_force(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """`-o` naming a file that exists (directly or through a link) never overwrites it
    silently: refused with one line unless --force, which replaces it."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n")
    folder = path.parent
    taken = folder / "taken.jsonl"
    taken.write_bytes(b"somebody's data\n")
    link = folder / "link.jsonl"
    link.symlink_to(taken.name)
    before = tree_state(folder)
    for out in (taken, link):
        run = run_cli(["repair", "-o", out, path], capsysbinary, seconds=LIMIT)
        assert run.code == 2
        assert run.errors == [f"sessionfix: error: {out}: exists (--force to replace it)"]
        assert_unchanged(before, tree_state(folder), f"repair -o {out.name}")
    run = run_cli(["repair", "--force", "-o", taken, path], capsysbinary, seconds=LIMIT)
    assert run.code in (0, 1)
    assert taken.read_bytes() == path.read_bytes()


def glued_and_unterminated() -> bytes:
    """A session with glued records (SF001) and no final newline (SF009)."""
    lines = small_session()
    return b"\n".join([*lines[:2], lines[2] + lines[3], *lines[4:]])


@pytest.mark.parametrize("refusal", ["hard-link", "quiescence", "lock", "output-folder"])
def test_a_refused_repair_still_reports_the_findings(
    tmp_path: Path, capsysbinary: Capture, refusal: str
) -> None:
    """A repair refused (a hard link, a recent change, OpenClaw's lock, `-o` at a folder)
    writes nothing, says why on one line, and still reports what a check finds: never
    "No problems found" for a file that has them."""
    path = write(tmp_path, glued_and_unterminated())
    folder = path.parent
    argv: list[object] = ["repair", "--in-place", "--quiescence", "0", path]
    if refusal == "hard-link":
        os.link(path, tmp_path / "elsewhere.jsonl")
    elif refusal == "quiescence":
        os.utime(path)
        argv = ["repair", "--in-place", path]
    elif refusal == "lock":
        lock = folder / f"{path.name}.lock"
        live = {"pid": os.getppid(), "createdAt": "2099-01-01T00:00:00.000Z"}
        lock.write_text(json.dumps(live, indent=2))
    else:
        (folder / "taken").mkdir()
        argv = ["repair", "-o", folder / "taken", path]
    before = tree_state(folder)
    run = run_cli(argv, capsysbinary, seconds=LIMIT)
    assert run.code == 2
    assert_unchanged(before, tree_state(folder), refusal)
    assert ": SF001 " in run.out
    assert ": SF009 " in run.out
    assert "No problems found" not in run.out
    assert run.out.rstrip().endswith("1 file could not be repaired."), run.out


def test_the_report_never_replaces_a_session(tmp_path: Path, capsysbinary: Capture) -> None:
    """`--output-file` naming a file the command reads or writes (directly, through a
    link, or found in a scanned folder), a folder that does not exist, or a FIFO no
    process reads: refused with one line before any work, every file as it was."""
    path = write(tmp_path, glued_and_unterminated())
    folder = path.parent
    link = folder / "link.jsonl"
    link.symlink_to(path.name)
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    before = tree_state(folder)
    out = folder / "out.jsonl"
    runs = [
        ["check", "--output-file", path, path],
        ["check", "--output-file", link, path],
        ["scan", "--output-file", path, folder],
        ["repair", "--diff", "--output-format", "json", "--output-file", path, path],
        ["repair", "-o", "-", "--output-file", path, path],
        ["repair", "-o", out, "--output-file", out, path],
        ["repair", "--in-place", "--quiescence", "0", "--output-file", path, path],
        ["repair", "--in-place", "--quiescence", "0", "--output-file", folder / "no" / "r", path],
        ["check", "--output-file", fifo, path],
    ]
    for argv in runs:
        run = run_cli(argv, capsysbinary, seconds=LIMIT)
        assert run.code == 2, argv
        assert_unchanged(before, tree_state(folder), " ".join(map(str, argv)))


# ---- output streams and usage errors -------------------------------------------------------

CLOSED: Final = "closed"
FULL: Final = "/dev/full"


def console(
    argv: Sequence[object],
    *,
    stdout: str | None = None,
    stderr: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run the console entry point in a process of its own, with stdout (and stderr)
    closed (`CLOSED`) or sent to a device; return the exit code and what stderr held."""
    streams: dict[str, int] = {}
    opened: list[int] = []
    for name, where in (("stdout", stdout), ("stderr", stderr)):
        if where is None:
            streams[name] = subprocess.DEVNULL if name == "stdout" else subprocess.PIPE
        elif where == CLOSED:
            streams[name] = subprocess.DEVNULL  # replaced by a closed descriptor below
        else:
            opened.append(os.open(where, os.O_WRONLY))
            streams[name] = opened[-1]
    closing_fds = [n for n, where in ((1, stdout), (2, stderr)) if where == CLOSED]

    def close_streams() -> None:
        for fd in closing_fds:
            os.close(fd)

    try:
        result = subprocess.run(
            [sys.executable, "-m", "sessionfix", *map(str, argv)],
            stdout=streams["stdout"],
            stderr=streams["stderr"],
            preexec_fn=close_streams,
            env={**os.environ, "NO_COLOR": "1", **(env or {})},
            timeout=LIMIT,
            check=False,
        )
    finally:
        for fd in opened:
            os.close(fd)
    err = result.stderr.decode("utf-8", "replace") if result.stderr else ""
    return result.returncode, err


def one_error(err: str, text: str) -> None:
    lines = err.removesuffix("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith("sessionfix: error: "), err
    assert text in lines[0], err
    assert "Traceback" not in err, err
    assert "internal error" not in err, err


@pytest.mark.parametrize(
    ("command", "where", "text"),
    [
        pytest.param(["check"], CLOSED, "standard output (it is closed)", id="check-closed"),
        pytest.param(["check"], FULL, "standard output (no space left", id="check-full"),
        pytest.param(["scan"], FULL, "standard output (no space left", id="scan-full"),
        pytest.param(["check", "--output-format", "json"], FULL, "(no space left", id="json-full"),
        pytest.param(["repair", "-o", "-"], CLOSED, "(it is closed)", id="stream-closed"),
        pytest.param(["repair", "-o", "-"], FULL, "(no space left", id="stream-full"),
        pytest.param(["repair", "--diff"], CLOSED, "(it is closed)", id="diff-closed"),
        pytest.param(["repair", "--diff"], FULL, "(no space left", id="diff-full"),
        pytest.param(
            ["repair", "--in-place", "--quiescence", "0"], CLOSED, "(it is closed)", id="in-place"
        ),
    ],
)
def test_an_unwritable_stdout_is_one_line_and_exit_two(
    tmp_path: Path, command: list[str], where: str, text: str
) -> None:
    """stdout closed (`>&-`) or full (`>/dev/full`): one error line, exit 2, never a
    traceback, and (stdout closed) no work done: an in-place repair refuses to start."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n\n")
    data = path.read_bytes()
    if "-o" in command or "--diff" in command:
        # The diagnostics go elsewhere: stderr is left to the error line.
        command = [*command, "--output-file", tmp_path / "report.txt"]
    code, err = console([*command, path], stdout=where)
    assert code == 2, err
    one_error(err, text)
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_closed_stderr_changes_nothing_else(tmp_path: Path) -> None:
    """Logs are best effort: with stderr closed a check still prints its report and
    exits 1 for the problems it found."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n\n")
    out = tmp_path / "report.txt"
    for command in (["check"], ["scan"], ["repair", "--diff"]):
        argv = [*command, "--fail-on", "info", "--output-file", out, path]
        code, _ = console(argv, stderr=CLOSED)
        assert code == 1, command
    assert "SF007" in out.read_text()


def test_an_unwritable_output_file_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, b"\n".join(small_session()) + b"\n\n")
    code, err = console(["check", "--output-file", FULL, path])
    assert code == 2
    one_error(err, "cannot write /dev/full (no space left on device)")
    code, err = console(["rule", "SF001"], stdout=FULL)
    assert code == 2
    one_error(err, "standard output (no space left on device)")


@pytest.mark.parametrize(
    ("argv", "env", "text"),
    [
        pytest.param(
            ["check", "{path}"],
            {"SESSIONFIX_OUTPUT_FORMAT": "garbage"},
            "invalid value for '--output-format' (env var: 'SESSIONFIX_OUTPUT_FORMAT')",
            id="env-var",
        ),
        pytest.param(["check", "--fail-on", "never", "{path}"], {}, "--fail-on", id="bad-choice"),
        pytest.param(["check", "--bogus", "{path}"], {}, "no such option: --bogus", id="option"),
        pytest.param(["check"], {}, "missing argument", id="missing-argument"),
        pytest.param(["repair", "--jobs", "x", "{path}"], {}, "'x' is not a valid int", id="int"),
        pytest.param(
            ["restore", "--list", "--backup", "x", "{path}"], {}, "cannot be combined", id="restore"
        ),
    ],
)
def test_a_usage_error_is_one_line(
    tmp_path: Path, argv: list[str], env: dict[str, str], text: str
) -> None:
    """Bad options, from the command line or the environment, are one line and exit 2,
    never the argument parser's usage box."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n")
    code, err = console([a.replace("{path}", str(path)) for a in argv], env=env)
    assert code == 2
    one_error(err, text)
    assert "(see 'sessionfix " in err or "cannot be combined" in err


def test_restore_of_an_unreadable_session_is_one_line(
    tmp_path: Path, capsysbinary: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The argument parser's own access check gave a usage box: now the library answers."""
    path = write(tmp_path, b"\n".join(small_session()) + b"\n")
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    run = run_cli(["restore", "--quiescence", "0", path], capsysbinary, seconds=LIMIT)
    assert run.code == 2
    assert "Usage" not in run.err
    assert run.errors == [f"sessionfix: error: {path}: no sessionfix backup beside it"]


# ---- degenerate files ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "check_code"),
    [
        pytest.param(b"", 1, id="empty"),
        pytest.param(HEADER, 0, id="header-only"),
        pytest.param(HEADER.rstrip(b"\n"), 0, id="header-no-newline"),
        pytest.param(b"\n" * 10_000, 1, id="only-newlines"),
        pytest.param(b"\r\n" * 100, 1, id="only-crlf"),
        pytest.param(b" \t \n" * 100, 1, id="only-whitespace"),
        pytest.param(HEADER + b"\n" * 10_000, 0, id="header-then-newlines"),
        pytest.param(HEADER * 3, 1, id="header-three-times"),
        pytest.param(b"{}\n" * 3, 0, id="empty-objects"),
        pytest.param(b'null\n[]\n1\n"x"\n', 2, id="json-non-objects"),
    ],
)
def test_degenerate_files(
    tmp_path: Path, capsysbinary: Capture, data: bytes, check_code: int
) -> None:
    """Files with nothing or next to nothing in them: every command answers with the
    expected exit code (a pi header alone is a valid empty session; blank lines are
    only info; JSON values that are no objects are no session, refused by all; JSON
    objects no format reads are skipped by `check`), and a repair keeps every entry."""
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary)
    assert outcome.runs["check"].code == check_code
    if check_code == 2:
        assert all(run.code == 2 for run in outcome.runs.values())
        assert "not a session file" in outcome.runs["repair"].errors[0]
        return
    assert outcome.runs["repair"].code in (0, 1)
    assert_nothing_lost(tmp_path, data, unsafe=False)
    assert_nothing_lost(tmp_path, data, unsafe=True)


# ---- a 100,000-deep parent chain -----------------------------------------------------------

DEPTH: Final = 100_000


def deep_chain(variant: str) -> bytes:
    """A pi session of DEPTH user/assistant entries, each the child of the one before.

    `cycle`: the first entry's parent is the last (one cycle through all of them);
    `dangling`: the first entry's parent does not exist; `clones`: every tenth entry
    is a byte-identical user message (SF201 drops all but one and re-links the rest)."""
    parts = [HEADER]
    append = parts.append
    for n in range(DEPTH):
        parent = "null" if n == 0 else f'"{n - 1:08x}"'
        if n == 0 and variant == "cycle":
            parent = f'"{DEPTH - 1:08x}"'
        elif n == 0 and variant == "dangling":
            parent = '"deadbeef"'
        if n % 2:
            message = (
                f'{{"role":"assistant","content":[{{"type":"text","text":"answer {n}"}}],'
                f'"stopReason":"stop","timestamp":{1784874064000 + n}}}'
            )
        elif variant == "clones" and n % 10 == 0:
            message = '{"role":"user","content":"again","timestamp":1784874064000}'
        else:
            message = f'{{"role":"user","content":"question {n}","timestamp":{1784874064000 + n}}}'
        append(
            f'{{"type":"message","id":"{n:08x}","parentId":{parent},'
            f'"timestamp":"2026-07-24T06:21:04.000Z","message":{message}}}\n'.encode()
        )
    return b"".join(parts)


@pytest.mark.parametrize(
    ("variant", "problem"),
    [("chain", None), ("cycle", "SF105"), ("dangling", "SF103"), ("clones", "SF201")],
)
def test_a_100k_deep_parent_chain(
    tmp_path: Path, capsysbinary: Capture, variant: str, problem: str | None
) -> None:
    """Walking 100,000 parent links (to the root, around a cycle, from a dangling root,
    re-linking past dropped clones) must not recurse (a RecursionError would surface as
    an internal error) and must finish within the time limit; nothing is lost."""
    data = deep_chain(variant)
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary, light=True)
    check = outcome.runs["check"]
    assert check.code == (0 if problem is None else 1)
    if problem is not None:
        assert f" {problem} " in check.out
    unsafe = tmp_path / "unsafe.jsonl"
    run = run_cli(
        ["repair", "-q", "--unsafe-fixes", "-o", unsafe, path], capsysbinary, seconds=LIMIT
    )
    if variant == "cycle":
        assert " SF105 " not in run.out, "--unsafe-fixes left the cycle"
    assert_nothing_lost(tmp_path, data, unsafe=False)
    assert_nothing_lost(tmp_path, data, unsafe=True)


# ---- cycles and duplicate ids --------------------------------------------------------------


def linked(*links: tuple[str, str | None], text: str = "turn") -> bytes:
    """A pi session of user entries with the given (id, parentId) links, distinct texts."""
    lines = [HEADER]
    for n, (entry_id, parent) in enumerate(links, 1):
        record = {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": stamp(n),
            "message": {
                "role": "user",
                "content": f"{text} {n}",
                "timestamp": 1_784_874_064_000 + n,
            },
        }
        lines.append(dumps(record).encode() + b"\n")
    return b"".join(lines)


IDENTICAL = dumps(
    {
        "type": "message",
        "id": "dup00001",
        "parentId": "r0000001",
        "timestamp": stamp(5),
        "message": {"role": "user", "content": "same", "timestamp": 1_784_874_064_005},
    }
).encode()

GRAPHS: Final[dict[str, tuple[bytes, str]]] = {
    "two-cycle": (linked(("a", "b"), ("b", "a")), "SF105"),
    "two-cycle-with-root": (linked(("r", None), ("a", "b"), ("b", "a"), ("c", "a")), "SF105"),
    "self-parent": (linked(("r", None), ("s", "s"), ("t", "s")), "SF105"),
    "self-parent-only": (linked(("s", "s")), "SF105"),
    "three-cycle-leaf": (
        linked(("r", None), ("a", "r"), ("b", "c"), ("c", "d"), ("d", "b")),
        "SF105",
    ),
    "duplicate-different": (linked(("r", None), ("a", "r"), ("a", "r"), ("b", "a")), "SF104"),
    "duplicate-identical": (
        linked(("r0000001", None)) + IDENTICAL + b"\n" + IDENTICAL + b"\n",
        "SF104",
    ),
    "duplicate-header-id": (linked(("r", None), (HEADER_ID, "r")), ""),
    "duplicate-in-cycle": (linked(("a", "b"), ("b", "a"), ("a", "b")), "SF10"),
    "parent-is-header": (linked((HEADER_ID + "x", HEADER_ID)), ""),
}


@pytest.mark.parametrize("case", GRAPHS)
def test_cycles_and_duplicate_ids(tmp_path: Path, capsysbinary: Capture, case: str) -> None:
    """Parent links that loop (a→b→a, an entry its own parent) and ids used twice: every
    command answers (a loader without cycle detection hangs here), `check` names the
    problem, and the repair loses no entry that no applied fix deleted."""
    data, problem = GRAPHS[case]
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary)
    check = outcome.runs["check"]
    if problem:
        assert check.code == 1
        assert f" {problem}" in check.out
    assert_nothing_lost(tmp_path, data, unsafe=False)
    assert_nothing_lost(tmp_path, data, unsafe=True)


# ---- deep nesting inside a record ----------------------------------------------------------


@pytest.mark.parametrize("depth", [300, 1_000, 1_030, 100_000])
def test_deeply_nested_values_do_not_crash(
    tmp_path: Path, capsysbinary: Capture, depth: int
) -> None:
    """Arrays nested thousands deep in a message (past orjson's 1024 levels and Python's
    recursion limit): every command answers and nothing is lost."""
    nested = "[" * depth + '"x"' + "]" * depth
    s = Session()
    s.user("first")
    lines = [line.encode() for line in s.lines]
    record = (
        '{"type":"message","id":"deep0001","parentId":"a0000001","timestamp":"'
        + stamp(2)
        + '","message":{"role":"user","content":'
        + nested
        + ',"timestamp":1784874099000}}'
    ).encode()
    data = b"\n".join([*lines, record, record, lines[1] + record]) + b"\n"
    path = write(tmp_path, data)
    exercise(path, capsysbinary)
    assert_nothing_lost(tmp_path, data, unsafe=False)
    assert_nothing_lost(tmp_path, data, unsafe=True)


def nested(depth: int) -> str:
    """Arrays and objects nested `depth` levels deep (as JSON text)."""
    return '[{"k":' * (depth // 2) + '"x"' + "}]" * (depth // 2)


def deep_session(depth: int) -> tuple[bytes, list[bytes]]:
    """A pi session with records nested `depth` levels deep: a user message mid-file, an
    assistant whose content and write call carry deep values (the write supersedes a
    read: SF301), a user message whose parent is a dropped clone (SF201 re-links it),
    and a deep record glued to the line before it (SF001).

    Returns the file and the lines its safe repair must consist of."""
    deep = nested(depth)
    ts = '"timestamp":"2026-07-24T06:21:{n:02d}.000Z"'

    def entry(n: int, parent: int | None, message: str) -> bytes:
        link = "null" if parent is None else f'"d{parent:07d}"'
        return (
            f'{{"type":"message","id":"d{n:07d}","parentId":{link},{ts.format(n=n)},'
            f'"message":{message}}}'
        ).encode()

    def user(text: str, content: str = "") -> str:
        return (
            f'{{"role":"user","content":[{{"type":"text","text":"{text}"}}{content}],'
            '"timestamp":1784874064000}'
        )

    read = (
        '{"role":"assistant","content":[{"type":"toolCall","id":"toolu_r","name":"read",'
        '"arguments":{"path":"notes.txt"}}],"stopReason":"toolUse","timestamp":1}'
    )
    result = (
        '{{"role":"toolResult","toolCallId":"toolu_{0}","toolName":"{1}","content":[{{"type":'
        '"text","text":"{2}"}}],"isError":false,"timestamp":1}}'
    )
    write_call = (
        '{"role":"assistant","content":[{"type":"text","text":"writing","deep":DEEP},'
        '{"type":"toolCall","id":"toolu_w","name":"write","arguments":{"path":"notes.txt",'
        '"content":"new","deep":DEEP}}],"stopReason":"toolUse","timestamp":1}'
    ).replace("DEEP", deep)
    lines = [
        HEADER.rstrip(b"\n"),
        entry(1, None, user("first")),
        entry(2, 1, read),
        entry(3, 2, result.format("r", "read", "file contents " * 20)),
        entry(4, 3, user("deep mid-file", ',{"type":"text","text":"x","deep":' + deep + "}")),
        entry(5, 4, write_call),
        entry(6, 5, result.format("w", "write", "Successfully wrote 3 bytes")),
        entry(7, 6, user("again")),
        entry(8, 7, user("again")),
        entry(9, 8, user("deep child of a clone", ',{"type":"x","deep":' + deep + "}")),
        entry(10, 9, '{"role":"assistant","content":"done","stopReason":"stop","timestamp":1}'),
        entry(11, 10, user("deep and glued", ',{"type":"x","deep":' + deep + "}")),
    ]
    data = b"".join(line + b"\n" for line in [*lines[:10], lines[10] + lines[11]])
    placeholder = (
        b'"content":[{"type":"text","text":"[sessionfix: stale read of notes.txt removed - file '
        b'was fully rewritten later (call toolu_w); re-read it if needed]"}]'
    )
    repaired = [
        *lines[:3],
        lines[3].replace(
            b'"content":[{"type":"text","text":"' + b"file contents " * 20 + b'"}]', placeholder
        ),
        *lines[4:8],
        lines[9].replace(b'"parentId":"d0000008"', b'"parentId":"d0000007"'),
        *lines[10:],
    ]
    return data, repaired


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_a_deeply_nested_record_is_read_and_kept(
    tmp_path: Path, capsysbinary: Capture, depth: int
) -> None:
    """`JSON.parse` (V8's parser is iterative) reads a record at any depth, and so does pi:
    no deep record is called unparsable (SF008) or dropped, even with --unsafe-fixes;
    each is read whole (its tool calls pair, its write supersedes a read), split off a
    glued line and re-linked like any other, and its bytes stay as they were."""
    data, expected = deep_session(depth)
    path = write(tmp_path, data)
    outcome = exercise(path, capsysbinary, light=True)
    found = {line.split()[1] for line in outcome.runs["check"].out.splitlines() if " SF" in line}
    assert found - {"SF603"} == {"SF001", "SF201", "SF301"}
    assert outcome.repaired is not None
    assert outcome.repaired.split(b"\n") == [*expected, b""]
    unsafe = tmp_path / "unsafe.jsonl"
    run = run_cli(["repair", "-q", "--unsafe-fixes", "-o", unsafe, path], capsysbinary)
    assert run.code == 0
    assert unsafe.read_bytes() == outcome.repaired
    assert json_parse_failures(unsafe) == (len(expected), 0)


JSON_PARSE_EACH_LINE: Final = """
const text = require("node:fs").readFileSync(process.argv[1], "utf8");
const lines = text.split("\\n").filter((line) => line.trim());
let failed = 0;
for (const line of lines) {
    try { JSON.parse(line); } catch { failed += 1; }
}
console.log(JSON.stringify([lines.length, failed]));
"""


def json_parse_failures(path: Path) -> tuple[int, int]:
    """How many non-blank lines of `path` Node.js reads, and how many of them its
    `JSON.parse` (pi's parser) rejects."""
    require_pi()
    run = subprocess.run(
        ["node", "-e", JSON_PARSE_EACH_LINE, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=LIMIT,
    )
    lines, failed = json.loads(run.stdout)
    return lines, failed


def test_a_number_with_more_digits_than_python_converts_is_read(
    tmp_path: Path, capsysbinary: Capture
) -> None:
    """A 5,000-digit integer (past Python's int/str limit of 4,300 digits) in a field the
    scan decodes: `JSON.parse` reads it (as Infinity), so the record is no SF008 and an
    unsafe repair keeps it as it is."""
    record = (
        '{"type":"message","id":"big00001","parentId":null,"timestamp":"'
        + stamp(1)
        + '","message":{"role":"user","content":"hi","timestamp":'
        + "1" * 5_000
        + "}}\n"
    ).encode()
    data = HEADER + record
    path = write(tmp_path, data)
    exercise(path, capsysbinary, light=True)
    out = tmp_path / "unsafe.jsonl"
    run = run_cli(["repair", "--unsafe-fixes", "-o", out, path], capsysbinary)
    assert run.code == 0
    assert out.read_bytes() == data


# ---- the checks themselves -----------------------------------------------------------------


def test_the_lost_entry_check_can_fail() -> None:
    """`lost_entries` flags an entry missing from a repair, a glued record included, and
    excuses only one that an applied fix deleted (by input row, or by id in a later
    pass), or a label whose target went."""
    lines = small_session()
    label = dumps({"type": "label", "id": "l1", "parentId": "a0000004", "targetId": "a0000002"})
    data = b"\n".join([*lines[:3], lines[3] + lines[4], label.encode()]) + b"\n"
    kept = b"\n".join(lines[:2]) + b"\n"
    lost = lost_entries(data, kept, [], 0)
    assert [entry.split(":")[0] for entry in lost] == ["line 3", "line 4", "line 4"]

    def deleting(row: int, entry_id: str) -> Diagnostic:
        fix = Fix(Applicability.SAFE, "drop", (DropLine(row),))
        return Diagnostic("SF201", "x", Severity.WARNING, "m", "f", row, entry_id=entry_id, fix=fix)

    applied = [deleting(3, "a0000002"), deleting(1, "a0000003"), deleting(1, "a0000004")]
    assert lost_entries(data, kept, applied, 1) == []
    assert lost_entries(data, kept, applied[:1], 1) != []
