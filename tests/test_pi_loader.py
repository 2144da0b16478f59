"""Scan findings checked against the real agent: pi's own loader, run by Node.js on every
pi and OpenClaw session the tests can see (fixtures, examples, the shared corpus)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessionfix import Settings, check_file
from sessionfix.context import context_of
from sessionfix.model.loaded import Sent
from sessionfix.read.reader import LineFinding, LineIssue
from sessionfix.repair.targets import repair_to
from sessionfix.scan.scanner import read_session

from .conftest import CORPUS, FIXTURES, ROOT
from .pi_loader import PiLoad, load_with_pi
from .slim_cases import CUT_MARK, SlimCase, assert_cut, slimmed
from .test_fixtures import _settings, place_case

_LOST = {LineIssue.GLUED, LineIssue.TORN, LineIssue.UNDEFINED, LineIssue.NUL, LineIssue.SPREAD}


def _pi_sessions() -> list[Path]:
    candidates = [
        *sorted(FIXTURES.glob("*/input.jsonl")),
        *sorted((ROOT / "examples" / "sessions").glob("*.jsonl")),
        *sorted((CORPUS / "openclaw").glob("*.jsonl")),
    ]
    return [path for path in candidates if read_session(path).view.format in {"pi", "openclaw"}]


SESSIONS = _pi_sessions()


@pytest.fixture(scope="module")
def slim_case(tmp_path_factory: pytest.TempPathFactory) -> SlimCase:
    return slimmed(tmp_path_factory.mktemp("slim"), "pi")


@pytest.fixture(scope="module")
def compacted_case(tmp_path_factory: pytest.TempPathFactory) -> SlimCase:
    return slimmed(tmp_path_factory.mktemp("slim-compacted"), "pi-compacted")


@pytest.fixture(scope="module")
def pi_loads(slim_case: SlimCase, compacted_case: SlimCase) -> dict[Path, PiLoad]:
    cases = (slim_case, compacted_case)
    return load_with_pi([*SESSIONS, *(p for c in cases for p in (c.original, c.slimmed))])


def _name(path: Path) -> str:
    return str(path.relative_to(path.parents[1]))


def _lost_to_json_parse(finding: LineFinding, first_row: int) -> bool:
    """Whether a line-level finding means `JSON.parse` rejects the line. A BOM on the
    file's first line is the exception: pi trims the file's text before splitting it."""
    if finding.issue in _LOST:
        return True
    if finding.issue is LineIssue.BOM:
        return finding.row != first_row
    return finding.issue is LineIssue.UNPARSABLE and finding.json_kind is None


@pytest.mark.parametrize("path", SESSIONS, ids=_name)
def test_pi_loads_each_session_as_scan_predicts(path: Path, pi_loads: dict[Path, PiLoad]) -> None:
    """pi drops exactly the lines scan finds unparsable; it hangs only on a parent cycle
    (SF105: on its leaf's path, so not on every file with one) and throws only on a
    `null` line (SF008)."""
    loaded = pi_loads[path]
    findings = read_session(path).lines.findings
    codes = {d.code for d in check_file(path, Settings(quiescence=0.0))}
    assert (loaded.error is not None) == any(f.json_kind == "null" for f in findings)
    if loaded.hang:
        assert "SF105" in codes
    elif loaded.error is not None:
        assert "SF008" in codes
    else:
        assert list(loaded.skipped) == rows_lost_to_json_parse(path, findings)


def rows_lost_to_json_parse(path: Path, findings: list[LineFinding]) -> list[int]:
    """The lines of `path` that pi's `JSON.parse` rejects, by the findings of a scan; the
    blank lines a run of junk takes in pi skips as blank."""
    first_row = _first_content_row(path)
    lines = path.read_bytes().split(b"\n")
    return sorted(
        {
            row
            for f in findings
            if _lost_to_json_parse(f, first_row)
            for row in range(f.row, f.last_row + 1)
            if not (f.blanks and not lines[row - 1].strip(b" \t\r"))
        }
    )


def _first_content_row(path: Path) -> int:
    for row, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if line.strip():
            return row
    return 1


def test_pi_loses_only_the_glued_records_of_a_v1_file(pi_loads: dict[Path, PiLoad]) -> None:
    """pi migrates v1 by file order, so a dropped line costs its own records only."""
    path = CORPUS / "openclaw" / "pi-mono__session.v1.glued-line.jsonl"
    loaded = pi_loads[path]
    assert loaded.skipped == (440,)
    assert loaded.parsed == sum(1 for line in path.read_bytes().split(b"\n") if line.strip()) - 1


def _read_whole_by_pi(path: Path) -> bool:
    """A plain pi session (not OpenClaw's) that pi reads whole, as the scan predicts it:
    no parent cycle on the leaf's path, no `null` line, no line `JSON.parse` rejects
    (`test_pi_loads_each_session_as_scan_predicts` checks the prediction on every one)."""
    scanned = read_session(path)
    findings = scanned.lines.findings
    first_row = _first_content_row(path)
    return (
        scanned.view.format == "pi"
        and not scanned.view.cycle_on_path
        and not any(f.json_kind == "null" for f in findings)
        and not any(_lost_to_json_parse(f, first_row) for f in findings)
    )


READ_WHOLE = [path for path in SESSIONS if _read_whole_by_pi(path)]


@pytest.mark.parametrize("path", READ_WHOLE, ids=_name)
def test_the_active_path_and_window_are_what_pi_sends_the_model(
    path: Path, pi_loads: dict[Path, PiLoad]
) -> None:
    """Where pi reads every line, the view's context is pi's. (Where it drops lines, the
    view holds the records the writer wrote, which is what a repair gives pi back.)"""
    loaded = pi_loads[path]
    scanned = read_session(path)
    view = scanned.view
    assert not loaded.hang
    assert loaded.error is None
    assert loaded.skipped == ()
    damaged_header = any(
        f.row == 1 and f.issue is LineIssue.UNPARSABLE for f in scanned.lines.findings
    )
    if view.header is None or damaged_header:
        codes = {d.code for d in check_file(path, Settings(quiescence=0.0))}
        assert "SF101" in codes
        assert loaded.messages == []


@pytest.mark.parametrize("path", SESSIONS, ids=_name)
def test_context_counts_what_pi_sends_the_model(path: Path, pi_loads: dict[Path, PiLoad]) -> None:
    """`sessionfix context` gives pi's own count of every session pi loads, lines pi drops
    and all, and says where pi throws or hangs instead."""
    loaded = pi_loads[path]
    context = context_of(path)
    if loaded.hang or loaded.error is not None:
        assert context.refused is not None
        assert ("hangs" in context.refused) == loaded.hang
        assert context.messages == 0
        return
    assert context.refused is None
    assert context.messages == len(loaded.messages)
    assert context.by_sent == _by_sent(loaded.messages)


_SENT_OF_ROLE = {
    "user": Sent.USER,
    "assistant": Sent.ASSISTANT,
    "toolResult": Sent.TOOL_RESULT,
    "bashExecution": Sent.TOOL_RESULT,
    "compactionSummary": Sent.SUMMARY,
    "branchSummary": Sent.SUMMARY,
}


def _by_sent(messages: list[Any]) -> dict[Sent, int]:
    """The messages pi built, counted as `sessionfix context` names them."""
    counts = Counter(_SENT_OF_ROLE.get(message["role"], Sent.OTHER) for message in messages)
    return {sent: counts[sent] for sent in Sent if counts[sent]}


CONTENT_CASES = [path for path in SESSIONS if re.match(r"SF60[45]-(?!trap-)", path.parent.name)]
"""The fixtures of inline media the provider refuses (SF604) and blank text blocks it
sends (SF605)."""
MEDIA_REMOVED = re.compile(r"\[sessionfix: .+ removed - over the limits of ")


@pytest.fixture(scope="module")
def content_repairs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, PiLoad]:
    """Each content case repaired with the unsafe fixes, under its case's file name, and
    loaded by pi."""
    repaired: dict[Path, Path] = {}
    for path in CONTENT_CASES:
        folder = tmp_path_factory.mktemp(path.parent.name)
        copy = place_case(path.parent, folder)
        spec = path.parent / "case.json"
        settings = _settings(msgspec.json.decode(spec.read_bytes()) if spec.exists() else {})
        target = folder / "repaired.jsonl"
        repair_to(copy, target, msgspec.structs.replace(settings, unsafe_fixes=True))
        repaired[path] = target
    loads = load_with_pi(list(repaired.values()))
    return {path: loads[target] for path, target in repaired.items()}


def _blank(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and not block["text"].strip(" \t\n\r\f\v")
    )


def _placeholder(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and bool(MEDIA_REMOVED.match(str(block.get("text"))))
    )


@pytest.mark.parametrize("path", CONTENT_CASES, ids=_name)
def test_pi_sends_no_refused_block_after_the_repair(
    path: Path, pi_loads: dict[Path, PiLoad], content_repairs: dict[Path, PiLoad]
) -> None:
    """The context pi builds holds, before the repair, the image the provider refuses
    (where the case puts it in context) or the blank text block of a tool result with an
    image; after the repair (unsafe fixes), the placeholder in the image's place and no
    such text block, and every other message and block as it was."""
    before = pi_loads[path].messages
    after = content_repairs[path].messages
    assert len(after) == len(before)
    replaced = removed = 0
    for old, new in zip(before, after, strict=True):
        if old == new:
            continue
        assert {k: v for k, v in old.items() if k != "content"} == {
            k: v for k, v in new.items() if k != "content"
        }
        kept = [block for block in old["content"] if not _blank(block)]
        removed += len(old["content"]) - len(kept)
        assert [b for b in new["content"] if not _blank(b)] == new["content"]
        assert len(kept) == len(new["content"])
        for was, now in zip(kept, new["content"], strict=True):
            if was != now:
                assert was["type"] == "image"
                assert _placeholder(now)
                replaced += 1
    if path.parent.name.startswith("SF605-"):
        assert removed
        assert any(_blank(b) for m in before if m["role"] == "toolResult" for b in m["content"])
    elif "-info" not in path.parent.name:
        assert replaced


def test_pi_loads_the_slimmed_session_as_context_predicts(
    slim_case: SlimCase, pi_loads: dict[Path, PiLoad]
) -> None:
    """`slim` brings the session under its budget: pi loads every message it loaded
    before, in order, which `context` counts; the old tool outputs keep their head and
    tail around the placeholder, the old prompt's image is a placeholder, the last two
    turns are as they were."""
    before, after = pi_loads[slim_case.original], pi_loads[slim_case.slimmed]
    assert after.error is None
    assert not after.hang
    context = context_of(slim_case.slimmed)
    assert context.tokens <= slim_case.budget < context_of(slim_case.original).tokens
    assert context.messages == len(after.messages)
    assert context.by_sent == _by_sent(after.messages) == _by_sent(before.messages)
    cut = replaced = 0
    for old, new in zip(before.messages, after.messages, strict=True):
        assert old["role"] == new["role"]
        if old == new:
            continue
        if old["role"] == "toolResult":
            assert_cut(old["content"][0]["text"], new["content"][0]["text"])
            cut += 1
        else:
            assert [b["type"] for b in old["content"]] == ["text", "image"]
            assert new["content"][1]["text"].startswith(CUT_MARK)
            replaced += 1
    assert (cut, replaced) == (8, 1)
    assert before.messages[-8:] == after.messages[-8:]


def test_pi_loads_a_slimmed_compacted_session_from_a_later_kept_turn(
    compacted_case: SlimCase, pi_loads: dict[Path, PiLoad]
) -> None:
    """Cutting every old output is not enough: the compaction keeps fewer of the turns
    before it, the oldest whole turns left out. pi loads the summary, then the turns
    from the new first kept one on, which `context` counts, under the budget; every
    record stays in the file."""
    before, after = pi_loads[compacted_case.original], pi_loads[compacted_case.slimmed]
    assert after.error is None
    assert not after.hang
    context = context_of(compacted_case.slimmed)
    assert context.tokens <= compacted_case.budget
    assert context.messages == len(after.messages)
    assert context.by_sent == _by_sent(after.messages)
    assert after.messages[0] == before.messages[0]
    assert before.messages[0]["role"] == "compactionSummary"
    prompts = [m["content"][0]["text"] for m in before.messages if m["role"] == "user"]
    kept = [m["content"][0]["text"] for m in after.messages if m["role"] == "user"]
    assert len(kept) < len(prompts)
    assert kept == prompts[len(prompts) - len(kept) :]
    assert after.messages[-8:] == before.messages[-8:]
    for old, new in zip(
        before.messages[-len(after.messages) + 1 :], after.messages[1:], strict=True
    ):
        if old != new:
            assert_cut(old["content"][0]["text"], new["content"][0]["text"])
    original = compacted_case.original.read_text().splitlines()
    assert len(compacted_case.slimmed.read_text().splitlines()) == len(original)
