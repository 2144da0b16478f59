"""No repair writes fewer whole records than its input holds, less the records its
fixes drop by name (a proven copy, an id-less entry, an orphan result) and plus those
they insert: over every fixture, with safe and with unsafe fixes, and over generated
sessions and rollouts whose records are glued, split over lines, pretty-printed, torn,
or among runs of blank lines and junk.

Records are counted here from the bytes, as a reader that knows every kind of line
damage would find them (`whole_records`), not with sessionfix's own index."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionfix import Settings
from sessionfix.errors import NotASessionFile
from sessionfix.formats import Format, has_record_shape
from sessionfix.formats.pi import PI
from sessionfix.repair.planned import RepairResult
from sessionfix.repair.preview import preview_repair
from sessionfix.repair.targets import repair_in_place, repair_to
from sessionfix.scan import scanner as scanner_module

from .conftest import CORPUS, FIXTURES
from .sessions import Session, rollouts, sessions
from .test_fixtures import CASES, _settings
from .test_properties import _diagnostics, _index, _parallel

FIXTURE_ROLLOUT: Final = FIXTURES / "SF008-codex-pretty-printed-rollout" / "repaired.jsonl"
SPREAD_LINES: Final = 500
"""Lines a record spread over lines may take, in these files."""


def _objects(text: bytes) -> list[Any]:
    """The JSON values written one after the other from the start of `text` (several on
    a glued line), up to the first bytes that are none."""
    decoder = json.JSONDecoder()
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        decoded = text.decode("utf-8", "surrogateescape")
    found: list[Any] = []
    at = len(decoded) - len(decoded.lstrip(" \t\r"))
    while at < len(decoded):
        try:
            value, at = decoder.raw_decode(decoded, at)
        except (ValueError, RecursionError):
            break
        found.append(value)
        while at < len(decoded) and decoded[at] in " \t\r":
            at += 1
    return found


def _whole(text: bytes) -> Any:
    """The one JSON value `text` is, or None."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def whole_records(data: bytes, fmt: Format) -> int:
    """The JSON objects `data` holds whole: one on a line (a byte-order mark and runs of
    NUL bytes around it aside), several glued on one, one after a damaged prefix, and
    one spread over lines from a line that begins with `{` (a record of the format's
    shape; any of its lines may begin with `{` too, or be an object alone: an object
    nested in it, broken onto a line of its own; or be blank)."""
    lines = data.split(b"\n")
    count = 0
    at = 0
    while at < len(lines):
        raw = lines[at].removesuffix(b"\r")
        line = raw.removeprefix(b"\xef\xbb\xbf").strip(b"\x00")
        at += 1
        if not line.strip():
            continue
        values = _objects(line)
        if values and isinstance(values[0], dict):
            count += sum(isinstance(value, dict) for value in values)
            continue
        end = _spread_end(lines, at, raw, fmt) if raw.startswith(b"{") else None
        if end is not None:
            count += 1
            at = end
            continue
        count += _after_damage(line, fmt)
    return count


def _spread_end(lines: list[bytes], at: int, first: bytes, fmt: Format) -> int | None:
    """Where a record begun on the line before `at` ends, spread over the lines from
    `at` on (the index after its last line), if it is one."""
    joined = first
    for end in range(at, min(len(lines), at + SPREAD_LINES)):
        part = lines[end].removesuffix(b"\r")
        joined += b"\n" + part
        value = _whole(joined)
        if value is not None:
            return end + 1 if isinstance(value, dict) and has_record_shape(fmt, value) else None
    return None


def _after_damage(line: bytes, fmt: Format) -> int:
    """1 when a whole record of the format's shape ends the line after damaged bytes
    (a partial line followed by a full one)."""
    for match in re.finditer(rb'\{"', line):
        if match.start() == 0:
            continue
        value = _whole(line[match.start() :])
        if value is not None:
            return int(isinstance(value, dict) and has_record_shape(fmt, value))
    return 0


def _due(result: RepairResult, before: int) -> int:
    """The whole records a repair's result must hold at least."""
    return before - result.dropped_entries + result.inserted_records + result.tally["headers"]


def _check_kept(source: Path, out: Path, settings: Settings) -> bool:
    """Repair `source` to `out` and check what it holds; False when the file is refused
    as no session (then nothing is written)."""
    data = source.read_bytes()
    out.unlink(missing_ok=True)
    try:
        result = repair_to(source, out, settings, replace=True)
    except NotASessionFile:
        assert not out.exists()
        return False
    fmt = Format(result.format)
    before = whole_records(data, fmt)
    after = whole_records(out.read_bytes(), fmt)
    assert after >= _due(result, before), (before, after, [d.code for d in result.applied])
    return True


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_no_fixture_repair_loses_a_whole_record(case: Path, unsafe: bool, tmp_path: Path) -> None:
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    source = tmp_path / spec.get("filename", "session.jsonl")
    source.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(case / "input.jsonl", source)
    settings = msgspec.structs.replace(_settings(spec), unsafe_fixes=unsafe)
    assert _check_kept(source, tmp_path / "out.jsonl", settings)


def _pretty(line: bytes, indent: int) -> bytes | None:
    value = _whole(line)
    if not isinstance(value, dict):
        return None
    return json.dumps(value, indent=indent, ensure_ascii=False).encode()


def _split(line: bytes, cut: int) -> list[bytes] | None:
    """The line broken in two after the `cut`-th comma outside its strings."""
    text = line.decode("utf-8", "surrogateescape")
    commas = [m.end() for m in re.finditer(r'"(?:[^"\\]|\\.)*"|,', text) if m.group() == ","]
    if not commas:
        return None
    at = commas[cut % len(commas)]
    return [
        text[:at].encode("utf-8", "surrogateescape"),
        text[at:].encode("utf-8", "surrogateescape"),
    ]


JUNK: Final = [b"{not valid json}", b"-- a merge conflict --", b"<<<<<<< HEAD", b"garbage"]


@st.composite
def damaged_layouts(draw: st.DrawFn) -> bytes:
    """A pi session or a Codex rollout with its records glued, split over lines,
    pretty-printed (whole files too), torn, or among runs of blank lines and junk."""
    data = draw(st.one_of(sessions(corrupt=False), rollouts(corrupt=False)))
    lines = data.split(b"\n")[:-1]
    if draw(st.integers(0, 5)) == 0:
        indent = draw(st.sampled_from([0, 2, 4]))
        lines = [_pretty(line, indent) or line for line in lines]
    for _ in range(draw(st.integers(0, 5))):
        if not lines:
            break
        at = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["pretty", "split", "glue", "blanks", "junk", "torn", "crlf"]))
        if kind == "pretty":
            made = _pretty(lines[at], draw(st.sampled_from([0, 1, 2, 4])))
            if made is not None:
                lines[at] = made
        elif kind == "split":
            parts = _split(lines[at], draw(st.integers(0, 20)))
            if parts is not None:
                lines[at : at + 1] = parts
        elif kind == "glue" and at + 1 < len(lines):
            lines[at : at + 2] = [lines[at] + lines[at + 1]]
        elif kind == "blanks":
            lines[at:at] = [draw(st.sampled_from([b"", b"  ", b"\t"]))] * draw(st.integers(1, 40))
        elif kind == "junk":
            lines[at:at] = [draw(st.sampled_from(JUNK)) for _ in range(draw(st.integers(1, 6)))]
        elif kind == "torn" and at > 0:
            lines.insert(at, lines[at][: draw(st.integers(1, max(1, len(lines[at]) - 1)))])
        elif kind == "crlf":
            lines[at] = lines[at].replace(b"\n", b"\r\n") + b"\r"
    return b"".join(line + b"\n" for line in lines)


@given(data=damaged_layouts(), unsafe=st.booleans())
def test_no_repair_loses_a_whole_record(tmp_path: Path, data: bytes, unsafe: bool) -> None:
    """Nor does the preview (`--diff` shows what `-o` writes) or an in-place repair."""
    source = tmp_path / "s.jsonl"
    source.write_bytes(data)
    settings = Settings(quiescence=0.0, unsafe_fixes=unsafe)
    if not _check_kept(source, tmp_path / "out.jsonl", settings):
        return
    written = (tmp_path / "out.jsonl").read_bytes()
    preview = preview_repair(source, settings)
    try:
        shown = written if preview.output is None else preview.output.read_bytes()
    finally:
        preview.close()
    assert shown == written
    repair_in_place(source, settings, backup=False)
    assert source.read_bytes() == written


def test_the_count_finds_each_kind_of_whole_record() -> None:
    """The counter itself: glued, spread, after a damaged prefix, among junk."""
    record = {"type": "message", "id": "a1", "parentId": None, "message": {"role": "user"}}
    one = json.dumps(record, separators=(",", ":")).encode()
    data = b"\n".join(
        [
            one,
            one + one,
            json.dumps(record, indent=2).encode(),
            b"junk" + one,
            b"{not json}",
            b"",
            b'{"type":"message",',
        ]
    )
    assert whole_records(data + b"\n", PI) == 5
    nested = {**record, "message": {"role": "user", "content": [{"type": "text", "text": "a"}]}}
    broken = json.dumps(nested, separators=(",", ":")).replace('[{"type"', '[\n{"type"')
    assert whole_records(json.dumps(nested, indent=0).encode() + b"\n", PI) == 1
    assert whole_records(broken.encode() + b"\n", PI) == 1


def _items_inline(value: Any, level: int = 0) -> str:
    """`value` pretty-printed, but each item of an array written whole on its line."""
    inner, outer = "  " * (level + 1), "  " * level
    if isinstance(value, dict) and value:
        members = (
            f"{inner}{json.dumps(k)}: {_items_inline(v, level + 1)}" for k, v in value.items()
        )
        return "{\n" + ",\n".join(members) + f"\n{outer}}}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(inner + json.dumps(item) for item in value) + f"\n{outer}]"
    return json.dumps(value)


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(
    "layout",
    [
        # Nested objects at the left edge, as `json.dumps(indent=0)` writes them: taken
        # for records of their own (content blocks read as entries, SF106), the records
        # around them for junk that the unsafe fixes deleted.
        lambda record: json.dumps(record, indent=0),
        # A record broken once, before a nested object in an array: the line after the
        # break read as a content block and damage, the record lost, and the result its
        # next line answers dropped as an orphan even by the safe fixes (SF401).
        lambda record: json.dumps(record, separators=(",", ":")).replace(',{"type"', ',\n{"type"'),
        # Each item of an array on a line of its own, written whole (as formatters keep
        # short objects): the last item of one, a whole object alone, was taken for a
        # record and ended the record spread around it (the file not a session at all).
        lambda record: _items_inline(record),
        # A blank line among its lines, whitespace to JSON: it ended the record, whose
        # lines were junk, until a fix deleting the blank line brought the record back
        # in the result, naming a parent another fix dropped (the repair refused).
        lambda record: json.dumps(record, indent=2).replace("\n", "\n\n", 1),
    ],
    ids=["indent-0", "broken-before-an-object", "items-inline", "blank-line-inside"],
)
def test_a_record_spread_over_lines_with_nested_objects_at_the_left_edge_is_one_record(
    layout: Any, unsafe: bool, tmp_path: Path
) -> None:
    """Each is read as one record spread over lines, and the repair writes the session
    back record for record."""
    sample = CORPUS / "openclaw" / "letta-trajectory__pi-tool-calls.v3.jsonl"
    records = [json.loads(line) for line in sample.read_bytes().splitlines()]
    source = tmp_path / "session.jsonl"
    source.write_text("".join(layout(record) + "\n" for record in records))
    out = tmp_path / "out.jsonl"
    # Its placeholder thinking signature ("sig-1") is SF606's, whose unsafe fix removes
    # the block: not what this test is about.
    settings = Settings(quiescence=0.0, unsafe_fixes=unsafe, ignore=("SF606",))
    assert _check_kept(source, out, settings)
    assert [json.loads(line) for line in out.read_bytes().splitlines()] == records


@given(
    data=damaged_layouts(),
    task_bytes=st.sampled_from([64, 300, 2000]),
    read_bytes=st.sampled_from([61, 500]),
)
def test_parallel_reads_of_spread_records_and_runs_agree_with_one_pass(
    tmp_path: Path, data: bytes, task_bytes: int, read_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte ranges read apart never split a record spread over lines (the file is read
    in one piece when one may go on into the next range) nor a run of lines."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    sequential = _read_or_refused(path, jobs=1)
    with monkeypatch.context() as patch:
        _parallel(patch, task_bytes)
        patch.setattr(scanner_module, "READ_BYTES", read_bytes)
        assert _read_or_refused(path, jobs=2) == sequential
        assert _read_or_refused(path, jobs=3) == sequential


def test_a_pretty_printed_header_gives_every_byte_range_its_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header's facts (the cwd relative reads resolve against) reach the ranges read
    in parallel only from the header itself: a file that may begin with a spread record
    is read in one piece (the ranges took their facts from the first line-record)."""
    session = Session()
    for turn in range(30):
        call = f"toolu_{turn}"
        session.user(f"read it again ({turn})")
        session.assistant([(call, "read", {"path": "src/a.py"})])
        session.result(call, "read", "x = 1\n" * 20)
    session.lines[0] = json.dumps(json.loads(session.lines[0]), indent=1)
    path = tmp_path / "s.jsonl"
    path.write_text(session.text())
    sequential = _read_or_refused(path, jobs=1)
    with monkeypatch.context() as patch:
        _parallel(patch, 300)
        assert _read_or_refused(path, jobs=2) == sequential


def test_a_first_record_in_a_later_byte_range_is_read_as_the_file_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Junk before a rollout's `session_meta`, the record in the second byte range: that
    range was decoded as one that follows records, and the header not taken for one
    (a false SF101, in parallel reads only)."""
    meta = (FIXTURE_ROLLOUT.read_bytes().split(b"\n"))[0]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"-- a merge conflict --\n" * 3 + meta + b"\n")
    sequential = _read_or_refused(path, jobs=1)
    with monkeypatch.context() as patch:
        _parallel(patch, 64)
        assert _read_or_refused(path, jobs=2) == sequential


def _read_or_refused(path: Path, jobs: int) -> tuple[Any, ...] | str:
    """What a read and a check of `path` find, or why it is no session."""
    try:
        return _diagnostics(path, jobs=jobs), _index(path, jobs=jobs)
    except NotASessionFile as refused:
        return str(refused)
