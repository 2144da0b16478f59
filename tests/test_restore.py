"""`sessionfix restore`: put a kept backup back, keeping what it replaces."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import xxhash
from typer.testing import CliRunner

from sessionfix import Settings
from sessionfix.cli import app
from sessionfix.errors import UsageError
from sessionfix.repair.targets import repair_in_place
from sessionfix.report.backups import backup_listing, listing_note, restore_note
from sessionfix.safety.backups import DamagedBackup, NoBackup, Status, list_backups, restore
from sessionfix.safety.restoring import BackupListing, RestoreDone, RestoreRequest, run_restore
from sessionfix.safety.writing import BackupRecord, backup_name, replace_file, snapshot

from .conftest import FIXTURES

CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
REPAIRED = FIXTURES / "SF201-three-back-to-back-copies" / "repaired.jsonl"
ENV = {"NO_COLOR": "1", "COLUMNS": "120"}
LONG_AGO = 1_700_000_000
EARLIER = datetime(2020, 1, 1, 9, tzinfo=UTC)
LATER = datetime(2020, 1, 2, 9, tzinfo=UTC)


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


def _record(held: bytes, replaced_by: bytes) -> BackupRecord:
    return BackupRecord(
        len(held), xxhash.xxh3_64_hexdigest(held), xxhash.xxh3_64_hexdigest(replaced_by)
    )


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


def _replaced(session: Path, contents: list[tuple[datetime, bytes]]) -> list[Path]:
    """Replace the session with each content in turn at the time given; the backups."""
    backups = []
    for when, content in contents:
        backup = replace_file(snapshot(session), [content], now=when)
        assert backup is not None
        backups.append(backup)
    return backups


def test_list_shows_the_backups_newest_first(tmp_path: Path) -> None:
    """By their stamps, then by serial within a second; none depends on the clock."""
    session = tmp_path / "s.jsonl"
    session.write_bytes(b"a\n")
    first, second, third = _replaced(
        session, [(EARLIER, b"bb\n"), (LATER, b"ccc\n"), (LATER, b"dddd\n")]
    )
    assert "T090000Z-1-" in third.name
    text = run("restore", "--list", session)
    assert text.exit_code == 0
    rows = [line.split("\t") for line in text.stdout.splitlines()]
    assert [Path(row[0]).name for row in rows] == [third.name, second.name, first.name]
    assert [row[1] for row in rows] == ["2020-01-02 09:00:00 UTC"] * 2 + ["2020-01-01 09:00:00 UTC"]
    assert {row[3] for row in rows} == {"verified"}
    data = json.loads(run("restore", "--list", "--output-format", "json", session).stdout)
    assert [item["size"] for item in data] == [4, 3, 2]
    assert [item["status"] for item in data] == ["verified"] * 3
    assert [b.path for b in list_backups(session)] == [third, second, first]


def test_a_named_backup_is_restored(repaired: Path) -> None:
    restore(repaired, quiescence=0)
    older = list_backups(repaired)[-1]
    restore(repaired, older.path.name, quiescence=0)
    assert repaired.read_bytes() == CLONES.read_bytes()
    with pytest.raises(NoBackup, match="no backup named nope"):
        restore(repaired, "nope", quiescence=0)


def test_restore_right_after_a_repair_is_not_held_back_by_the_repairs_own_write(
    repaired: Path,
) -> None:
    """The session holds exactly what the repair wrote: its recent change is no agent's."""
    result = run("restore", repaired)
    assert result.exit_code == 0, result.stderr
    assert repaired.read_bytes() == CLONES.read_bytes()
    # And the restore's own write does not hold back its undoing either.
    assert run("restore", repaired).exit_code == 0
    assert repaired.read_bytes() == REPAIRED.read_bytes()


def test_restore_is_guarded_like_a_repair(repaired: Path) -> None:
    """Changed since the repair (an agent appended): within the quiescence window, so
    refused with a hint, the session as it is."""
    with repaired.open("ab") as out:
        out.write(b"\n")
    result = run("restore", repaired)
    assert result.exit_code == 2
    assert "--quiescence 0 skips this check" in result.stderr
    assert result.stderr.count("\n") == 1
    assert repaired.read_bytes() == REPAIRED.read_bytes() + b"\n"


def test_lines_carried_over_by_the_repair_are_its_own_write_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line appended during the swap is carried over, and the file checked again: the
    backup's name then records the file as the repair left it, not as the swap did."""
    session = tmp_path / "s.jsonl"
    shutil.copyfile(CLONES, session)
    os.utime(session, (LONG_AGO, LONG_AGO))
    line = b'{"type":"label","id":"late","parentId":null,"targetId":"a0000008","label":"x"}\n'
    swap = os.replace

    def late_append(source: str | Path, target: str | Path) -> None:
        if Path(target) == session and not session.with_name("late").exists():
            session.with_name("late").touch()
            with open(session, "ab") as out:
                out.write(line)
        swap(source, target)

    monkeypatch.setattr(os, "replace", late_append)
    result = repair_in_place(session, Settings(quiescence=0.0))
    monkeypatch.undo()
    assert result.carried_over == len(line)
    assert session.read_bytes() == REPAIRED.read_bytes() + line
    (kept,) = list_backups(session)
    assert result.backup == kept.path
    assert run("restore", session).exit_code == 0
    assert session.read_bytes() == CLONES.read_bytes() + line


def test_junk_and_future_dated_names_are_not_taken_for_the_newest(repaired: Path) -> None:
    """A file merely named like a backup (the way sessionfix 0.1 named them, dated far
    ahead) and a verified backup dated ahead of the clock are passed over, with a
    warning; either is restored only when named."""
    (real,) = list_backups(repaired)
    junk = repaired.with_name(repaired.name + ".sessionfix-bak-99991231T235959Z")
    junk.write_bytes(b"not a session\n")
    ahead = repaired.with_name(
        backup_name(repaired, datetime(9999, 1, 1, tzinfo=UTC), _record(b"x\n", b"y\n"))
    )
    ahead.write_bytes(b"x\n")
    assert [(b.path, b.status) for b in list_backups(repaired)] == [
        (junk, Status.UNVERIFIED),
        (ahead, Status.FUTURE),
        (real.path, Status.VERIFIED),
    ]
    result = run("restore", "--quiescence", "0", repaired)
    assert result.exit_code == 0, result.stderr
    assert repaired.read_bytes() == CLONES.read_bytes()
    assert "sessionfix: warning: " in result.stderr
    assert "passed over 2 newer backup(s)" in result.stderr
    result = run("restore", "--quiescence", "0", "--backup", junk.name, repaired)
    assert result.exit_code == 0, result.stderr
    assert repaired.read_bytes() == b"not a session\n"
    assert f"{junk.name} records nothing to check its bytes against" in result.stderr


def test_a_damaged_backup_is_never_restored(repaired: Path) -> None:
    """A backup cut short, or with other bytes than its name records: refused by name,
    passed over by default, marked in the list."""
    (backup,) = list_backups(repaired)
    os.truncate(backup.path, backup.size // 2)
    before = sorted((p.name, p.read_bytes()) for p in repaired.parent.iterdir())
    named = run("restore", "--quiescence", "0", "--backup", backup.path.name, repaired)
    assert named.exit_code == 2
    assert named.stderr == (
        f"sessionfix: error: {repaired}: {backup.path.name} is damaged (it holds "
        f"{backup.size // 2} of the {backup.size} bytes its name records); not restored\n"
    )
    newest = run("restore", "--quiescence", "0", repaired)
    assert newest.exit_code == 2
    assert newest.stderr.startswith(
        f"sessionfix: error: {repaired}: no verified sessionfix backup beside it (1 that"
    )
    assert newest.stderr.count("\n") == 1
    assert sorted((p.name, p.read_bytes()) for p in repaired.parent.iterdir()) == before
    data = json.loads(run("restore", "--list", "--output-format", "json", repaired).stdout)
    assert [item["status"] for item in data] == ["damaged"]
    with open(backup.path, "r+b") as handle:  # as long as recorded, other bytes
        handle.seek(0, os.SEEK_END)
        handle.write(b"x" * (backup.size - backup.size // 2))
    with pytest.raises(DamagedBackup, match="its bytes are not those its name records"):
        restore(repaired, backup.path.name, quiescence=0)
    assert repaired.read_bytes() == REPAIRED.read_bytes()


def test_a_backup_that_grew_still_verifies(repaired: Path) -> None:
    """A writer that kept the replaced file open appended to it: its first bytes are
    still those recorded, and the restore brings back everything it holds."""
    (backup,) = list_backups(repaired)
    with backup.path.open("ab") as out:
        out.write(b"late\n")
    (grown,) = list_backups(repaired)
    assert grown.status is Status.VERIFIED
    assert restore(repaired, quiescence=0).changed
    assert repaired.read_bytes() == CLONES.read_bytes() + b"late\n"


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


def test_restore_goes_through_the_link_the_repair_went_through(tmp_path: Path) -> None:
    target = tmp_path / "store" / "s.jsonl"
    target.parent.mkdir()
    shutil.copyfile(CLONES, target)
    os.utime(target, (LONG_AGO, LONG_AGO))
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    repaired = run("repair", "--in-place", "--quiescence", "0", "--follow-symlinks", link)
    assert repaired.exit_code == 0, repaired.stderr
    (kept,) = list_backups(target)
    refused = run("restore", "--quiescence", "0", link)
    assert refused.exit_code == 2
    assert "symbolic link" in refused.stderr
    listed = run("restore", "--list", "--follow-symlinks", link)
    assert listed.stdout.startswith(f"{kept.path}\t")
    restored = run("restore", "--quiescence", "0", "--follow-symlinks", link)
    assert restored.exit_code == 0, restored.stderr
    assert link.is_symlink()
    assert target.read_bytes() == CLONES.read_bytes()
    assert not [p for p in tmp_path.iterdir() if ".sessionfix-bak-" in p.name]


def test_a_followed_link_whose_file_is_gone_recreates_the_file(tmp_path: Path) -> None:
    target = tmp_path / "store" / "s.jsonl"
    target.parent.mkdir()
    shutil.copyfile(CLONES, target)
    os.utime(target, (LONG_AGO, LONG_AGO))
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    repair_in_place(link, Settings(quiescence=0.0), follow_symlinks=True)
    target.unlink()
    assert restore(link, quiescence=0, follow_symlinks=True).changed
    assert link.is_symlink()
    assert target.read_bytes() == CLONES.read_bytes()


def test_the_library_lists_and_restores_what_the_command_prints(repaired: Path) -> None:
    """`run_restore` is the whole of `restore`: the command prints what it returns, as
    `report.backups` renders it."""
    listing = run_restore(RestoreRequest(repaired, list_only=True))
    assert isinstance(listing, BackupListing)
    assert listing.files == list_backups(repaired)
    assert not listing.empty
    assert run("restore", "--list", repaired).stdout_bytes == backup_listing(listing, as_json=False)
    as_json = run("restore", "--list", "--output-format", "json", repaired)
    assert as_json.stdout_bytes == backup_listing(listing, as_json=True)
    with pytest.raises(UsageError, match="--list and --backup cannot be combined"):
        run_restore(RestoreRequest(repaired, list_only=True, backup="x"))
    with pytest.raises(UsageError, match="--session names a session of a store"):
        run_restore(RestoreRequest(repaired, store_session="s"))
    done = run_restore(RestoreRequest(repaired, quiescence=0.0))
    assert isinstance(done, RestoreDone)
    assert done.changed
    assert repaired.read_bytes() == CLONES.read_bytes()
    source = listing.files[0].path.name
    assert restore_note(done) == (
        f"Restored {repaired} from {source}; the replaced version is kept as {done.kept}."
    )
    empty = run_restore(RestoreRequest(repaired.with_name("other.jsonl"), list_only=True))
    assert isinstance(empty, BackupListing)
    assert empty.empty
    assert listing_note(empty) == f"{empty.session}: no sessionfix backup beside it."
