"""The check every repair passes before its bytes take a path (rules.md §1 step 7):
what it refuses, what it lets through, and that a refusal writes nothing."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionfix import Settings, check_file
from sessionfix.repair.plan import CopiedRange, RepairPlan
from sessionfix.repair.targets import repair_in_place, repair_to
from sessionfix.repair.verification import VerificationFailed
from sessionfix.safety.writing import WriteFailed

from .conftest import FIXTURES
from .sessions import Session
from .test_splice import _force_parts

CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
SETTINGS = Settings(quiescence=0.0)
LONG_AGO = 1_700_000_000


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if "sessionfix-tmp" in p.name)


@pytest.fixture
def dangling_remap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A defect in the plan: every climb past a dropped entry ends on a name nowhere."""
    monkeypatch.setattr(RepairPlan, "_climb", lambda self, index, owner=None: (None, "zzzzzzzz"))


@pytest.mark.usefixtures("dangling_remap")
def test_a_new_dangling_name_fails_the_repair_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    problem = "parent link 'zzzzzzzz' on its line 7 names no entry"
    with pytest.raises(VerificationFailed, match=problem):
        repair_to(CLONES, out, SETTINGS)
    assert not out.exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.usefixtures("dangling_remap")
def test_a_failed_in_place_repair_leaves_the_original(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes(CLONES.read_bytes())
    os.utime(session, (LONG_AGO, LONG_AGO))
    with pytest.raises(VerificationFailed):
        repair_in_place(session, SETTINGS)
    assert session.read_bytes() == CLONES.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_children_of_a_dropped_entry_inherit_its_gone_parent(tmp_path: Path) -> None:
    """An orphan result whose parent was already gone is dropped; its two children take
    that gone name (§8 up(x)). Nothing new dangles, so the repair passes."""
    session = Session()
    first = session.user("start")
    orphan = session.result("toolu_gone", "bash", "ok", parent="deadbeef")
    session.user("one way", parent=orphan)
    session.user("another way", parent=orphan)
    session.assistant([])
    source = tmp_path / "s.jsonl"
    source.write_text(session.text(), encoding="utf-8")
    result = repair_to(source, tmp_path / "out.jsonl", SETTINGS)
    assert [d.code for d in result.applied] == ["SF401"]
    repaired = (tmp_path / "out.jsonl").read_bytes()
    assert repaired.count(b'"parentId":"deadbeef"') == 2
    assert b'"id":"' + orphan.encode() not in repaired
    assert first.encode() in repaired


def test_a_later_pass_that_fails_leaves_no_temp_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The unsafe repair of this fixture takes two passes; a full disk during the second
    leaves neither the output nor any temp file, and the original as it was."""
    source = FIXTURES / "SF401-orphan-sharing-an-id-with-a-kept-entry" / "input.jsonl"
    settings = Settings(quiescence=0.0, unsafe_fixes=True)
    written = RepairPlan.pieces
    passes: list[int] = []

    def full_disk_on_second_pass(self: RepairPlan) -> Iterator[bytes | CopiedRange]:
        passes.append(1)
        for piece in written(self):
            yield piece
            if len(passes) == 2:
                raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RepairPlan, "pieces", full_disk_on_second_pass)
    with pytest.raises(WriteFailed, match="no space left on device"):
        repair_to(source, tmp_path / "out.jsonl", settings)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    session = tmp_path / "s.jsonl"
    session.write_bytes(source.read_bytes())
    os.utime(session, (LONG_AGO, LONG_AGO))
    passes.clear()
    with pytest.raises(WriteFailed, match="no space left on device"):
        repair_in_place(session, settings)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    assert session.read_bytes() == source.read_bytes()


def _v1_session() -> bytes:
    """pi v1 (no ids): an orphan result before a compaction that keeps from position 4."""
    usage = {"input": 1, "output": 1, "totalTokens": 2}
    records: list[dict[str, object]] = [
        {
            "type": "session",
            "id": "019f92c8-d694-7ac3-9144-e3b22add01f3",
            "timestamp": "2026-07-24T06:21:03.000Z",
            "cwd": "/home/user/proj",
        },
        {"type": "message", "message": {"role": "user", "content": "a", "timestamp": 1}},
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": "toolu_gone",
                "toolName": "bash",
                "content": [{"type": "text", "text": "ok"}],
                "timestamp": 2,
            },
        },
        {"type": "message", "message": {"role": "user", "content": "b", "timestamp": 3}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "toolu_1", "name": "bash", "arguments": {}}],
                "usage": usage,
                "stopReason": "toolUse",
                "timestamp": 4,
            },
        },
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": "toolu_1",
                "toolName": "bash",
                "content": [{"type": "text", "text": "ok"}],
                "timestamp": 5,
            },
        },
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "done"}],
                "usage": usage,
                "stopReason": "stop",
                "timestamp": 6,
            },
        },
        {
            "type": "compaction",
            "timestamp": "2026-07-24T06:21:08.000Z",
            "summary": "s",
            "firstKeptEntryIndex": 4,
            "tokensBefore": 100,
        },
        {"type": "message", "message": {"role": "user", "content": "c", "timestamp": 7}},
    ]
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


def test_a_broken_v1_cut_fails_the_repair(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pi v1 records have no ids: a kept position the run breaks is caught by count."""
    source = tmp_path / "s.jsonl"
    source.write_bytes(_v1_session())
    good = repair_to(source, tmp_path / "good.jsonl", SETTINGS)
    assert [d.code for d in good.applied] == ["SF401"]
    assert not [d for d in good.remaining if d.code == "SF501"]
    monkeypatch.setattr(RepairPlan, "_remap_position", lambda self, value, owner: value)
    with pytest.raises(VerificationFailed, match="SF501"):
        repair_to(source, tmp_path / "bad.jsonl", SETTINGS)
    assert not (tmp_path / "bad.jsonl").exists()


REPORT_ONLY = FIXTURES / "SF402-claude-session-ends-mid-call" / "input.jsonl"


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record every session read of the repair's plan and of its verification."""
    from sessionfix.repair import planned, verification

    reads: list[Path] = []
    real = planned.read_session

    def counted(path: Path, *args: object, **kwargs: object) -> object:
        reads.append(Path(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(planned, "read_session", counted)
    monkeypatch.setattr(verification, "read_session", counted)
    return reads


def test_an_exact_copy_is_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing applies: the written copy is the input byte for byte, so its check is the
    input's, under the output's name."""
    reads = _counting_reads(monkeypatch)
    out = tmp_path / "out.jsonl"
    result = repair_to(REPORT_ONLY, out, SETTINGS)
    assert out.read_bytes() == REPORT_ONLY.read_bytes()
    assert reads == [REPORT_ONLY]
    assert [d.code for d in result.remaining] == ["SF402"]
    assert {d.filename for d in result.remaining} == {str(out)}


def test_a_copy_whose_digest_differs_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionfix.repair import verification

    reads = _counting_reads(monkeypatch)
    digests = iter(["written", "input"])
    monkeypatch.setattr(verification, "file_digest", lambda *args: next(digests))
    out = tmp_path / "out.jsonl"
    repair_to(REPORT_ONLY, out, SETTINGS)
    assert len(reads) == 2
    assert reads[1] != REPORT_ONLY


FOREIGN = FIXTURES / "SF110-claude-records-from-another-session"
SESSION_NAME = "073bec07-cd99-4bec-9a10-1a6bf21804be.jsonl"


def _found(path: Path, settings: Settings) -> list[tuple[str, int]]:
    return [(d.code, d.row) for d in check_file(path, settings)]


@pytest.mark.parametrize("jobs", [1, 2])
def test_what_is_left_is_what_a_later_check_of_the_result_finds(
    tmp_path: Path, jobs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The result is checked under the name it is to have, not its temporary one: a
    Claude Code session named after its id still reports the records of another session
    once its missing final newline is fixed, as a check of it then does; a copy under
    another name does not, nor does a check of it. With two jobs, read in parallel."""
    if jobs > 1:
        _force_parts(monkeypatch)
    session = tmp_path / SESSION_NAME
    session.write_bytes((FOREIGN / "input.jsonl").read_bytes().rstrip(b"\n"))
    settings = Settings(quiescence=0.0, jobs=jobs)
    assert {code for code, _ in _found(session, settings)} == {"SF110", "SF009"}
    copy = repair_to(session, tmp_path / "copy.jsonl", settings)
    assert [(d.code, d.row) for d in copy.remaining] == _found(tmp_path / "copy.jsonl", settings)
    assert copy.remaining == []
    renamed = tmp_path / "renamed" / SESSION_NAME
    renamed.parent.mkdir()
    again = repair_to(tmp_path / "copy.jsonl", renamed, settings)
    assert [(d.code, d.row) for d in again.remaining] == _found(renamed, settings)
    result = repair_in_place(session, settings, backup=False)
    later = _found(session, settings)
    assert [(d.code, d.row) for d in result.remaining] == later == [("SF110", 3)]
    assert _found(renamed, settings) == later


def test_a_copy_into_an_openclaw_folder_is_checked_as_openclaw_checks_it(tmp_path: Path) -> None:
    """Where the copy is to lie decides what is left: in an OpenClaw sessions folder, a
    header id that is not the file's name is refused by OpenClaw's import."""
    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    source = tmp_path / "x.jsonl"
    source.write_bytes((FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl").read_bytes())
    settings = Settings(quiescence=0.0)
    assert _found(source, settings) == [("SF001", 3)]
    copy = repair_to(source, folder / "other.jsonl", settings)
    assert {d.format for d in copy.remaining} == {"openclaw"}
    assert [(d.code, d.row) for d in copy.remaining] == _found(folder / "other.jsonl", settings)
    assert [d.code for d in copy.remaining] == ["SF101"]


GLUED_CODEX = FIXTURES / "SF001-codex-glued-call-and-output" / "input.jsonl"
"""A Codex rollout (no parent links: a lost record dangles nothing) with a glued line."""


@pytest.fixture
def record_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    """A defect in the plan: the last record of a line that holds several goes."""
    emitted = RepairPlan._record_lines

    def lossy(self: RepairPlan, records: range) -> list[bytes]:
        lines = emitted(self, records)
        return lines[:-1] if len(lines) > 1 else lines

    monkeypatch.setattr(RepairPlan, "_record_lines", lossy)


@pytest.mark.usefixtures("record_lost")
@pytest.mark.parametrize("mode", ["-o", "-o -", "--in-place", "--diff"])
def test_a_repair_that_loses_a_whole_record_is_refused_under_every_flag(
    tmp_path: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever the flags, a result holding fewer whole records than the input, less
    those the fixes drop by name, is refused: one line, exit 2, nothing written, and
    no bytes reported saved."""
    from sessionfix.cli import main

    session = tmp_path / "s.jsonl"
    session.write_bytes(GLUED_CODEX.read_bytes())
    os.utime(session, (LONG_AGO, LONG_AGO))
    out = tmp_path / "out.jsonl"
    flags = {
        "-o": ["-o", str(out)],
        "-o -": ["-o", "-"],
        "--in-place": ["--in-place", "--quiescence", "0"],
        "--diff": ["--diff"],
    }[mode]
    assert main(["repair", "-q", *flags, str(session)]) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("sessionfix: ")]
    assert errors == [
        f"sessionfix: error: {session}: the repaired file did not pass verification (it "
        "holds 9 whole records where 10 were due: the input's 10, 0 dropped by name, 0 "
        "inserted); nothing was written"
    ]
    assert "saved" not in captured.err
    assert "--- a/" not in captured.out
    assert session.read_bytes() == GLUED_CODEX.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_a_split_that_closes_a_parent_cycle_on_the_path_fails_the_repair(tmp_path: Path) -> None:
    """Splitting a glued line brings back two records pi could not read; when a later
    record reuses the first one's id with the second as its parent, they close a cycle on
    the path pi walks, and pi, which loaded the session, would hang on the repair."""
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-07-24T06:21:03Z"}
    header["cwd"] = "/home/user/proj"

    def message(entry: str, parent: str | None, role: str, second: int) -> str:
        content = [{"type": "text", "text": "continue" if role == "user" else "done"}]
        return json.dumps(
            {
                "type": "message",
                "id": entry,
                "parentId": parent,
                "timestamp": f"2026-07-24T06:21:{second:02}.000Z",
                "message": {"role": role, "content": content, "timestamp": 1784874060000 + second},
            }
        )

    level = {"type": "thinking_level_change", "id": "a1", "parentId": "a2"}
    level |= {"timestamp": "2026-07-24T06:21:06.000Z", "thinkingLevel": "high"}
    lines = [
        json.dumps(header),
        message("a1", None, "user", 4) + message("a2", "a1", "assistant", 5),
        json.dumps(level),
        message("a4", "a1", "user", 7),
        message("a5", "a4", "assistant", 8),
    ]
    session = tmp_path / "s.jsonl"
    session.write_text("\n".join(lines) + "\n")
    target = tmp_path / "out.jsonl"
    with pytest.raises(VerificationFailed, match="pi hangs on the parent cycle"):
        repair_to(session, target, Settings(quiescence=0))
    assert not target.exists()
