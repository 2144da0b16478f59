"""`sessionfix restore`: put a kept backup back, keeping what it replaces."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sessionfix import Settings
from sessionfix.backups import NoBackup, list_backups, restore
from sessionfix.cli import app
from sessionfix.repair import repair_in_place

from .conftest import FIXTURES

CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
REPAIRED = FIXTURES / "SF201-three-back-to-back-copies" / "repaired.jsonl"
ENV = {"NO_COLOR": "1", "COLUMNS": "120"}
LONG_AGO = 1_700_000_000


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


@pytest.fixture
def repaired(tmp_path: Path) -> Path:
    """A session repaired in place, its original kept as a backup."""
    session = tmp_path / "s.jsonl"
    shutil.copyfile(CLONES, session)
    session.chmod(0o640)
    os.utime(session, (LONG_AGO, LONG_AGO))
    repair_in_place(session, Settings(quiescence=0.0))
    assert session.read_bytes() == REPAIRED.read_bytes()
    return session


def test_restore_puts_back_the_original_and_keeps_the_repair(repaired: Path) -> None:
    (original,) = list_backups(repaired)
    result = run("restore", "--quiescence", "0", repaired)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert repaired.read_bytes() == CLONES.read_bytes()
    assert repaired.stat().st_mode & 0o777 == 0o640
    newest, older = list_backups(repaired)
    assert older == original
    assert newest.path.read_bytes() == REPAIRED.read_bytes()
    assert f"the replaced version is kept as {newest.path.name}" in result.stderr
    assert not [p for p in repaired.parent.iterdir() if "sessionfix-tmp" in p.name]


def test_a_restore_can_be_undone(repaired: Path) -> None:
    restore(repaired, quiescence=0)
    assert repaired.read_bytes() == CLONES.read_bytes()
    restore(repaired, quiescence=0)
    assert repaired.read_bytes() == REPAIRED.read_bytes()
    assert len(list_backups(repaired)) == 3


def test_list_shows_the_backups_newest_first(repaired: Path) -> None:
    restore(repaired, quiescence=0)
    text = run("restore", "--list", repaired)
    assert text.exit_code == 0
    rows = [line.split("\t") for line in text.stdout.splitlines()]
    assert [Path(row[0]).name for row in rows] == [b.path.name for b in list_backups(repaired)]
    assert rows[0][0].endswith("-1")
    data = json.loads(run("restore", "--list", "--output-format", "json", repaired).stdout)
    assert [item["size"] for item in data] == [len(REPAIRED.read_bytes()), len(CLONES.read_bytes())]


def test_a_named_backup_is_restored(repaired: Path) -> None:
    restore(repaired, quiescence=0)
    older = list_backups(repaired)[-1]
    restore(repaired, older.path.name, quiescence=0)
    assert repaired.read_bytes() == CLONES.read_bytes()
    with pytest.raises(NoBackup, match="no backup named nope"):
        restore(repaired, "nope", quiescence=0)


def test_restore_is_guarded_like_a_repair(repaired: Path) -> None:
    """Just written: within the quiescence window, so refused with a hint."""
    result = run("restore", repaired)
    assert result.exit_code == 2
    assert "--quiescence 0 skips this check" in result.stderr
    assert result.stderr.count("\n") == 1
    assert repaired.read_bytes() == REPAIRED.read_bytes()


def test_no_backup_is_one_line_and_exit_two(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    shutil.copyfile(CLONES, session)
    result = run("restore", "--quiescence", "0", session)
    assert result.exit_code == 2
    assert result.stderr == f"sessionfix: error: {session}: no sessionfix backup beside it\n"
    listed = run("restore", "--list", session)
    assert listed.exit_code == 0
    assert listed.stdout == ""


def test_a_deleted_session_is_recreated_from_its_backup(repaired: Path) -> None:
    repaired.unlink()
    restored = restore(repaired, quiescence=0)
    assert restored.changed
    assert restored.kept is None
    assert repaired.read_bytes() == CLONES.read_bytes()
    assert repaired.stat().st_mode & 0o777 == 0o640


def test_restoring_what_is_already_there_changes_nothing(repaired: Path) -> None:
    restore(repaired, quiescence=0)
    newest = list_backups(repaired)[0]
    shutil.copyfile(newest.path, repaired)
    before = sorted(p.name for p in repaired.parent.iterdir())
    assert restore(repaired, quiescence=0).changed is False
    assert sorted(p.name for p in repaired.parent.iterdir()) == before
