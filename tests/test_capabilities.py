"""Rules run where a format provides what they require, and say so when selected in vain."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionfix import RULES, check_file
from sessionfix.cli import main
from sessionfix.formats import all_formats
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.claude import CLAUDE
from sessionfix.formats.codewhale import CODEWHALE
from sessionfix.formats.codex import CODEX as CODEX_FORMAT
from sessionfix.formats.coverage import provided
from sessionfix.formats.opencode import OPENCODE
from sessionfix.formats.pi import OPENCLAW, PI
from sessionfix.settings import Settings

from .conftest import FIXTURES

GLUED = FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl"
CODEX = b'{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t"}}\n'


def test_line_rules_run_on_every_format() -> None:
    for fmt in all_formats():
        assert Capability.LINES in provided(fmt, tree=False)


def test_tree_rules_need_an_id_linked_session() -> None:
    assert Capability.TREE in provided(PI, tree=True)
    assert Capability.TREE not in provided(PI, tree=False)
    assert Capability.TREE in provided(CLAUDE, tree=True)
    assert Capability.TREE not in provided(CODEX_FORMAT, tree=True)


def test_pi_only_facts_are_not_claimed_for_claude() -> None:
    """Claude Code keeps no abandoned branches as history and repeats ids only in
    copies: the rules built on pi's meaning of those never run on its files."""
    claude = provided(CLAUDE, tree=True)
    for capability in (Capability.BRANCHES, Capability.UNIQUE_IDS, Capability.RETRY_COPIES):
        assert capability not in claude
        assert capability in provided(PI, tree=True)


def test_every_rule_lists_the_formats_it_covers() -> None:
    for rule in RULES:
        assert rule.formats, rule.code
        assert "Formats: " in rule.doc
    stale = next(r for r in RULES if r.code == "SF301")
    assert stale.formats == {PI, OPENCLAW, CLAUDE, OPENCODE, CODEWHALE}


def test_a_rule_selected_by_code_warns_once_where_it_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = tmp_path / "codex.jsonl"
    codex.write_bytes(CODEX)
    other = tmp_path / "other.jsonl"
    other.write_bytes(CODEX)
    assert main(["check", "--select", "SF301,SF001", str(codex), str(other), str(GLUED)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "sessionfix: warning: SF301 (stale-file-read) does not apply to codex sessions: "
        "needs file actions"
    ]


def test_a_prefix_or_all_selects_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = tmp_path / "codex.jsonl"
    codex.write_bytes(CODEX)
    assert main(["check", "--select", "SF3", str(codex)]) == 0
    assert main(["check", str(codex)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert check_file(codex, Settings(select=("SF301",))) == []


def test_a_positional_pi_session_is_named_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = tmp_path / "v1.jsonl"
    session.write_bytes(
        b'{"type":"session","id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        b'{"type":"message","timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"hi"}}\n'
    )
    main(["check", "--select", "SF103", str(session)])
    assert capsys.readouterr().err.splitlines() == [
        "sessionfix: warning: SF103 (dangling-parent) does not apply to positional (v1) pi "
        "sessions: needs an id-linked tree"
    ]


def test_repair_and_its_preview_warn_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = tmp_path / "codex.jsonl"
    codex.write_bytes(CODEX)
    warning = (
        "sessionfix: warning: SF301 (stale-file-read) does not apply to codex sessions: "
        "needs file actions"
    )
    main(["repair", "-q", "--select", "SF301", "-o", str(tmp_path / "out.jsonl"), str(codex)])
    assert capsys.readouterr().err.splitlines() == [warning]
    main(["repair", "-q", "--diff", "--select", "SF301", str(codex)])
    assert capsys.readouterr().err.splitlines() == [warning]
