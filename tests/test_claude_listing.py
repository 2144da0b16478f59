"""SF702 undiscoverable-session against Claude Code's own session list: the pinned Agent
SDK's `listSessions` (Claude Code 2.1.330), run on the rule's fixture cases placed in a
project folder of a fake home. The rule reports a session exactly where the list leaves
it out or shows it without its newest title; the unsafe fix brings the title into the
list and changes nothing Claude Code loads. The pinned release reads no
`sessions-index.json` (the releases of early 2026 that did are not pinned): for the index
cases the test shows that the list is the same with and without the index, so that
moving it aside costs the current release nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import pytest

from sessionfix import Settings, check_file
from sessionfix.repair.targets import repair_in_place

from .claude_loader import list_with_claude, load_with_claude, require_claude_at_collection
from .conftest import FIXTURES
from .test_fixtures import place_case
from .test_undiscoverable_session import SESSION, TITLE, title_at_edge

require_claude_at_collection()

PROJECT: Final = "-home-dev-projects-webapp"
CODE: Final = "SF702"
WINDOW_CASES: Final = sorted(
    case
    for case in FIXTURES.glob(f"{CODE}-*")
    if not (case / "beside" / "sessions-index.json").exists()
)
INDEX_CASES: Final = sorted(case for case in FIXTURES.glob(f"{CODE}-*") if case not in WINDOW_CASES)
BURIED_TITLES: Final = [
    FIXTURES / f"{CODE}-claude-title-beyond-both-windows",
    FIXTURES / f"{CODE}-claude-older-title-shown",
]
UNSAFE: Final = Settings(quiescence=0.0, unsafe_fixes=True)


def install(case: Path, home: Path) -> Path:
    """A fixture case in a project folder of `home`'s Claude Code; the session's path."""
    return place_case(case, home / ".claude" / "projects" / PROJECT)


def newest_title(session: Path) -> str | None:
    """The title the session was last given (its last `custom-title` line)."""
    title = None
    for line in session.read_bytes().splitlines():
        record = json.loads(line)
        if record.get("type") == "custom-title":
            title = record["customTitle"]
    return title


def sf702_rows(session: Path) -> list[int]:
    return [d.row for d in check_file(session, Settings(quiescence=0.0)) if d.code == CODE]


@pytest.mark.parametrize("case", WINDOW_CASES, ids=lambda case: case.name)
def test_sf702_reports_what_the_list_leaves_out(case: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = install(case, home)
    before = session.read_bytes()
    listed = list_with_claude(home).get(session.stem)
    assert session.read_bytes() == before, "the list must only read the file"
    types = {json.loads(line).get("type") for line in before.splitlines()}
    # Left out by design: a session without a prompt, one continued in another session.
    left_out = listed is None and "user" in types and "continued-in" not in types
    title = newest_title(session)
    untitled = listed is not None and title is not None and listed.custom_title != title
    assert bool(sf702_rows(session)) == (left_out or untitled)
    assert "-trap-" in case.name or left_out or untitled, "a case shows the symptom"


@pytest.mark.parametrize("case", BURIED_TITLES, ids=lambda case: case.name)
def test_the_repair_brings_the_newest_title_into_the_list(case: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = install(case, home)
    title = newest_title(session)
    assert title is not None
    before = list_with_claude(home)[session.stem]
    assert before.custom_title != title
    loaded = load_with_claude([session])[session]
    result = repair_in_place(session, UNSAFE, backup=False)
    assert CODE in {d.code for d in result.applied}
    after = list_with_claude(home)[session.stem]
    assert (after.custom_title, after.summary) == (title, title)
    assert after.first_prompt == before.first_prompt
    reloaded = load_with_claude([session])[session]
    assert reloaded.error is None
    assert reloaded.messages == loaded.messages
    assert sf702_rows(session) == []


def test_a_session_with_nothing_to_name_it_by_stays_out_of_the_list(tmp_path: Path) -> None:
    """Report only: the repair leaves the file as it is, and the list still leaves it
    out (`claude --resume <id>` opens it; sessionfix invents no title for it)."""
    home = tmp_path / "home"
    session = install(FIXTURES / f"{CODE}-claude-first-prompt-beyond-the-head", home)
    before = session.read_bytes()
    assert session.stem not in list_with_claude(home)
    result = repair_in_place(session, UNSAFE, backup=False)
    assert not result.changed
    assert session.read_bytes() == before
    assert session.stem not in list_with_claude(home)
    assert load_with_claude([session])[session].messages


@pytest.mark.parametrize("case", INDEX_CASES, ids=lambda case: case.name)
def test_the_pinned_list_reads_no_index(case: Path, tmp_path: Path) -> None:
    """Claude Code 2.1.330 lists every session of the folder from the files, whatever
    the index holds, and the same once the unsafe repair moved the index aside."""
    home = tmp_path / "home"
    session = install(case, home)
    folder = session.parent
    index = folder / "sessions-index.json"
    sessions = sorted(folder.glob("*.jsonl"))
    with_index = list_with_claude(home)
    assert set(with_index) == {path.stem for path in sessions}
    reported = any(sf702_rows(path) for path in sessions)
    for path in sessions:
        repair_in_place(path, UNSAFE, backup=False)
    assert index.exists() != reported
    assert list_with_claude(home) == with_index


@pytest.mark.parametrize(
    ("edge", "listed"),
    [
        ({"head_end": 65536}, True),
        ({"head_end": 65537}, False),
        ({"tail_start": 65536}, True),
        ({"tail_start": 65537}, False),
    ],
    ids=["head-ends-at-64KiB", "head-ends-past", "tail-starts-at-64KiB", "tail-starts-before"],
)
def test_sf702_draws_the_windows_where_the_list_does(
    edge: dict[str, int], listed: bool, tmp_path: Path
) -> None:
    """A title line read whole at either end is shown; one byte further, it is not."""
    home = tmp_path / "home"
    session = home / ".claude" / "projects" / PROJECT / f"{SESSION}.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(title_at_edge(**edge))
    shown = list_with_claude(home)[SESSION].custom_title
    assert (shown == TITLE) == listed
    assert bool(sf702_rows(session)) == (not listed)
