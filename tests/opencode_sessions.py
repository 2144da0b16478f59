"""opencode databases built by opencode itself from sessions described as text.

A session is described in opencode's export format (`{info, messages: [{info, parts}]}`,
what `opencode export` writes), committed as JSON under `tests/opencode/sessions/`.
`build_database` turns descriptions into a database with `opencode import` (the pinned
binary, in the isolated environment of `tests/opencode_loader.py`): the schema, the
rows and their columns are opencode's own, and a description whose shape opencode's
decoder rejects fails the build. Damage is then done to a copy with SQL, as the field
shapes of spec `formats/opencode.md` §6 look (`damaged`).

What `opencode import` does to a description (1.18.33, spec §9.4): the session is put
in the project and folder of the importing process (here a folder of the build),
`message.time_created` is the info's `time.created`, the other times of a row are the
time of the import, no `event` row is written, and a row whose id is already in the
database is skipped silently: every id of a description is its own.

One import costs about 2 s (it starts the binary); `built_database` builds each set
of descriptions once per run.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw

from .conftest import ROOT
from .opencode_loader import BINARY, isolated_environment

SESSIONS = ROOT / "tests" / "opencode" / "sessions"
"""The committed session descriptions."""
IMPORT_TIMEOUT = 120.0
"""Seconds one `opencode import` may take."""


def description(name: str) -> Path:
    """The committed description `name` (`tests/opencode/sessions/<name>.json`)."""
    path = SESSIONS / f"{name}.json"
    assert path.is_file(), f"no session description {path}"
    return path


def build_database(target: Path, descriptions: Sequence[Path]) -> Path:
    """A new opencode database at `target` holding the described sessions, each written
    by `opencode import`."""
    assert not target.exists(), f"{target} exists"
    with tempfile.TemporaryDirectory(prefix="sessionfix-opencode-import-") as tmp:
        home = Path(tmp)
        work = home / "work"
        work.mkdir()
        env = isolated_environment(home, target)
        for path in descriptions:
            done = subprocess.run(
                [str(BINARY), "import", str(path)],
                env=env,
                cwd=work,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=IMPORT_TIMEOUT,
                check=False,
            )
            said = (done.stdout + done.stderr).decode("utf-8", "replace")
            failed = f"opencode import {path.name} failed ({done.returncode}): {said[-2000:]}"
            assert done.returncode == 0, failed
            assert "Imported session" in said, failed
    checkpoint(target)
    return target


def checkpoint(database: Path) -> None:
    """Fold the database's write-ahead log into it, so that the file alone holds it."""
    db = apsw.Connection(str(database))
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()


_BUILT: dict[str, Path] = {}
"""Databases built in this run, by the digest of their descriptions."""


def built_database(names: Sequence[str]) -> Path:
    """The database of the named descriptions, built once per run; read it, or damage a
    copy of it (`damaged`), never the database itself."""
    paths = [description(name) for name in names]
    digest = hashlib.sha256(b"\0".join(path.read_bytes() for path in paths)).hexdigest()
    if digest not in _BUILT:
        folder = Path(tempfile.mkdtemp(prefix="sessionfix-opencode-db-"))
        atexit.register(shutil.rmtree, folder, True)
        _BUILT[digest] = build_database(folder / "opencode.db", paths)
    return _BUILT[digest]


def copy_database(source: Path, target: Path) -> Path:
    """A copy of `source` at `target`, made with SQLite's online backup (the source is
    only read)."""
    src = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
    dst = apsw.Connection(str(target))
    try:
        with dst.backup("main", src, "main") as backup:
            backup.step(-1)
    finally:
        dst.close()
        src.close()
    return target


def damaged(source: Path, target: Path, *statements: tuple[str, Sequence[Any]]) -> Path:
    """A copy of `source` at `target` with each SQL statement (and its parameters) run on
    it in one transaction; each must change a row (a damage that misses is a typo)."""
    copy_database(source, target)
    db = apsw.Connection(str(target))
    try:
        with db:
            for sql, parameters in statements:
                db.execute(sql, tuple(parameters))
                assert db.changes() > 0, f"{sql} {parameters} changed no row"
    finally:
        db.close()
    checkpoint(target)
    return target
