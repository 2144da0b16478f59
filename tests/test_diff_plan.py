"""`repair --diff` and the JSON plan show exactly what `repair -o` writes.

Over every fixture, example and sample session, with safe and with unsafe fixes:
applying the diff to the input gives the repaired file byte for byte, and so does
applying the edits of the JSON plan (`repair --diff --output-format json`), later
passes and follow-on edits included.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest

from sessionfix import Settings
from sessionfix.diagnostics import SORT_KEY, WrittenLine
from sessionfix.errors import InputError
from sessionfix.repair.preview import preview_repair
from sessionfix.repair.runs import PreviewRun
from sessionfix.repair.targets import repair_to
from sessionfix.report.diff import write_diff
from sessionfix.report.render import write_json

from .conftest import CORPUS, FIXTURES, ROOT
from .diffs import apply_diff, apply_plan
from .robustness import LONG_AGO, run_cli
from .test_fixtures import _settings

Capture = pytest.CaptureFixture[bytes]


def _cases() -> list[tuple[str, Path, dict[str, Any]]]:
    cases: list[tuple[str, Path, dict[str, Any]]] = []
    for case in sorted(path for path in FIXTURES.iterdir() if path.is_dir()):
        spec_file = case / "case.json"
        spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
        cases.append((f"fixtures/{case.name}", case / "input.jsonl", spec))
    for path in sorted((ROOT / "examples" / "sessions").glob("*.jsonl")):
        if not path.name.endswith(".trajectory.jsonl"):
            cases.append((f"examples/{path.name}", path, {}))
    for path in sorted(CORPUS.rglob("*.jsonl")):
        cases.append((str(path.relative_to(CORPUS)), path, {}))
    return cases


CASES: Final = _cases()


def test_the_corpus_is_there(corpus: Path) -> None:
    """The sample sessions are part of the cases: fail (not pass vacuously) without them."""
    assert any(name.startswith(("openclaw/", "claude/", "codex/")) for name, _, _ in CASES)


def _repair_three_ways(
    source: Path,
    spec: dict[str, Any],
    tmp_path: Path,
    unsafe: bool,
    variant: str = "as-is",
) -> tuple[bytes, bytes, bytes, list[dict[str, Any]]]:
    """The input (as it is, with CRLF endings kept, or without its final newline), what
    `repair -o` writes, the exact diff and the JSON plan."""
    target = tmp_path / "in" / spec.get("filename", "session.jsonl")
    target.parent.mkdir(parents=True)
    data = source.read_bytes()
    settings = msgspec.structs.replace(_settings(spec), unsafe_fixes=unsafe)
    if variant == "crlf-kept":
        data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        settings = msgspec.structs.replace(settings, ignore=(*settings.ignore, "SF006"))
    elif variant == "no-final-newline":
        data = data.rstrip(b"\n")
    target.write_bytes(data)
    os.utime(target, (LONG_AGO, LONG_AGO))
    written = tmp_path / "out.jsonl"
    repair_to(target, written, settings)
    diff = io.BytesIO()
    plan = io.BytesIO()
    preview = preview_repair(target, settings)
    try:
        write_diff(preview, diff, "session.jsonl", full_lines=True, exact=True)
        write_json(preview.planned("session.jsonl"), plan)
    finally:
        preview.close()
    return target.read_bytes(), written.read_bytes(), diff.getvalue(), json.loads(plan.getvalue())


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("name", "source", "spec"), CASES, ids=[name for name, _, _ in CASES])
def test_the_diff_and_the_plan_give_the_repair(
    tmp_path: Path, name: str, source: Path, spec: dict[str, Any], unsafe: bool
) -> None:
    original, repaired, diff, plan = _repair_three_ways(source, spec, tmp_path, unsafe)
    if repaired == original:
        assert diff == b""
        assert plan == []
        return
    assert apply_diff(original, diff) == repaired
    assert apply_plan(original, plan) == repaired


FIXTURE_CASES: Final = [case for case in CASES if case[0].startswith("fixtures/")]


@pytest.mark.parametrize("variant", ["crlf-kept", "no-final-newline"])
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(
    ("name", "source", "spec"), FIXTURE_CASES, ids=[name for name, _, _ in FIXTURE_CASES]
)
def test_line_endings_are_in_the_diff_and_the_plan(
    tmp_path: Path, name: str, source: Path, spec: dict[str, Any], unsafe: bool, variant: str
) -> None:
    """The same with every line ending in CRLF (SF006 ignored, so rewritten lines keep
    CRLF) and without a final newline: the plan's `end` says how each line ends."""
    original, repaired, diff, plan = _repair_three_ways(source, spec, tmp_path, unsafe, variant)
    assert apply_diff(original, diff) == repaired
    assert apply_plan(original, plan) == repaired


CLONE_OF_LINE_6: Final = "openclaw/letta-trajectory__pi-cleanup.v3.corrupt.jsonl"


def _with_a_copy_of_line_6(tmp_path: Path) -> Path:
    """A copy of line 6 appended: dropping it (SF104) moves the leaf onto an orphan tool
    result, which a second pass drops (SF401)."""
    data = (CORPUS / CLONE_OF_LINE_6).read_bytes()
    session = tmp_path / "session.jsonl"
    session.write_bytes(data + data.split(b"\n")[5] + b"\n")
    os.utime(session, (LONG_AGO, LONG_AGO))
    return session


def test_a_later_pass_is_in_the_diff_and_the_plan(tmp_path: Path, capsysbinary: Capture) -> None:
    session = _with_a_copy_of_line_6(tmp_path)
    out = tmp_path / "out.jsonl"
    written = run_cli(["repair", "-q", "-o", out, session], capsysbinary)
    assert written.code in (0, 1)
    diff = run_cli(["repair", "-q", "--diff", "--diff-full-lines", session], capsysbinary)
    assert diff.code == 1
    assert apply_diff(session.read_bytes(), diff.out.encode()) == out.read_bytes()
    listed = run_cli(["repair", "-q", "--diff", "--output-format", "json", session], capsysbinary)
    plan = json.loads(listed.out)
    assert {(d["code"], d["location"]["row"]) for d in plan} == {("SF104", 11), ("SF401", 10)}
    assert apply_plan(session.read_bytes(), plan) == out.read_bytes()


def test_follow_on_edits_are_listed_with_their_cause(tmp_path: Path) -> None:
    """Dropping copies re-parents the child of the last: the plan lists that edit with
    a drop."""
    session = tmp_path / "s.jsonl"
    shutil.copyfile(FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl", session)
    preview = preview_repair(session, Settings(quiescence=0.0))
    try:
        plan = preview.planned("s.jsonl")
    finally:
        preview.close()
    drops = [[edit.op.value for edit in d.fix.edits] for d in plan if d.code == "SF201" and d.fix]
    assert len(drops) == 2
    assert all(ops[0] == "delete" for ops in drops)
    assert any("replace" in ops for ops in drops), "the re-parented child is not listed"


@pytest.mark.skipif(shutil.which("patch") is None, reason="GNU patch is not installed")
def test_gnu_patch_applies_the_diff(tmp_path: Path, capsysbinary: Capture) -> None:
    """What users do with a diff: `patch` on the input gives what `-o` writes."""
    session = _with_a_copy_of_line_6(tmp_path)
    out = tmp_path / "out.jsonl"
    run_cli(["repair", "-q", "-o", out, session], capsysbinary)
    diff = run_cli(["repair", "-q", "--diff", session], capsysbinary)
    patched = tmp_path / "patched.jsonl"
    shutil.copyfile(session, patched)
    subprocess.run(
        ["patch", "--quiet", "--binary", str(patched)],
        input=diff.out.encode(),
        check=True,
        timeout=60,
    )
    assert patched.read_bytes() == out.read_bytes()


@pytest.mark.parametrize(("variant", "end"), [("as-is", "\n"), ("crlf-kept", "\r\n")])
def test_a_final_newline_is_listed_as_appended(tmp_path: Path, variant: str, end: str) -> None:
    """An unterminated last line the repair writes unchanged is listed as its terminator
    appended, not as the whole record again."""
    source = FIXTURES / "SF009-no-final-newline" / "input.jsonl"
    original, repaired, _, plan = _repair_three_ways(source, {}, tmp_path, False, variant)
    rows = original.count(b"\n") + 1
    assert [(d["code"], d["fix"]["edits"]) for d in plan] == [
        ("SF009", [{"op": "append", "row": rows, "content": end}])
    ]
    assert apply_plan(original, plan) == repaired == original + end.encode()


def test_a_preview_run_keeps_each_diffs_repair_only_while_it_is_shown(tmp_path: Path) -> None:
    """`PreviewRun.diffs` hands out one preview at a time and removes its repaired bytes
    before the next; `plan` keeps every preview's until the run is closed, since the
    plan's edits read them."""
    sources = [FIXTURES / name / "input.jsonl" for name in ("SF201-three-back-to-back-copies",)]
    sources.append(FIXTURES / "SF402-claude-session-ends-mid-call" / "input.jsonl")
    settings = Settings(quiescence=0.0)
    shown: list[Path] = []
    with PreviewRun(sources, settings) as run:
        for preview in run.diffs():
            assert all(not path.exists() for path in shown)
            if preview.output is not None:
                assert preview.output.exists()
                shown.append(preview.output)
    assert len(shown) == 1
    assert not shown[0].exists()
    assert run.changed == 1
    assert run.would_fix == len(preview_repair(sources[0], settings).result.applied)
    assert run.note() == f"Would fix {run.would_fix} problems in 1 file."
    with PreviewRun(sources, settings) as run:
        plan = run.plan()
        assert run.would_fix == len(plan) > 0
        assert plan == sorted(plan, key=SORT_KEY)
        written = [e for d in plan if d.fix for e in d.fix.edits if isinstance(e, WrittenLine)]
        assert written
        assert all(edit.raw() for edit in written)
    with pytest.raises(InputError, match="cannot read"):
        written[0].raw()  # the repaired bytes went with the run
