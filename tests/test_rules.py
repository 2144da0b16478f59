"""The rule registry against the catalogue, and every rule's documentation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sessionfix import RULES, get_rule
from sessionfix.diagnostics import Severity

SECTIONS = [
    "## What it does",
    "## Why is this bad?",
    "## Example",
    "## Use instead",
    "## Fix safety",
    "## References",
]
PI_RULES = (
    [f"SF00{n}" for n in range(1, 10)]
    + [f"SF10{n}" for n in range(1, 9)]
    + [
        "SF201",
        "SF202",
        "SF205",
        "SF301",
        "SF401",
        "SF402",
        "SF403",
        "SF404",
        "SF501",
        "SF503",
        "SF601",
        "SF603",
    ]
)


CLAUDE_RULES = ["SF203", "SF405", "SF502", "SF602"]
CODEX_RULES = ["SF109", "SF504"]
NEW_CODES = {
    "SF110": "foreign-session-record",
    "SF111": "stale-leaf-metadata",
    "SF112": "empty-message",
    "SF113": "unread-session",
    "SF114": "message-order",
    "SF701": "codex-index-drift",
    "SF702": "undiscoverable-session",
    "SF705": "event-log-bloat",
    "SF604": "oversized-inline-media",
    "SF605": "empty-text-block",
    "SF206": "repeated-metadata",
    "SF505": "empty-compaction-summary",
    "SF606": "invalid-thinking-signature",
    "SF115": "stale-child-list",
    "SF116": "stale-leaf-pointer",
    "SF117": "store-divergence",
    "SF118": "missing-role",
    "SF506": "stale-compression-boundary",
}
"""Rules the catalogue lacks a code for (field-reports.md), numbered in its ranges."""


def test_every_implemented_rule_of_the_catalogue_is_registered() -> None:
    registered = [rule.code for rule in RULES]
    assert registered == sorted(registered)
    assert set(registered) == set(PI_RULES) | set(CLAUDE_RULES) | set(CODEX_RULES) | set(NEW_CODES)


def test_new_codes_are_free_in_the_catalogue(corpus: Path) -> None:
    catalogue = _catalogue(corpus)
    for code, name in NEW_CODES.items():
        assert code not in catalogue
        assert name not in {known for known, _ in catalogue.values()}
        rule = get_rule(code)
        assert rule is not None
        assert rule.name == name


def test_codes_and_names_are_unique_and_well_formed() -> None:
    assert len({r.code for r in RULES}) == len(RULES)
    assert len({r.name for r in RULES}) == len(RULES)
    for rule in RULES:
        assert re.fullmatch(r"SF\d{3}", rule.code)
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.name)
        assert get_rule(rule.code) is rule
        assert get_rule(rule.name) is rule


def _catalogue(corpus: Path) -> dict[str, tuple[str, str]]:
    """code → (name, severity) from the table in rules.md §0."""
    text = (corpus.parent / "spec" / "rules.md").read_text()
    rows = re.findall(r"^\| (SF\d{3}) \| `([a-z-]+)` \| [^|]+ \| ([^|]+) \|", text, re.M)
    return {code: (name, severity.strip()) for code, name, severity in rows}


def test_names_and_severities_follow_the_catalogue(corpus: Path) -> None:
    catalogue = _catalogue(corpus)
    for rule in RULES:
        if rule.code in NEW_CODES:
            continue
        name, severity = catalogue[rule.code]
        assert rule.name == name
        assert severity.startswith(rule.severity.label), (rule.code, severity)


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_documentation_has_every_section_in_order(rule: object) -> None:
    doc = rule.doc  # type: ignore[attr-defined]
    positions = [doc.find(section) for section in SECTIONS]
    assert all(p >= 0 for p in positions), [
        s for s, p in zip(SECTIONS, positions, strict=False) if p < 0
    ]
    assert positions == sorted(positions)
    assert doc.startswith(f"# {rule.name} ({rule.code})\n")  # type: ignore[attr-defined]
    references = doc.split("## References", 1)[1]
    assert "- " in references


def _session_block(doc: str, heading: str) -> str | None:
    section = doc.split(heading, 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```jsonl\n(.*?)```", section, re.S)
    if match is None:
        return None
    block = match.group(1)
    complete_claude = '"sessionId"' in block and "…" not in block
    if '"type":"session"' not in block and not complete_claude:
        return None
    return block


ILLUSTRATIVE = {"SF004", "SF005", "SF006", "SF009", "SF205"}
"""Examples that describe bytes Markdown cannot carry (NUL, BOM, CR, a missing final
newline) or elide the bulk that triggers the rule."""


def _checkable() -> list[object]:
    return [
        rule
        for rule in RULES
        if rule.code not in ILLUSTRATIVE and _session_block(rule.doc, "## Example") is not None
    ]


def test_most_rule_examples_are_checked() -> None:
    assert len(_checkable()) >= 20


@pytest.mark.parametrize("rule", _checkable(), ids=lambda r: r.code)  # type: ignore[attr-defined]
def test_documented_examples_are_what_the_rule_reports(rule: object, tmp_path: Path) -> None:
    """A complete session in a doc's Example reports the rule; its Use instead does not."""
    from sessionfix import Settings, check_file

    doc: str = rule.doc  # type: ignore[attr-defined]
    code: str = rule.code  # type: ignore[attr-defined]
    example = _session_block(doc, "## Example")
    fixed = _session_block(doc, "## Use instead")
    assert example is not None
    settings = Settings(quiescence=0.0, max_record_size=1024)
    path = tmp_path / "example.jsonl"
    path.write_text(example)
    assert code in {d.code for d in check_file(path, settings)}
    if fixed is not None:
        path.write_text(fixed)
        assert code not in {d.code for d in check_file(path, settings)}


def test_severity_parse() -> None:
    assert Severity.parse("warning") is Severity.WARNING
    with pytest.raises(ValueError, match="unknown severity"):
        Severity.parse("fatal")
