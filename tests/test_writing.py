"""Replacing a session file: atomic, mode kept, backup byte-identical, nothing left over."""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import xxhash

from sessionfix.discovery import discover
from sessionfix.replacing import temp_path
from sessionfix.safety.writing import (
    BackupName,
    BackupRecord,
    FileChanged,
    WriteFailed,
    WriteRefused,
    backup_name,
    read_backup_name,
    remove_dead_temps,
    replace_file,
    snapshot,
)

ORIGINAL = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}\n'
REPAIRED = ORIGINAL + b'{"type":"label","id":"a","parentId":null,"targetId":"s","label":"x"}\n'
WHEN = datetime(2026, 11, 22, 6, 30, 5, tzinfo=UTC)
RECORD = BackupRecord(
    len(ORIGINAL), xxhash.xxh3_64_hexdigest(ORIGINAL), xxhash.xxh3_64_hexdigest(REPAIRED)
)
"""What the backup of ORIGINAL replaced by REPAIRED records."""


@pytest.fixture
def session(tmp_path: Path) -> Path:
    path = tmp_path / "abc.jsonl"
    path.write_bytes(ORIGINAL)
    path.chmod(0o640)
    return path


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".sessionfix-tmp-" in p.name)


def test_replaces_content_keeps_mode_and_links_a_byte_identical_backup(session: Path) -> None:
    before = os.stat(session)
    backup = replace_file(snapshot(session), [REPAIRED[:10], REPAIRED[10:]], now=WHEN)
    assert session.read_bytes() == REPAIRED
    assert stat.S_IMODE(os.stat(session).st_mode) == 0o640
    assert backup == session.with_name(
        f"abc.jsonl.sessionfix-bak-20261122T063005Z-{len(ORIGINAL)}-{RECORD.digest}-{RECORD.result}"
    )
    assert read_backup_name(session.name, backup.name) == BackupName(WHEN, 0, RECORD)
    assert backup.read_bytes() == ORIGINAL
    assert os.stat(backup).st_ino == before.st_ino
    assert _leftovers(session.parent) == []
    # Neither the backup nor a temp file is ever taken for a session.
    assert discover([session.parent]).files == [session]


def test_a_taken_backup_name_gets_a_number(session: Path) -> None:
    """Any backup stamped the same second, whatever it records, takes its serial: the
    serial orders the backups of one second."""
    session.with_name(backup_name(session, WHEN, serial=1)).write_bytes(b"older backup")
    backup = replace_file(snapshot(session), [REPAIRED], now=WHEN)
    assert backup == session.with_name(backup_name(session, WHEN, RECORD, serial=2))
    assert backup.read_bytes() == ORIGINAL


def test_no_backup_when_asked(session: Path) -> None:
    assert replace_file(snapshot(session), [REPAIRED], backup=False) is None
    assert sorted(p.name for p in session.parent.iterdir()) == ["abc.jsonl"]


@pytest.mark.parametrize("change", ["append", "rewrite", "delete"])
def test_a_file_changed_after_reading_is_left_alone(session: Path, change: str) -> None:
    taken = snapshot(session)
    if change == "append":
        with session.open("ab") as handle:
            handle.write(b'{"type":"label"}\n')
    elif change == "rewrite":
        replacement = session.with_name("other")
        replacement.write_bytes(ORIGINAL)
        os.replace(replacement, session)
    else:
        session.unlink()
    before = session.read_bytes() if session.exists() else None
    with pytest.raises(FileChanged) as caught:
        replace_file(taken, [REPAIRED], now=WHEN)
    assert caught.value.grew == (change == "append")
    assert (session.read_bytes() if session.exists() else None) == before
    assert sorted(p.name for p in session.parent.iterdir() if "sessionfix" in p.name) == []


def test_a_failure_while_writing_leaves_the_original_and_no_temp_file(session: Path) -> None:
    def chunks() -> Iterator[bytes]:
        yield REPAIRED[:20]
        raise OSError(28, "No space left on device")

    with pytest.raises(WriteFailed, match=r"no space left on device.*left untouched"):
        replace_file(snapshot(session), chunks(), now=WHEN)
    assert session.read_bytes() == ORIGINAL
    assert sorted(p.name for p in session.parent.iterdir()) == ["abc.jsonl"]


def test_links_and_special_files_are_refused(session: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(session)
    with pytest.raises(WriteRefused, match="symbolic link"):
        snapshot(link)
    assert snapshot(link, follow_symlinks=True).path == session.resolve()
    hard = tmp_path / "hard.jsonl"
    os.link(session, hard)
    with pytest.raises(WriteRefused, match="1 other hard link"):
        snapshot(session)
    assert snapshot(session, allow_hard_links=True).path == session.resolve()
    with pytest.raises(WriteRefused, match="not a regular file"):
        snapshot(tmp_path)
    with pytest.raises(WriteRefused, match="no such file"):
        snapshot(tmp_path / "missing.jsonl")


def test_a_failed_rename_removes_the_backup_and_the_temp_file(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(source: object, target: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(WriteFailed, match=r"cannot replace it \(permission denied\); left"):
        replace_file(snapshot(session), [REPAIRED], now=WHEN)
    assert session.read_bytes() == ORIGINAL
    assert sorted(p.name for p in session.parent.iterdir()) == ["abc.jsonl"]


@pytest.fixture
def interruptible() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here even when the suite was started with it
    ignored (run in the background by a shell, by some CI runners)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("interruptible")
def test_an_interrupt_during_the_swap_waits_until_it_is_done(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT arriving as the rename happens is held back until the swap is complete:
    the session holds the new bytes and the backup the original, then the interrupt."""
    replace = os.replace

    def interrupted(source: str | Path, target: str | Path) -> None:
        replace(source, target)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        replace_file(snapshot(session), [REPAIRED], now=WHEN)
    assert session.read_bytes() == REPAIRED
    backup = session.with_name(backup_name(session, WHEN, RECORD))
    assert backup.read_bytes() == ORIGINAL


def test_a_temp_name_taken_by_a_dead_run_is_cleared_and_not_deleted_by_others(
    session: Path,
) -> None:
    """A leftover temp file with this process's pid (pids are reused) is removed under
    the sidecar lock; a run that fails to create its temp file deletes nothing."""
    leftover = temp_path(session)
    leftover.write_bytes(b"partial")
    with pytest.raises(WriteFailed, match="file exists"):
        replace_file(snapshot(session), [REPAIRED], now=WHEN)
    assert leftover.read_bytes() == b"partial"
    assert remove_dead_temps(session) == [leftover]
    replace_file(snapshot(session), [REPAIRED], now=WHEN)
    assert session.read_bytes() == REPAIRED


def test_a_leftover_temp_link_is_not_another_hard_link(session: Path) -> None:
    """A restore killed after linking its temp file leaves that link: it is sessionfix's
    own, so it does not block the next in-place run (which then removes it)."""
    leftover = session.with_name(f".{session.name}.sessionfix-tmp-999999999")
    os.link(session, leftover)
    assert snapshot(session).path == session.resolve()
    assert remove_dead_temps(session) == [leftover]


HEX = "0123456789abcdef"


@pytest.mark.parametrize(
    ("suffix", "expected"),
    [
        ("20261122T063005Z", BackupName(WHEN, 0, None)),
        ("20261122T063005Z-7", BackupName(WHEN, 7, None)),
        (f"20261122T063005Z-67-{HEX}-{HEX}", BackupName(WHEN, 0, BackupRecord(67, HEX, HEX))),
        (f"20261122T063005Z-2-0-{HEX}-{HEX}", BackupName(WHEN, 2, BackupRecord(0, HEX, HEX))),
        ("99999999T999999Z", None),  # no date
        (f"20261122T063005Z-67-{HEX.upper()}-{HEX}", None),
        (f"20261122T063005Z-67-{HEX}-{HEX}.jsonl", None),
        (f"20261122T063005Z-67-{HEX}", None),
        ("20261122T063005Z-", None),
        ("", None),
    ],
)
def test_backup_names_are_read_strictly(suffix: str, expected: BackupName | None) -> None:
    assert read_backup_name("abc.jsonl", "abc.jsonl.sessionfix-bak-" + suffix) == expected
    assert read_backup_name("ab.jsonl", "abc.jsonl.sessionfix-bak-" + suffix) is None
