"""SF701 proven with Codex itself (the pinned `codex app-server`): threads Codex made,
whose index rows are then lost, emptied or flagged archived, are missing from what
`thread/list` returns from the index (`useStateDbOnly`, as the app's and the IDE's
sidebar list threads) before `repair --in-place --unsafe-fixes`, and listed after it,
with their first prompt; the rows it mends are again the rows Codex made, the row it
makes is the one Codex's own indexing makes of the rollout (in a Codex home that has
the rollouts and no index yet), and the rollouts are untouched."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Final

import apsw
from typer.testing import CliRunner

from sessionfix.cli import app

from .codex_index_homes import thread_rows
from .codex_loader import codex_running, list_threads, require_codex_at_collection, start_threads

require_codex_at_collection()

PROMPTS: Final = [
    "Fix the failing test in parser.rs",
    "Add a --dry-run flag",
    "Summarise the release notes",
    "Why does CI time out?",
]
FROM_INDEX: Final = {"useStateDbOnly": True}


def _listed(home: Path) -> dict[str, str]:
    return {thread["id"]: thread["preview"] for thread in list_threads(home, FROM_INDEX)}


def _change(index: Path, statement: str, thread: str) -> None:
    db = apsw.Connection(str(index))
    try:
        db.execute(statement, (thread,))
    finally:
        db.close()


def test_threads_codex_no_longer_lists_are_listed_after_the_repair(tmp_path: Path) -> None:
    home = tmp_path / "home"
    unlisted, untitled, flagged, kept = start_threads(home, PROMPTS)
    index = home / ".codex" / "state_5.sqlite"
    made_by_codex = thread_rows(index)
    assert _listed(home) == dict(zip((unlisted, untitled, flagged, kept), PROMPTS, strict=True))
    _change(index, "DELETE FROM threads WHERE id = ?", unlisted)
    _change(
        index, "UPDATE threads SET preview = '', first_user_message = '' WHERE id = ?", untitled
    )
    _change(
        index, "UPDATE threads SET archived = 1, archived_at = created_at WHERE id = ?", flagged
    )
    assert _listed(home) == {kept: PROMPTS[3]}
    rollouts = {path: path.read_bytes() for path in (home / ".codex").rglob("rollout-*")}

    result = CliRunner().invoke(app, ["repair", "--in-place", "--unsafe-fixes", str(index)])

    assert result.exit_code == 0, result.output
    assert "3 fixed, 0 remaining" in result.output
    assert {path: path.read_bytes() for path in rollouts} == rollouts
    assert _listed(home) == dict(zip((unlisted, untitled, flagged, kept), PROMPTS, strict=True))
    repaired = thread_rows(index)
    for thread in (untitled, flagged, kept):
        assert repaired[thread] == made_by_codex[thread]
    assert repaired[unlisted] == _indexed_by_codex(home, tmp_path / "again", unlisted)


def _indexed_by_codex(home: Path, again: Path, thread: str) -> dict[str, Any]:
    """The row Codex's own indexing makes of the thread's rollout: in a copy of the
    Codex home (files' times kept) without its index, which Codex builds when it starts,
    the path named as in the home copied."""
    shutil.copytree(home / ".codex" / "sessions", again / ".codex" / "sessions")
    shutil.copy2(home / ".codex" / "config.toml", again / ".codex" / "config.toml")
    list_threads(again, {})
    row = thread_rows(again / ".codex" / "state_5.sqlite")[thread]
    row["rollout_path"] = row["rollout_path"].replace(str(again), str(home), 1)
    return row


def test_a_repair_is_refused_while_codex_runs_on_the_index(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (unlisted,) = start_threads(home, PROMPTS[:1])
    index = home / ".codex" / "state_5.sqlite"
    _change(index, "DELETE FROM threads WHERE id = ?", unlisted)
    before = thread_rows(index)
    with codex_running(home) as pid:
        result = CliRunner().invoke(app, ["repair", "--in-place", "--unsafe-fixes", str(index)])
    assert result.exit_code == 2, result.output
    assert f"Codex (or another program) has the database open (pid {pid}" in result.output
    assert thread_rows(index) == before
    assert not list(index.parent.glob("*.sessionfix-*"))
