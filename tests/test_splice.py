"""Verification that reuses the input's read: the model `read_spliced` builds of a
repair's result, from the input's kept parts and fresh reads of the rest, is the one a
fresh read of the result gives, whatever the result holds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from sessionfix import Settings
from sessionfix.diagnostics import Diagnostic
from sessionfix.engine import run_rules
from sessionfix.formats import Format
from sessionfix.formats.pi import PI
from sessionfix.repair.planned import PlannedRepair
from sessionfix.repair.targets import repair_to
from sessionfix.repair.verification import VerificationFailed
from sessionfix.report.render import diagnostic_json
from sessionfix.scan import scanner as scanner_module
from sessionfix.scan import splice as splice_module
from sessionfix.scan.scanner import KeptParts, ScannedFile, read_session
from sessionfix.scan.splice import CopiedRun, read_spliced

from .sessions import Session, rollouts, sessions
from .test_fixtures import CASES, _settings
from .test_properties import conversation_facts


def _force_parts(patch: pytest.MonkeyPatch, task_bytes: int = 300, long_line: int = 200) -> None:
    """Parallel reads of tiny files, in ranges of `task_bytes`, with a part of its own
    for every line of `long_line` bytes or more."""
    patch.setattr(scanner_module, "TASK_BYTES", task_bytes)
    patch.setattr(scanner_module, "WORKER_MIN_BYTES", 1)
    patch.setattr(scanner_module, "PARALLEL_KEYS_MIN", 0)
    patch.setattr(scanner_module, "LONG_LINE_BYTES", long_line)
    patch.setattr(scanner_module, "READ_BYTES", 97)


def model(scanned: ScannedFile, settings: Settings) -> tuple[Any, ...]:
    """Everything a read produces that the rules and a later repair see, and what the
    rules report on it."""
    view = scanned.view
    columns = tuple(
        bytes(getattr(view, name))
        for name in (
            "rows",
            "offsets",
            "sizes",
            "kinds",
            "roles",
            "flags",
            "id_keys",
            "parent_keys",
        )
    )
    facts = (
        view.format,
        view.tree,
        view.header,
        view.columns,
        view.leaked,
        view.boundaries,
        view.references,
        view.turns,
        view.leaf_hints,
        view.foreign_sessions,
        view.invalid_calls,
        view.adopters,
        None if view.ordinals is None else bytes(view.ordinals),
        # (Not `notes`: why a pi file reads as OpenClaw's; they differ with how a read
        # was asked, from its location or by `--format`, and decide `format` alone.)
        view.largest_size,
        view.duplicate_ids,
    )
    derived = (list(view.parents), list(view.active_path), view.leaf, view.linear)
    lines = scanned.lines
    report = (
        [
            (f.issue, f.row, f.rows, f.offset, f.length, f.detail, f.span, f.records, f.recoverable)
            for f in lines.findings
        ],
        bytes(lines.crlf_rows),
        (lines.line_count, lines.size, lines.final_newline, lines.last_row),
        (lines.last_row_parsed, lines.control_bytes, lines.foreign),
    )
    events = conversation_facts(scanned.tracking)
    found = [
        {k: v for k, v in diagnostic_json(d).items() if k != "url"}
        for d in run_rules(scanned, settings, "session.jsonl")
    ]
    return columns, facts, derived, report, events, found


def _repaired(source: Path, settings: Settings) -> tuple[PlannedRepair, Path]:
    """The input planned (its parts kept) and its first pass written beside it."""
    planned = PlannedRepair(source, settings)
    out = source.with_name(source.name + ".out")
    with open(out, "wb") as written:
        for chunk in planned.chunks():
            written.write(chunk)
    return planned, out


def _fresh(planned: PlannedRepair, out: Path) -> ScannedFile:
    """A read of the result in one process, under the name of the session."""
    return read_session(
        out, Format(planned.format), None, 1, session_only=False, named_as=planned.named_as
    )


def _spliced_against_fresh(
    source: Path, settings: Settings, runs: list[CopiedRun] | None = None
) -> ScannedFile | None:
    """Assert that the spliced read of the repair of `source` (given `runs`, or the
    plan's) is a fresh read of it, and return it (None when it reused nothing)."""
    planned, out = _repaired(source, settings)
    try:
        kept = planned.scanned.parts
        copied = planned.plan.copied_runs if runs is None else runs
        assert copied is not None
        if kept is None:  # read in one process: an empty file, or no record up front
            return None
        spliced = read_spliced(out, kept, copied, 2, named_as=planned.named_as)
        if spliced is not None:
            assert model(spliced, settings) == model(_fresh(planned, out), settings)
        return spliced
    finally:
        planned.close()


@given(
    data=sessions(),
    unsafe=st.booleans(),
    task_bytes=st.sampled_from([120, 300, 2000]),
    long_line=st.sampled_from([150, 400, 1 << 20]),
)
def test_spliced_read_of_a_repaired_session_is_a_fresh_read(
    tmp_path: Path, data: bytes, unsafe: bool, task_bytes: int, long_line: int
) -> None:
    source = tmp_path / "session.jsonl"
    source.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch, task_bytes, long_line)
        spliced = _spliced_against_fresh(source, Settings(quiescence=0.0, unsafe_fixes=unsafe))
    event("reused parts" if spliced is not None else "read afresh")


@given(data=rollouts(), unsafe=st.booleans(), long_line=st.sampled_from([150, 600]))
def test_spliced_read_of_a_repaired_rollout_is_a_fresh_read(
    tmp_path: Path, data: bytes, unsafe: bool, long_line: int
) -> None:
    source = tmp_path / "rollout.jsonl"
    source.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch, 300, long_line)
        spliced = _spliced_against_fresh(source, Settings(quiescence=0.0, unsafe_fixes=unsafe))
    event("reused parts" if spliced is not None else "read afresh")


@st.composite
def _runs(draw: st.DrawFn, size: int) -> list[CopiedRun]:
    """Copied runs as anyone might claim them: in input order, anywhere in the output."""
    cuts = sorted(draw(st.lists(st.integers(0, size), min_size=2, max_size=8)))
    runs = []
    to = draw(st.integers(0, 40))
    for start, end in zip(cuts[::2], cuts[1::2], strict=False):
        runs.append(CopiedRun(start, end, to))
        to += end - start + draw(st.integers(-3, 40))
    return runs


@given(data=sessions(), choice=st.data())
def test_runs_that_misplace_the_input_never_change_the_model(
    tmp_path: Path, data: bytes, choice: st.DataObject
) -> None:
    """Only parts proven by their digest at a line start are taken: with copied runs
    that say anything at all, the spliced read is a fresh read of the file or none."""
    source = tmp_path / "session.jsonl"
    source.write_bytes(data)
    runs = choice.draw(_runs(len(data)))
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch)
        _spliced_against_fresh(source, Settings(quiescence=0.0, unsafe_fixes=True), runs)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_spliced_read_of_each_fixture_repair_is_a_fresh_read(
    case: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = json.loads((case / "case.json").read_text())
    source = tmp_path / spec.get("filename", "session.jsonl")
    source.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(case / "input.jsonl", source)
    _force_parts(monkeypatch)
    _spliced_against_fresh(source, msgspec.structs.replace(_settings(spec), unsafe_fixes=True))


REUSED = [
    ("SF001-codex-glued-call-and-output", "session.jsonl"),
    ("SF001-claude-glued-assistant-and-summary", "session.jsonl"),
    # Named after a session, as Claude Code names them: the result is read under that
    # name, not its temporary one, so what the name tells is the same in both reads.
    ("SF001-claude-glued-assistant-and-summary", "5d9a4f0e-2b7c-4e8a-9f31-6c0b8d2e7a14.jsonl"),
    ("SF110-claude-records-from-another-session", "073bec07-cd99-4bec-9a10-1a6bf21804be.jsonl"),
    ("SF001-glued-assistant-and-user", "session.jsonl"),
]


@pytest.mark.parametrize(("name", "filename"), REUSED)
def test_a_repair_far_from_a_part_reuses_it(
    name: str, filename: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each format: a repair that splits one line keeps the parts before and after it."""
    source = tmp_path / filename
    shutil.copyfile(Path(__file__).parent / "fixtures" / name / "input.jsonl", source)
    _force_parts(monkeypatch)
    placed = []
    real = splice_module._placed
    monkeypatch.setattr(
        splice_module, "_placed", lambda *args: placed.extend(real(*args)) or iter(placed)
    )
    assert _spliced_against_fresh(source, Settings(quiescence=0.0)) is not None
    assert len(placed) >= 2


def _long_session(turns: int) -> bytes:
    session = Session()
    for turn in range(turns):
        session.user(f"turn {turn}")
        session.assistant([(f"c{turn}", "read", {"path": f"f{turn}.py"})])
        session.result(f"c{turn}", "read", "x" * 300)
    return session.text().encode()


def test_a_part_whose_bytes_changed_is_read_again(tmp_path: Path) -> None:
    """One byte of a copied part changed after the write: its digest fails, and the
    result is read afresh."""
    data = _long_session(40)
    source = tmp_path / "session.jsonl"
    source.write_bytes(data.rstrip(b"\n"))
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch, 2000)
        planned, out = _repaired(source, Settings(quiescence=0.0))
        kept, runs = planned.scanned.parts, planned.plan.copied_runs
        assert kept is not None
        assert runs
        assert read_spliced(out, kept, runs, 2) is not None
        text = bytearray(out.read_bytes())
        at = text.index(b"turn 7")
        text[at : at + 6] = b"turn 8"
        out.write_bytes(bytes(text))
        assert read_spliced(out, kept, runs, 2) is None
        planned.close()


def test_a_part_glued_onto_the_line_before_is_read_again(tmp_path: Path) -> None:
    """A part's bytes where the output holds them, but not from a line start (the
    newline before them gone): the part is not taken."""
    source = tmp_path / "session.jsonl"
    source.write_bytes(_long_session(40))
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch, 2000)
        planned = PlannedRepair(source, Settings(quiescence=0.0))
        kept = planned.scanned.parts
        assert kept is not None
        second = kept.parts[1]
        glued = bytearray(source.read_bytes())
        assert glued[second.start - 1 : second.start] == b"\n"
        glued[second.start - 1] = ord(" ")
        out = tmp_path / "glued.jsonl"
        out.write_bytes(bytes(glued))
        runs = [
            CopiedRun(0, second.start - 1, 0),
            CopiedRun(second.start, len(glued), second.start),
        ]
        spliced = read_spliced(out, kept, runs, 2)
        settings = Settings(quiescence=0.0)
        assert spliced is None or model(spliced, settings) == model(_fresh(planned, out), settings)
        planned.close()


def test_an_unterminated_last_line_followed_by_more_is_read_again(tmp_path: Path) -> None:
    """The input's unterminated last line, where the output goes on after it: its part
    (which says the file ends without a newline) is not taken."""
    source = tmp_path / "session.jsonl"
    data = _long_session(40).rstrip(b"\n")
    source.write_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch, 2000)
        kept = read_session(source, jobs=2, keep_parts=True).parts
        assert kept is not None
        assert not kept.parts[-1].terminated
        out = tmp_path / "terminated.jsonl"
        out.write_bytes(data + b"\n")
        spliced = read_spliced(out, kept, [CopiedRun(0, len(data), 0)], 2)
        assert spliced is not None
        assert spliced.lines.final_newline
        settings = Settings(quiescence=0.0)
        fresh = read_session(out, PI, None, 1, session_only=False)
        assert model(spliced, settings) == model(fresh, settings)


def test_parts_holding_a_changed_row_are_let_go_once_planned(tmp_path: Path) -> None:
    """The parts a repair changes are of no use to its verification: only the others
    are kept past the plan."""
    source = tmp_path / "session.jsonl"
    source.write_bytes(_long_session(40).rstrip(b"\n"))
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch, 2000)
        every = read_session(source, jobs=2, keep_parts=True).parts
        planned = PlannedRepair(source, Settings(quiescence=0.0))
        kept = planned.scanned.parts
        planned.close()
    assert every is not None
    assert kept is not None
    last_row = every.parts[-1].rows[-1]
    assert [part.rows for part in kept.parts] == [
        part.rows for part in every.parts if last_row not in part.rows
    ]
    assert len(kept.parts) == len(every.parts) - 1


@given(data=sessions(), unsafe=st.booleans())
def test_repair_with_spliced_verification_writes_what_a_full_one_does(
    tmp_path: Path, data: bytes, unsafe: bool
) -> None:
    source = tmp_path / "session.jsonl"
    source.write_bytes(data)
    settings = Settings(quiescence=0.0, unsafe_fixes=unsafe)
    whole, spliced = tmp_path / "whole.jsonl", tmp_path / "spliced.jsonl"
    expected = _repair_outcome(source, whole, msgspec.structs.replace(settings, jobs=1))
    with pytest.MonkeyPatch.context() as patch:
        _force_parts(patch)
        got = _repair_outcome(source, spliced, settings)
    assert got == expected


def _repair_outcome(source: Path, target: Path, settings: Settings) -> tuple[bytes, Any] | str:
    """The bytes a repair writes and what it reports remaining, or why verification
    refused it (a repair the agent would not load is refused alike however it is read)."""
    try:
        result = repair_to(source, target, settings, replace=True)
    except VerificationFailed as refused:
        return str(refused)
    return target.read_bytes(), _reported(result.remaining)


def _reported(diagnostics: list[Diagnostic]) -> list[dict[str, Any]]:
    """What a report says of each finding, less the file's name (in its place too)."""
    reported = []
    for diagnostic in diagnostics:
        shown = {k: v for k, v in diagnostic_json(diagnostic).items() if k != "filename"}
        shown["record"] = {k: v for k, v in shown["record"].items() if k != "place"}
        reported.append(shown)
    return reported


def test_parts_are_kept_only_while_the_file_promises_them_within_budget() -> None:
    """A read stops keeping parts once those of the bytes read so far, at that rate for
    the whole file, would pass `KEPT_BYTES`: a file of many small entries, whose parts
    would double its index, keeps none."""
    kept = KeptParts(PI, None, None, held=1 << 20)
    size = 1 << 30
    assert kept.within_budget(size // 16, size) is kept
    assert kept.within_budget(size // 64, size) is None
