"""Properties over generated sessions: the fast paths agree with the exact ones."""

from __future__ import annotations

import json
import os
import posixpath
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionfix import Settings, check_file, read_session
from sessionfix.formats.pi import PiAdapter
from sessionfix.jsonutil import loads
from sessionfix.model.tracking import Tracking
from sessionfix.report.render import diagnostic_json
from sessionfix.rules.paths import normalize
from sessionfix.scan import scanner as scanner_module

from .robustness import time_limit
from .sessions import Session, sessions


def _diagnostics(path: Path, **options: Any) -> list[dict[str, Any]]:
    found = check_file(path, Settings(quiescence=0.0, **options))
    return [{k: v for k, v in diagnostic_json(d).items() if k != "url"} for d in found]


def _write(tmp_path: Path, data: bytes, name: str = "session.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@given(data=sessions())
def test_scan_reports_rows_inside_the_file(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path, data)
    line_count = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    for diagnostic in _diagnostics(path):
        assert 1 <= diagnostic["location"]["row"] <= max(line_count, 1)


@given(data=sessions())
def test_indexed_records_are_exactly_their_bytes(tmp_path: Path, data: bytes) -> None:
    """Every record in the index points at bytes that parse as one JSON object."""
    path = _write(tmp_path, data)
    view = read_session(path).view
    for index in range(len(view)):
        offset, size = view.span(index)
        record = loads(data[offset : offset + size])
        assert isinstance(record, dict)
        row = view.rows[index]
        line_start = 0 if row == 1 else _nth_newline(data, row - 1) + 1
        assert line_start <= offset


def _nth_newline(data: bytes, n: int) -> int:
    position = -1
    for _ in range(n):
        position = data.index(b"\n", position + 1)
    return position


@given(data=sessions())
def test_block_decoding_agrees_with_line_by_line(
    tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, data)
    assert _diagnostics(path) == _linewise_diagnostics(path, monkeypatch)


def _linewise_diagnostics(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What a check finds when every line is decoded on its own (no block decoding)."""

    def refuse(buffer: object) -> list[Any]:
        raise ValueError("forced line-by-line reading")

    with monkeypatch.context() as patch:
        patch.setattr(PiAdapter, "decode_lines", staticmethod(refuse))
        return _diagnostics(path)


def _setting_layouts() -> dict[str, bytes]:
    """Sessions whose setting changes and aborted turns fall where the column-wise
    path must place the tracker's events exactly as the entry-by-entry path does."""

    def open_group_across_a_label(session: Session) -> None:
        session.user("go")
        first = session.assistant(
            [("c1", "bash", {"command": "ls"}), ("c2", "read", {"path": "a"})]
        )
        session.label(first)
        session.result("c1", "bash", "ok")
        session.setting("thinking_level_change")
        session.user("and then?")

    def setting_inside_a_group(session: Session) -> None:
        session.user("go")
        session.assistant([("c1", "read", {"path": "a"}), ("c2", "write", {"path": "a"})])
        session.setting("model_change")
        session.result("c1", "read", "file contents")
        session.setting("thinking_level_change")
        session.result("c2", "write", "Successfully wrote")
        session.assistant([], stop="aborted")
        session.user("read it again")
        session.assistant([("c3", "read", {"path": "a"})], stop="error")
        session.setting("thinking_level_change")
        session.user("next")

    def leading_results_around_a_setting(session: Session) -> None:
        session.user("go")
        calls = [("c1", "bash", {}), ("c2", "bash", {}), ("c3", "bash", {})]
        owner = session.assistant(calls)
        session.label(owner)
        session.result("c1", "bash", "ok")
        session.setting("thinking_level_change")
        session.result("c2", "bash", "ok")
        session.setting("model_change")
        session.assistant([], stop="error")

    layouts = {}
    for build in (
        open_group_across_a_label,
        setting_inside_a_group,
        leading_results_around_a_setting,
    ):
        session = Session()
        build(session)
        layouts[build.__name__] = session.text().encode()
    return layouts


@pytest.mark.parametrize("data", _setting_layouts().values(), ids=_setting_layouts())
def test_setting_entries_in_a_block_agree_with_line_by_line(
    tmp_path: Path, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, data)
    blockwise = _diagnostics(path)
    assert blockwise == _linewise_diagnostics(path, monkeypatch)
    assert blockwise  # each layout leaves a call unanswered


@given(data=sessions(), read_bytes=st.sampled_from([1, 61, 500]))
def test_small_reads_agree_with_one_read(
    tmp_path: Path, data: bytes, read_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines that straddle two reads are indexed exactly as lines read whole."""
    path = _write(tmp_path, data)
    whole = _diagnostics(path, jobs=1)
    with monkeypatch.context() as patch:
        patch.setattr(scanner_module, "READ_BYTES", read_bytes)
        assert _diagnostics(path, jobs=1) == whole


def _index(path: Path, **options: Any) -> tuple[Any, ...]:
    """Everything a read produces that rules see: the index columns, sparse facts, the
    line report and the conversation facts."""
    scanned = read_session(path, **options)
    view = scanned.view
    columns = tuple(
        bytes(getattr(view, name))
        for name in ("rows", "offsets", "sizes", "kinds", "roles", "flags", "id_keys")
    )
    facts = (view.columns, view.leaked, view.boundaries, view.references, view.notes)
    facts += (view.signed_thinking, view.broken_thinking)
    derived = (list(view.parents), list(view.active_path), view.leaf, view.linear)
    lines = scanned.lines
    report = (
        [(f.issue, f.row, f.rows, f.offset, f.length, f.detail, f.span) for f in lines.findings],
        bytes(lines.crlf_rows),
        (lines.line_count, lines.size, lines.final_newline, lines.last_row),
    )
    return columns, facts, derived, report, conversation_facts(scanned.tracking)


def conversation_facts(tracking: Tracking) -> tuple[Any, ...]:
    """What the tracker found: unanswered calls, orphans, reads, writes, user messages."""
    return (
        [(g.assistant, g.answers, g.ended_by) for g in tracking.unanswered],
        [(e.index, e.call_id) for e in tracking.orphans],
        list(tracking.reads),
        list(tracking.writes),
        list(tracking.users),
    )


def _parallel(patch: pytest.MonkeyPatch, task_bytes: int) -> None:
    """Byte ranges of `task_bytes`, two workers even for a small file, and the id
    check shared out between workers too."""
    patch.setattr(scanner_module, "TASK_BYTES", task_bytes)
    patch.setattr(scanner_module, "WORKER_MIN_BYTES", 1)
    patch.setattr(scanner_module, "PARALLEL_KEYS_MIN", 0)


@given(data=sessions(), task_bytes=st.sampled_from([64, 300, 2000]))
def test_parallel_byte_ranges_agree_with_one_pass(
    tmp_path: Path, data: bytes, task_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, data)
    sequential = _diagnostics(path, jobs=1)
    index = _index(path, jobs=1)
    with monkeypatch.context() as patch:
        _parallel(patch, task_bytes)
        patch.setattr(scanner_module, "READ_BYTES", 97)
        parallel = _diagnostics(path, jobs=2)
        parallel_index = _index(path, jobs=3)
    assert parallel == sequential
    assert parallel_index == index


_TURN_HEADER = (
    b'{"type":"session","version":3,"id":"019f92c8-d694-7ac3-9144-e3b22add01f3",'
    b'"timestamp":"2026-07-24T06:21:03.000Z","cwd":"/w"}\n'
)
_TURN_RECORD = (
    b'{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-07-24T06:21:04.000Z",'
    b'"message":{"role":"user","content":"hi","timestamp":1784874064000}}\n'
)


@given(
    lines=st.lists(st.sampled_from([b"", b"  ", b"x", b"<<<<<<< HEAD", b"[1]"]), max_size=40),
    task_bytes=st.sampled_from([16, 64, 300]),
)
def test_junk_and_blank_lines_in_turn_are_one_finding_however_read(
    tmp_path: Path, lines: list[bytes], task_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blank lines amid junk belong to its run: a stretch of junk and blank lines in turn
    is one SF008 finding (and a blank run before or after it), in one pass or in ranges."""
    body = b"".join(line + b"\n" for line in lines)
    path = _write(
        tmp_path, _TURN_HEADER + _TURN_RECORD + body + _TURN_RECORD.replace(b"01", b"02", 1)
    )
    sequential = _diagnostics(path, jobs=1)
    with monkeypatch.context() as patch:
        _parallel(patch, task_bytes)
        assert _diagnostics(path, jobs=2) == sequential
    junk = [line for line in lines if line.strip() and line != b"[1]"]
    line_findings = [d for d in sequential if d["code"] in ("SF007", "SF008")]
    if junk and b"[1]" not in lines:
        assert [d["code"] for d in line_findings].count("SF008") == 1
        assert len(line_findings) <= 3


@given(
    data=sessions(),
    read_bytes=st.sampled_from([1, 61, 500]),
    long_line_bytes=st.sampled_from([0, 1, 150]),
    jobs=st.sampled_from([1, 2]),
)
def test_long_lines_read_in_one_piece_agree_with_joined_blocks(
    tmp_path: Path,
    data: bytes,
    read_bytes: int,
    long_line_bytes: int,
    jobs: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A line longer than LONG_LINE_BYTES is read again in one piece instead of joined
    from the blocks it spans: same index, same diagnostics, in one process or several."""
    path = _write(tmp_path, data)
    whole = _diagnostics(path, jobs=1)
    index = _index(path, jobs=1)
    with monkeypatch.context() as patch:
        _parallel(patch, 300)
        patch.setattr(scanner_module, "READ_BYTES", read_bytes)
        patch.setattr(scanner_module, "LONG_LINE_BYTES", long_line_bytes)
        assert _diagnostics(path, jobs=jobs) == whole
        assert _index(path, jobs=jobs) == index


_READ_PARTS = scanner_module.read_parts
_doomed: Callable[[Any], bool] = bool


def _dying_reader(task: Any, *args: Any, **options: Any) -> Any:
    """The byte-range reader, killing its own process on the tasks `_doomed` picks."""
    if _doomed(task):
        os.kill(os.getpid(), signal.SIGKILL)
    return _READ_PARTS(task, *args, **options)


@pytest.mark.parametrize("keep_parts", [False, True], ids=["", "keeping parts"])
@pytest.mark.parametrize("death", ["first", "middle", "last", "every"])
def test_a_worker_that_dies_leaves_the_read_to_one_process(
    tmp_path: Path, death: str, keep_parts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed mid-read (out of memory, say) neither hangs the read nor changes
    what it finds: the file is read again in one process (which keeps no parts), and
    the progress reported still adds up to the file's size."""
    data = _conversation(60)
    path = _write(tmp_path, data)
    sequential = _index(path, jobs=1)
    doomed = {
        "first": lambda task: task.start == 0,
        "middle": lambda task: task.start < len(data) // 2 <= task.end,
        "last": lambda task: task.end == len(data),
        "every": lambda task: True,
    }[death]
    parallel_read = scanner_module._read_parallel
    gave_up: list[bool] = []

    def spied(*args: Any, **options: Any) -> Any:
        found = parallel_read(*args, **options)
        gave_up.append(found is None)
        return found

    progress: list[int] = []
    with monkeypatch.context() as patch:
        _parallel(patch, 500)
        patch.setattr(sys.modules[__name__], "_doomed", doomed)
        patch.setattr(scanner_module, "read_parts", _dying_reader)
        patch.setattr(scanner_module, "_read_parallel", spied)
        with time_limit(60):
            parallel = _index(path, jobs=2, progress=progress.append, keep_parts=keep_parts)
            assert read_session(path, jobs=2, keep_parts=keep_parts).parts is None
    assert gave_up == [True, True]
    assert parallel == sequential
    assert sum(progress) == len(data)


def _conversation(turns: int) -> bytes:
    """A linear session of `turns` turns, each a user message, a read and its result."""
    session = Session()
    for turn in range(turns):
        session.user(f"turn {turn}")
        session.assistant([(f"call_{turn}", "read", {"path": f"src/f{turn % 7}.py"})])
        session.result(f"call_{turn}", "read", "contents " * (turn % 13))
        session.assistant([])
    return session.text().encode()


def test_worker_count() -> None:
    """Workers only where each has a share worth forking for, whatever --jobs asks."""
    count = scanner_module.worker_count
    share = scanner_module.WORKER_MIN_BYTES
    assert count(2 << 20, 2) == 1
    assert count(2 * share - 1, 2) == 1
    assert count(2 * share, 2) == 2
    assert count(100 * share, 2) == 2
    assert count(3 * share, 16) == 3
    assert count(100 * share, 1) == 1


@pytest.mark.parametrize("repeat_at", [1, 20, 38])
def test_parallel_reading_finds_a_repeated_id_in_an_unbroken_chain(
    tmp_path: Path, repeat_at: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte ranges cannot see each other's ids: the merged check must still catch it."""
    ids = [f"{n:08x}" for n in range(40)]
    ids[repeat_at + 1] = ids[repeat_at - 1 if repeat_at else 0]
    records: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": "s", "cwd": "/w"}]
    parent = None
    for number, entry_id in enumerate(ids):
        message = {"role": "user", "content": f"hi {number}", "timestamp": number}
        records.append({"type": "message", "id": entry_id, "parentId": parent, "message": message})
        parent = entry_id
    text = "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records)
    path = _write(tmp_path, text.encode())
    sequential = _diagnostics(path, jobs=1)
    assert "SF104" in {d["code"] for d in sequential}
    with monkeypatch.context() as patch:
        _parallel(patch, 300)
        assert _diagnostics(path, jobs=2) == sequential


@given(data=sessions(corrupt=False))
def test_clean_sessions_have_nothing_at_warning_or_above(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path, data)
    serious = [d for d in _diagnostics(path) if d["severity"] != "info"]
    assert serious == []


def _reference_normalize(path: str, base: str | None) -> str:
    path = path.replace("\\", "/")
    if base and not (path.startswith("/") or (len(path) > 2 and path[1] == ":" and path[2] == "/")):
        path = base.replace("\\", "/").rstrip("/") + "/" + path
    absolute = path.startswith("/")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != ".." and not parts[-1].endswith(":"):
            parts.pop()
            continue
        if part == ".." and (absolute or (parts and parts[0].endswith(":"))):
            continue
        parts.append(part)
    joined = "/".join(parts)
    return "/" + joined if absolute else joined


@given(
    path=st.lists(st.sampled_from(["a", "b", ".", "..", "", "c.py", ".hidden", "x\\y"]), max_size=6)
    .map("/".join)
    .flatmap(lambda p: st.sampled_from([p, "/" + p, p + "/"])),
    base=st.sampled_from([None, "/home/u", "/home/u/", "/"]),
)
def test_path_normalisation_fast_path_is_exact(path: str, base: str | None) -> None:
    assert normalize(path, base) == _reference_normalize(path, base)


def test_reference_normalize_matches_posixpath_on_plain_paths() -> None:
    for path in ["/a/b/../c", "/a/./b/", "/../a", "/a//b"]:
        assert _reference_normalize(path, None) == posixpath.normpath(path).replace("//", "/")


def test_generated_sessions_are_valid_json_lines() -> None:
    @given(data=sessions(corrupt=False))
    @settings(max_examples=10, deadline=None)
    def check(data: bytes) -> None:
        for line in data.splitlines():
            json.loads(line)

    check()


def test_a_record_split_over_two_lines_is_not_taken_for_a_clean_block(tmp_path: Path) -> None:
    """A record broken over two lines and two records glued on another leave as many
    records as lines: the block must still be read line by line."""
    lines = [
        b'{"type":"session","version":3,"id":"s1","timestamp":"t","cwd":"/p"}',
        b'{"type":"message","id":"e1","parentId":null,"timestamp":"t","message":',
        b'{"role":"user","content":"hi","timestamp":1}}',
        b'{"type":"message","id":"e2","parentId":"e1","timestamp":"t","message":'
        b'{"role":"assistant","content":"x","stopReason":"stop","timestamp":2}}'
        b'{"type":"message","id":"e3","parentId":"e2","timestamp":"t","message":'
        b'{"role":"user","content":"y","timestamp":3}}',
        b'{"type":"message","id":"e4","parentId":"e3","timestamp":"t","message":'
        b'{"role":"user","content":"z","timestamp":4}}',
    ]
    path = _write(tmp_path, b"\n".join(lines) + b"\n")
    found = {(d["code"], d["location"]["row"]) for d in _diagnostics(path)}
    assert {("SF008", 2), ("SF001", 4)} <= found


@pytest.mark.parametrize("spelling", ["\x00missing", "\x00no-id", "\x00None"])
def test_ids_spelled_like_internal_markers_are_ordinary_ids(tmp_path: Path, spelling: str) -> None:
    """An id that spells an internal marker must not link an entry without a parentId
    to it, as pi does not: that entry is a root of its own."""
    records: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/w"},
        {
            "type": "message",
            "id": spelling,
            "parentId": None,
            "timestamp": "t",
            "message": {"role": "user", "content": "a", "timestamp": 1},
        },
        {
            "type": "message",
            "id": "e2",
            "timestamp": "t",
            "message": {"role": "user", "content": "b", "timestamp": 2},
        },
    ]
    text = "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records)
    view = read_session(_write(tmp_path, text.encode())).view
    assert list(view.active_path) == [2]
