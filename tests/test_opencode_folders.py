"""Where a user's opencode sessions are (spec formats/opencode.md §1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionfix.formats.opencode import data_folder, databases, legacy_storage


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_default_and_channel_databases(tmp_path: Path) -> None:
    """Every `opencode*.db` of `~/.local/share/opencode`: the default database and the
    release channels' own; not their logs, nor sessionfix's backups."""
    folder = tmp_path / ".local" / "share" / "opencode"
    default = touch(folder / "opencode.db")
    stable = touch(folder / "opencode-stable.db")
    for other in ("opencode.db-wal", "opencode.db-shm", "opencode.db.sessionfix-ses_1-1.bak"):
        touch(folder / other)
    assert databases({}, tmp_path) == [stable, default]


def test_xdg_data_home_and_opencode_db(tmp_path: Path) -> None:
    """`XDG_DATA_HOME` moves the data folder; `OPENCODE_DB` adds a database, a bare name
    being in the data folder; `:memory:` names none."""
    data = tmp_path / "data"
    assert data_folder({"XDG_DATA_HOME": str(data)}, tmp_path) == data / "opencode"
    elsewhere = touch(tmp_path / "work" / "sessions.sqlite")
    named = touch(data / "opencode" / "mine.sqlite")
    env = {"XDG_DATA_HOME": str(data)}
    assert databases({**env, "OPENCODE_DB": str(elsewhere)}, tmp_path) == [elsewhere]
    assert databases({**env, "OPENCODE_DB": "mine.sqlite"}, tmp_path) == [named]
    assert databases({**env, "OPENCODE_DB": ":memory:"}, tmp_path) == []


@pytest.mark.parametrize("has_sessions", [True, False])
def test_legacy_storage(tmp_path: Path, has_sessions: bool) -> None:
    """The legacy tree is there when it has a session folder."""
    storage = tmp_path / ".local" / "share" / "opencode" / "storage"
    (storage / ("session" if has_sessions else "session_diff")).mkdir(parents=True)
    assert legacy_storage({}, tmp_path) == (storage if has_sessions else None)
