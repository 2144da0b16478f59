"""The real sample sessions in ../shared/corpus, read in place (rules.md §10)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sessionfix import Settings, check_file, read_session
from sessionfix.cli import main
from sessionfix.diagnostics import Diagnostic
from sessionfix.model.view import Kind, Role

from .conftest import CORPUS

SETTINGS = Settings(quiescence=0.0)
ALL_SAMPLES = sorted(CORPUS.glob("*/**/*.jsonl")) if CORPUS.is_dir() else []


def _diagnostics(path: Path) -> list[Diagnostic]:
    return check_file(path, SETTINGS)


def _summary(diagnostics: list[Diagnostic]) -> Counter[tuple[str, str]]:
    return Counter((d.code, d.severity.label) for d in diagnostics)


def _rows(diagnostics: list[Diagnostic], code: str) -> list[int]:
    return [d.row for d in diagnostics if d.code == code]


def test_corpus_is_present(corpus: Path) -> None:
    assert len(ALL_SAMPLES) >= 28


@pytest.mark.parametrize("path", ALL_SAMPLES, ids=[p.name for p in ALL_SAMPLES])
def test_every_sample_scans(path: Path) -> None:
    diagnostics = _diagnostics(path)
    for diagnostic in diagnostics:
        assert diagnostic.row >= 1
        assert diagnostic.code.startswith("SF")


# ---- pi / OpenClaw: the full expected list -------------------------------------------

PI_EXPECTED: dict[str, dict[tuple[str, str], int]] = {
    # rules.md §10 calls this file clean, but its one thinking block carries letta's
    # placeholder signature "sig-1" on a Claude model on Anthropic's API: pi sends it back
    # as it is and Anthropic refuses it, which is what SF606 says.
    "letta-trajectory__pi-tool-calls.v3.jsonl": {("SF606", "error"): 1},
    "earendil-pi__prompt-cache-replay-session.v1.jsonl": {},
    "pi-mono__large-session.v1.jsonl": {("SF402", "info"): 18, ("SF601", "warning"): 3},
    "pi-mono__before-compaction.v1.jsonl": {
        ("SF301", "info"): 20,
        ("SF402", "error"): 1,
        ("SF402", "info"): 5,
        ("SF601", "warning"): 3,
    },
    "pi-mono__compact.v1.glued-line.jsonl": {
        ("SF001", "error"): 1,
        ("SF301", "info"): 3,
        ("SF601", "warning"): 3,
        ("SF402", "info"): 3,
    },
    "pi-mono__session.v1.glued-line.jsonl": {("SF001", "error"): 1, ("SF301", "info"): 2},
    "letta-trajectory__pi-cleanup.v3.corrupt.jsonl": {
        ("SF008", "error"): 1,
        ("SF106", "warning"): 1,
        ("SF401", "error"): 1,
    },
    "letta-trajectory__openclaw-cleanup.corrupt.jsonl": {
        ("SF101", "error"): 1,
        ("SF008", "error"): 1,
        ("SF106", "warning"): 2,
        ("SF401", "error"): 1,
    },
    "letta-trajectory__openclaw-tool-calls.jsonl": {("SF101", "error"): 1},
}


@pytest.mark.parametrize("name", sorted(PI_EXPECTED))
def test_pi_sample_diagnostics(corpus: Path, name: str) -> None:
    diagnostics = _diagnostics(corpus / "openclaw" / name)
    assert dict(_summary(diagnostics)) == PI_EXPECTED[name]


def test_glued_lines_are_found_at_their_rows(corpus: Path) -> None:
    compact = _diagnostics(corpus / "openclaw" / "pi-mono__compact.v1.glued-line.jsonl")
    session = _diagnostics(corpus / "openclaw" / "pi-mono__session.v1.glued-line.jsonl")
    assert _rows(compact, "SF001") == [1013]
    assert _rows(session, "SF001") == [440]


def test_rows_of_the_corrupt_v3_samples(corpus: Path) -> None:
    pi = _diagnostics(corpus / "openclaw" / "letta-trajectory__pi-cleanup.v3.corrupt.jsonl")
    assert (_rows(pi, "SF008"), _rows(pi, "SF106"), _rows(pi, "SF401")) == ([4], [9], [10])
    oc = _diagnostics(corpus / "openclaw" / "letta-trajectory__openclaw-cleanup.corrupt.jsonl")
    assert (_rows(oc, "SF008"), _rows(oc, "SF106"), _rows(oc, "SF401")) == ([3], [4, 8], [9])


def test_the_call_cut_off_by_a_compaction_is_an_error(corpus: Path) -> None:
    diagnostics = _diagnostics(corpus / "openclaw" / "pi-mono__before-compaction.v1.jsonl")
    errors = [d.row for d in diagnostics if d.code == "SF402" and d.severity.label == "error"]
    assert errors == [628]


def test_v1_compactions_keep_from_user_messages(corpus: Path) -> None:
    scanned = read_session(corpus / "openclaw" / "pi-mono__before-compaction.v1.jsonl")
    view = scanned.view
    assert not view.tree
    compactions = [i for i in range(len(view)) if view.kinds[i] == Kind.COMPACTION]
    kept = [view.first_kept_target(i) for i in compactions]
    assert [view.boundary(i).first_kept_index for i in compactions] == [293, 551]  # type: ignore[union-attr]
    assert all(k is not None and view.roles[k] == Role.USER for k in kept)


def test_glued_compaction_keeps_nothing_by_naming_its_own_position(corpus: Path) -> None:
    """Once line 1013 is split, its compaction's firstKeptEntryIndex 1013 is its position."""
    scanned = read_session(corpus / "openclaw" / "pi-mono__compact.v1.glued-line.jsonl")
    view = scanned.view
    glued = [i for i in range(len(view)) if view.rows[i] == 1013]
    assert [view.kind(i) for i in glued] == [Kind.MESSAGE, Kind.COMPACTION]
    compaction = glued[1]
    assert compaction == 1013
    assert view.first_kept_target(compaction) == compaction
    assert view.window_start == view.path_positions[compaction]


def test_clean_v3_baseline_exits_zero(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus / "openclaw" / "letta-trajectory__pi-tool-calls.v3.jsonl"
    assert main(["check", "--no-progress", "--ignore", "SF606", str(path)]) == 0
    assert "All checks passed!" in capsys.readouterr().out


# ---- Claude Code: rules.md §10 --------------------------------------------------------

CLAUDE_EXPECTED: dict[str, dict[tuple[str, str], list[int]]] = {
    # The assistant record glued on line 128 (115) is written again on line 131 (116) by
    # Claude Code 2.1.12, which adds `"context_management":null` to its message: the same
    # record re-written by another version (info, never dropped).
    "37-995ebed6e4-2": {
        ("SF001", "error"): [128],
        ("SF203", "info"): [131],
        ("SF009", "info"): [170],
    },
    "5a-c45bc32212-0": {
        ("SF001", "error"): [115],
        ("SF203", "info"): [116],
        ("SF009", "info"): [241],
    },
    # Sessions stopped (or captured) mid-call: the pending call is info.
    "60-fd31fcf44f-0": {("SF402", "info"): [117], ("SF009", "info"): [117]},
    "71-69f9710768-0": {("SF402", "info"): [130], ("SF009", "info"): [158]},
    "4c-02af2759b6-0": {("SF402", "info"): [6], ("SF009", "info"): [6]},
    # Checkpoint slices start mid-session: their first parent is not in the file.
    "f4-bd19c39902-0": {
        ("SF103", "info"): [1],
        ("SF301", "info"): [11],
        ("SF009", "info"): [32],
    },
    "a6-e4c2a0fbd1-0": {("SF103", "info"): [1], ("SF009", "info"): [54]},
    "e5-8c50537669-0": {("SF103", "info"): [1], ("SF009", "info"): [141]},
    "44-785715c3f5-2": {("SF103", "info"): [1], ("SF009", "info"): [701]},
    # The Read on line 115 and the Write on line 118 precede the plan-mode restart on
    # line 125 (a progress row with parentUuid null): neither is on the chain.
    "8c-fa910f8ef9-5": {("SF009", "info"): [221]},
}


@pytest.mark.parametrize("name", sorted(CLAUDE_EXPECTED))
def test_claude_sample_diagnostics(corpus: Path, name: str) -> None:
    diagnostics = _diagnostics(corpus / "claude" / "entireio-cli" / f"{name}.full.jsonl")
    found: dict[tuple[str, str], list[int]] = {}
    for diagnostic in diagnostics:
        found.setdefault((diagnostic.code, diagnostic.severity.label), []).append(diagnostic.row)
    assert found == CLAUDE_EXPECTED[name]


def test_claude_glued_records_are_named_by_their_type(corpus: Path) -> None:
    path = corpus / "claude" / "entireio-cli" / "37-995ebed6e4-2.full.jsonl"
    [glued] = [d for d in _diagnostics(path) if d.code == "SF001"]
    assert "(assistant, summary)" in glued.message


CODEX_EXPECTED: dict[str, dict[str, list[int]]] = {
    "session-doctor__basic-session.jsonl": {"SF008": [18]},
    "session-doctor__current-response-item-ambiguities.jsonl": {
        "SF405": [3],
        "SF403": [7],
        "SF402": [8],
        "SF401": [9],
    },
    # rules.md §10 expects nothing here, but the file starts with a `turn_context`: Codex
    # refuses such a rollout ("rollout does not start with session metadata"), which is
    # what SF101 says for Codex (rules.md §3).
    "ccusage__session-alpha.jsonl": {"SF101": [1]},
    "kvsankar-agent-history__real_sessions_codex_session-01.jsonl": {},
    "session-doctor__current-response-items.jsonl": {},
    "session-doctor__event-msg-fallback.jsonl": {},
    "simonw-claude-code-transcripts__sample_codex_session.jsonl": {},
}
"""Every Codex sample and what it is reported for (rules.md §10), line by line."""


def test_every_codex_sample_has_its_expectation(corpus: Path) -> None:
    assert {path.name for path in (corpus / "codex").glob("*.jsonl")} == set(CODEX_EXPECTED)


@pytest.mark.parametrize("name", sorted(CODEX_EXPECTED))
def test_codex_samples_give_the_catalogue_findings(corpus: Path, name: str) -> None:
    diagnostics = _diagnostics(corpus / "codex" / name)
    found = {code: _rows(diagnostics, code) for code in {d.code for d in diagnostics}}
    assert found == CODEX_EXPECTED[name]


def test_unterminated_claude_transcripts_lack_a_final_newline(corpus: Path) -> None:
    for path in sorted((corpus / "claude" / "entireio-cli").glob("*.jsonl")):
        codes = {d.code for d in _diagnostics(path)}
        assert "SF009" in codes, path.name


@pytest.mark.parametrize(
    "relative",
    [
        "claude/misc/daaain-claude-code-log__dag_compact_after_rewind.jsonl",
        "claude/misc/daaain-claude-code-log__dag_compact_after_rewind_preserved.jsonl",
        "claude/misc/kvsankar-agent-history__real_sessions_claude_session-01.jsonl",
    ],
)
def test_clean_samples_of_other_formats(corpus: Path, relative: str) -> None:
    assert _diagnostics(corpus / relative) == []


def test_formats_are_detected(corpus: Path) -> None:
    detected = {
        "openclaw/pi-mono__large-session.v1.jsonl": "pi",
        "claude/entireio-cli/a6-e4c2a0fbd1-0.full.jsonl": "claude",
        "codex/ccusage__session-alpha.jsonl": "codex",
    }
    for relative, fmt in detected.items():
        assert read_session(corpus / relative).view.format == fmt
