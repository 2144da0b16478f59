"""A Claude Code sub-agent's transcript and the main transcript of its session: where the
one is found from the other, and the records of the main one a sub-agent's parents are
looked up among. (What the rules and `context` make of sub-agents' transcripts is checked
by the fixtures named `*-subagent-*` and, against Claude Code's own reader, by
`test_claude_loader.py`.)"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionfix import Settings, check_file
from sessionfix.formats.claude.files import MainTranscript, main_transcript_of

from .conftest import FIXTURES
from .test_fixtures import place_case

SESSION = "bcf88925-8308-4637-80eb-71608a90305f"


@pytest.mark.parametrize(
    ("path", "main"),
    [
        (f"p/{SESSION}/subagents/agent-a3f9c01d2e4b5a6c7.jsonl", f"p/{SESSION}.jsonl"),
        (f"p/{SESSION}/subagents/agent-acompact-3d346a6bf6f19caa.jsonl", f"p/{SESSION}.jsonl"),
        (
            f"/h/.claude/projects/-w/{SESSION}/subagents/x/agent-a1.jsonl",
            f"/h/.claude/projects/-w/{SESSION}.jsonl",
        ),
        (f"{SESSION}/subagents/agent-a1.jsonl", f"{SESSION}.jsonl"),
        (f"p/{SESSION}.jsonl", None),
        (f"p/{SESSION}/subagents/workflows/wf_1/journal.jsonl", None),
        ("p/agent-a3f9c01d2e4b5a6c7.jsonl", None),
        ("p/not-a-session/subagents/agent-a1.jsonl", None),
        (f"p/{SESSION}/subagents/agent-a1.json", None),
    ],
)
def test_a_subagents_transcript_names_its_sessions_main_transcript(
    path: str, main: str | None
) -> None:
    assert main_transcript_of(Path(path)) == (None if main is None else Path(main).absolute())


RECORD_UUIDS = st.lists(st.uuids().map(str), max_size=12, unique=True)


@given(
    records=RECORD_UUIDS,
    others=RECORD_UUIDS,
    block=st.integers(1, 300),
    damaged=st.booleans(),
)
def test_the_main_transcript_holds_exactly_the_uuids_of_its_records(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[str],
    others: list[str],
    block: int,
    damaged: bool,
) -> None:
    """Read from its end in blocks of any size: a uuid only named (as a parent, in a
    damaged line) is not held, nor one the file never names."""
    lines = []
    for number, record in enumerate(records):
        parent = records[number - 1] if number else None
        lines.append(json.dumps({"parentUuid": parent, "type": "user", "uuid": record}))
    named_only = [str(uuid.uuid5(uuid.NAMESPACE_URL, record)) for record in records]
    lines += [json.dumps({"type": "last-prompt", "leafUuid": u}) for u in named_only]
    if damaged and records:
        lines.append('{"type":"user","uuid":"' + records[0] + '", "message": {')
    path = tmp_path_factory.mktemp("main") / f"{SESSION}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    asked = set(records) | set(others) | set(named_only)
    assert MainTranscript(path, block).holding(asked) == set(records)


def test_a_main_transcript_that_is_not_there_holds_nothing(tmp_path: Path) -> None:
    assert MainTranscript(tmp_path / f"{SESSION}.jsonl").holding({SESSION}) == set()


@pytest.mark.parametrize("named", ["{name}", "./{name}", "../subagents/{name}"])
def test_a_subagents_transcript_named_from_its_own_folder_finds_its_main_transcript(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: str
) -> None:
    """`sessionfix check agent-….jsonl` run in the sub-agent's folder: the main transcript
    is found from where the file lies, not from the name it was given (a relative name
    holds no session folder: its first record was called the start of a slice, SF103,
    and the later ones whose parents the main transcript holds would dangle)."""
    case = FIXTURES / "SF103-trap-claude-subagent-starts-in-its-main-session"
    target = place_case(case, tmp_path)
    expected = [(d.code, d.row, d.message) for d in check_file(target, Settings())]
    assert "SF103" not in {code for code, _, _ in expected}
    monkeypatch.chdir(target.parent)
    relative = Path(named.format(name=target.name))
    assert [(d.code, d.row, d.message) for d in check_file(relative, Settings())] == expected
