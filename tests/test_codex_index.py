"""Codex's thread index (`state_5.sqlite`) against its rollouts (SF701): found by a scan
with no path, each kind of drift reported, and `repair --in-place --unsafe-fixes` making
or mending rows from the rollouts in one transaction after a backup, never touching a
rollout or a row's model provider; refused while Codex holds the index; `restore` puts
the rows back. Indexes are made from the schema Codex 0.169.0 creates; what Codex itself
lists before and after a repair is `test_codex_index_loader.py`'s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import apsw
import pytest
from typer.testing import CliRunner

from sessionfix.cli import app

from .codex_index_homes import CREATED, add_row, make_index, put_rollout, thread_rows

ENV: Final = {"NO_COLOR": "1", "COLUMNS": "200", "TERM": "xterm"}
LISTED: Final = "019e9625-802f-7e91-840a-cfe88d14117a"
UNLISTED: Final = "019e9626-1c4e-7a02-9b51-2d7f0c3e5a11"
MOVED: Final = "019e9627-5d21-7c33-8e40-6a9b1f2c3d44"
FLAGGED: Final = "019e9628-0a1b-7d44-a1c2-3e4f5a6b7c88"
UNTITLED: Final = "019e9629-9f8e-7d6c-b5a4-938271605f4e"
TWICE: Final = "019e962a-3c2b-7a19-8e07-5d4c3b2a1908"
GONE: Final = "019e962b-7e6d-7c5b-9a48-3726150f4e3d"
OTHER_PROVIDER: Final = "019e962c-1a2b-7c3d-8e4f-5a6b7c8d9e0f"


def run(*args: str | Path, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={**ENV, **(env or {})})


def findings(result: Any) -> list[dict[str, Any]]:
    found = json.loads(result.stdout)
    assert isinstance(found, list)
    return [d for d in found if d["code"] == "SF701"]


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`~/.codex` of a fake home, its index out of step with its rollouts in every way."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    for name in ("CODEX_HOME", "CODEX_SQLITE_HOME", "CLAUDE_CONFIG_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    codex = home / ".codex"
    index = make_index(codex / "state_5.sqlite")
    listed = put_rollout(codex, LISTED, "Fix the failing test")
    add_row(index, LISTED, listed, "Fix the failing test")
    put_rollout(codex, UNLISTED, "Add a --dry-run flag")
    moved = put_rollout(codex, MOVED, "Why does CI time out?", day="2026/06/07")
    add_row(index, MOVED, Path("/old/home/.codex/sessions") / moved.name, "Why does CI time out?")
    flagged = put_rollout(codex, FLAGGED, "Summarise the notes")
    add_row(index, FLAGGED, flagged, "Summarise the notes", archived=True)
    untitled = put_rollout(codex, UNTITLED, "Port the build")
    add_row(index, UNTITLED, untitled, None)
    put_rollout(codex, TWICE, "Two files", day="2026/06/08")
    put_rollout(codex, TWICE, "Two files", day="2026/06/09")
    add_row(index, GONE, codex / "sessions" / "gone.jsonl", "Gone for good")
    other = put_rollout(codex, OTHER_PROVIDER, "Switched provider")
    add_row(index, OTHER_PROVIDER, other, None, model_provider="cliproxyapi")
    return codex


def test_a_scan_without_paths_reports_each_kind_of_drift(codex_home: Path) -> None:
    result = run("scan", "--output-format", "json", "--no-progress")
    found = {d["entry_id"]: d for d in findings(result)}
    assert set(found) == {UNLISTED, MOVED, FLAGGED, UNTITLED, TWICE, GONE, OTHER_PROVIDER}
    assert all(d["filename"] == str(codex_home / "state_5.sqlite") for d in found.values())
    assert "holds no entry for" in found[UNLISTED]["message"]
    assert "which is gone; the session's file is" in found[MOVED]["message"]
    assert "says archived but its file is outside the archive folder" in found[FLAGGED]["message"]
    assert "holds no first prompt though its file has one" in found[UNTITLED]["message"]
    assert "2 session files hold its id" in found[TWICE]["message"]
    assert "no session file holds its id" in found[GONE]["message"]
    fixable = {thread for thread, d in found.items() if d["fix"] is not None}
    assert fixable == {UNLISTED, MOVED, FLAGGED, UNTITLED, OTHER_PROVIDER}
    assert all(found[t]["fix"]["applicability"] == "unsafe" for t in fixable)


def test_bare_sessionfix_finds_the_index_and_an_unsafe_repair_fixes_it(codex_home: Path) -> None:
    index = codex_home / "state_5.sqlite"
    bare = run()
    assert bare.exit_code == 1, bare.output
    assert f"{index}:threads:{UNLISTED}: SF701" in bare.stdout
    assert run("repair", "--in-place", index).exit_code == 1, "unsafe fixes only"
    assert f"{index}:threads:{UNLISTED}: SF701" in run().stdout
    run("repair", "--in-place", "--unsafe-fixes", index)
    left = run("scan", "--output-format", "json", "--no-progress")
    assert {d["entry_id"] for d in findings(left)} == {TWICE, GONE}


def test_an_index_in_step_with_its_rollouts_passes(tmp_path: Path) -> None:
    codex = tmp_path / ".codex"
    index = make_index(codex / "state_5.sqlite")
    add_row(
        index, LISTED, put_rollout(codex, LISTED, "Fix the failing test"), "Fix the failing test"
    )
    archived = put_rollout(codex, FLAGGED, "Summarise the notes", archived=True)
    add_row(index, FLAGGED, archived, "Summarise the notes", archived=True)
    silent = put_rollout(codex, UNTITLED, None)
    add_row(index, UNTITLED, silent, None)
    packed = put_rollout(codex, MOVED, "Why does CI time out?")
    add_row(index, MOVED, packed, "Why does CI time out?")
    packed.rename(packed.with_name(packed.name + ".zst"))  # as Codex compresses it
    result = run("scan", "--output-format", "json", "--no-progress", index)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_repair_makes_and_mends_rows_and_touches_no_rollout(codex_home: Path) -> None:
    index = codex_home / "state_5.sqlite"
    rollouts = {p: p.read_bytes() for p in codex_home.rglob("rollout-*")}
    before = thread_rows(index)
    result = run("repair", "--in-place", "--unsafe-fixes", index)
    assert result.exit_code == 1, result.output
    assert "5 fixed, 2 remaining" in result.output
    assert {p: p.read_bytes() for p in codex_home.rglob("rollout-*")} == rollouts
    after = thread_rows(index)
    assert set(after) == set(before) | {UNLISTED}
    made = after[UNLISTED]
    assert made["rollout_path"] == str(codex_home / "sessions/2026/06/05" / _name(UNLISTED))
    assert (made["preview"], made["first_user_message"], made["title"]) == (
        "Add a --dry-run flag",
    ) * 3
    assert (made["created_at"], made["created_at_ms"]) == (CREATED, CREATED * 1000 + 593)
    assert (made["source"], made["model_provider"], made["cwd"]) == (
        "cli",
        "openai",
        "/work/project",
    )
    assert (made["approval_mode"], made["model"], made["tokens_used"]) == ("never", "gpt-5.5", 42)
    assert made["archived"] == 0
    assert made["recency_at_ms"] == made["updated_at_ms"]
    assert _changed(before, after, MOVED) == {
        "rollout_path": str(codex_home / "sessions/2026/06/07" / _name(MOVED))
    }
    assert _changed(before, after, FLAGGED) == {"archived": 0, "archived_at": None}
    assert _changed(before, after, UNTITLED) == {
        "preview": "Port the build",
        "first_user_message": "Port the build",
        "title": "Port the build",
    }
    assert _changed(before, after, OTHER_PROVIDER) == {
        "preview": "Switched provider",
        "first_user_message": "Switched provider",
        "title": "Switched provider",
    }, "the provider is never re-tagged"
    assert after[GONE] == before[GONE]
    assert after[LISTED] == before[LISTED]
    again = run("scan", "--output-format", "json", "--no-progress", index)
    assert {d["entry_id"] for d in findings(again)} == {TWICE, GONE}


def _name(thread_id: str) -> str:
    return f"rollout-2026-06-05T04-58-20-{thread_id}.jsonl"


def _changed(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], thread: str
) -> dict[str, Any]:
    return {name: value for name, value in after[thread].items() if before[thread][name] != value}


def test_restore_puts_the_rows_back(codex_home: Path) -> None:
    index = codex_home / "state_5.sqlite"
    before = thread_rows(index)
    assert run("repair", "--in-place", "--unsafe-fixes", index).exit_code == 1
    listed = run("restore", "--list", index)
    assert "threads" in listed.output, listed.output
    result = run("restore", index, "--session", "threads")
    assert result.exit_code == 0, result.output
    assert thread_rows(index) == before


def test_a_repair_is_refused_while_codex_holds_the_index(codex_home: Path) -> None:
    index = codex_home / "state_5.sqlite"
    before = thread_rows(index)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import apsw, sys; db = apsw.Connection(sys.argv[1]); "
            "db.execute('SELECT count(*) FROM threads').fetchall(); "
            "print('held', flush=True); sys.stdin.read()",
            str(index),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        result = run("repair", "--in-place", "--unsafe-fixes", index)
    finally:
        holder.communicate("")
    assert result.exit_code == 2, result.output
    assert "Codex (or another program) has the database open" in result.output
    assert thread_rows(index) == before
    assert not list(codex_home.glob("*.sessionfix-*"))


def test_an_index_in_codex_sqlite_home_is_found_and_its_rollouts_by_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    codex = home / ".codex"
    index = make_index(tmp_path / "state" / "state_5.sqlite")
    monkeypatch.setenv("CODEX_SQLITE_HOME", str(index.parent))
    add_row(
        index, LISTED, put_rollout(codex, LISTED, "Fix the failing test"), "Fix the failing test"
    )
    put_rollout(codex, UNLISTED, "Add a --dry-run flag")
    result = run("scan", "--output-format", "json", "--no-progress")
    found = findings(result)
    assert [(d["filename"], d["entry_id"]) for d in found] == [(str(index), UNLISTED)]


def test_a_row_changed_since_the_scan_is_not_overwritten(codex_home: Path) -> None:
    from sessionfix.formats.codex_index.database import CARRIED
    from sessionfix.formats.codex_index.write import IndexChanged, UpdateRow, replace_rows

    index = codex_home / "state_5.sqlite"
    db = apsw.Connection(str(index))
    try:
        db.execute("UPDATE threads SET preview = 'typed meanwhile' WHERE id = ?", (UNTITLED,))
    finally:
        db.close()
    read = {name: thread_rows(index)[UNTITLED][name] for name in CARRIED} | {"preview": ""}
    with pytest.raises(IndexChanged):
        replace_rows(index, [UpdateRow(UNTITLED, read, {"preview": "Port the build"})], backup=True)
    assert thread_rows(index)[UNTITLED]["preview"] == "typed meanwhile"
    assert not list(codex_home.glob("*.sessionfix-*"))


OLDER_SCHEMA: Final = """
CREATE TABLE threads (
    id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, source TEXT NOT NULL, model_provider TEXT NOT NULL,
    cwd TEXT NOT NULL, title TEXT NOT NULL, sandbox_policy TEXT NOT NULL,
    approval_mode TEXT NOT NULL, tokens_used INTEGER NOT NULL DEFAULT 0,
    archived INTEGER NOT NULL DEFAULT 0, archived_at INTEGER, git_sha TEXT, git_branch TEXT,
    git_origin_url TEXT
);
ALTER TABLE threads ADD COLUMN first_user_message TEXT NOT NULL DEFAULT '';
"""
"""The index of an older Codex build: its first migration, and the first prompt column
(no `preview`, no millisecond times, no triggers)."""


def test_an_older_index_without_the_later_columns_is_read_and_mended(tmp_path: Path) -> None:
    codex = tmp_path / ".codex"
    codex.mkdir()
    index = codex / "state_5.sqlite"
    db = apsw.Connection(str(index))
    db.execute(OLDER_SCHEMA)
    db.close()
    listed = put_rollout(codex, LISTED, "Fix the failing test")
    untitled = put_rollout(codex, UNTITLED, "Port the build")
    put_rollout(codex, UNLISTED, "Add a --dry-run flag")
    for thread, rollout, prompt in (
        (LISTED, listed, "Fix the failing test"),
        (UNTITLED, untitled, ""),
    ):
        db = apsw.Connection(str(index))
        db.execute(
            "INSERT INTO threads (id, rollout_path, created_at, updated_at, source, "
            "model_provider, cwd, title, sandbox_policy, approval_mode, first_user_message) "
            "VALUES (?, ?, 1, 2, 'cli', 'openai', '/work/project', ?, 'x', 'never', ?)",
            (thread, str(rollout), prompt, prompt),
        )
        db.close()
    found = findings(run("scan", "--output-format", "json", "--no-progress", index))
    assert {d["entry_id"] for d in found} == {UNLISTED, UNTITLED}
    result = run("repair", "--in-place", "--unsafe-fixes", index)
    assert result.exit_code == 0, result.output
    rows = thread_rows(index)
    assert rows[UNTITLED]["first_user_message"] == rows[UNTITLED]["title"] == "Port the build"
    assert rows[UNLISTED]["first_user_message"] == "Add a --dry-run flag"
    assert "preview" not in rows[UNLISTED]


def test_o_writes_a_repaired_copy_and_leaves_the_index_as_it_was(
    codex_home: Path, tmp_path: Path
) -> None:
    index = codex_home / "state_5.sqlite"
    before = thread_rows(index)
    copy = tmp_path / "repaired.sqlite"
    result = run("repair", "--unsafe-fixes", "-o", copy, index)
    assert result.exit_code == 1, result.output
    assert thread_rows(index) == before
    assert not list(codex_home.glob("*.sessionfix-*"))
    repaired = thread_rows(copy)
    assert set(repaired) == set(before) | {UNLISTED}
    assert repaired[UNTITLED]["preview"] == "Port the build"
