"""OpenClaw's SQLite session store: every pi/OpenClaw fixture turned into a store session
is scanned and repaired as the file is; scans never change the store; a rewrite is one
transaction that a lock, a live gateway, a kill or a full disk leave undone.

The template store is built by OpenClaw's own import (`tests/openclaw_loader.py`), so
its schema, triggers and session rows are OpenClaw's; each fixture's lines then replace
its session's rows byte for byte (`tests/store_fixtures.py`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import apsw
import jsonschema
import orjson
import pytest
import xxhash
import zstandard
from typer.testing import CliRunner

from sessionfix import Settings, check_file, registry
from sessionfix.cli import app, main
from sessionfix.context import context_after_repair, context_of
from sessionfix.engine import check_paths
from sessionfix.formats.openclaw_store.liveness import coordinator_path
from sessionfix.repair.plan import RepairPlan, described_fixes
from sessionfix.repair.targets import repair_to
from sessionfix.report.backups import backup_listing, listing_note, restore_note
from sessionfix.report.render import OutputFormat, diagnostic_json
from sessionfix.safety.restoring import BackupListing, RestoreDone, RestoreRequest, run_restore
from sessionfix.stores import open_store, transcript_of

from .conftest import FIXTURES, ROOT
from .openclaw_loader import build_store, require_openclaw_at_collection, store_digest
from .slim_cases import BUDGET, pi_session
from .store_fixtures import (
    NAVIGATION,
    add_session,
    fill_session,
    hide_from_index,
    store_from_file,
    store_session,
    transcript_lines,
)
from .test_sarif import sarif_schema

require_openclaw_at_collection()

ENV = {"NO_COLOR": "1", "COLUMNS": "200"}
EXAMPLE = ROOT / "examples" / "sessions" / "openclaw-overflow-recovery.jsonl"


def _is_pi_family_case(case: Path) -> bool:
    spec_file = case / "case.json"
    spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
    if spec.get("settings") or spec.get("filename"):
        return False  # checked under a file name or settings a store session has not
    data = (case / "input.jsonl").read_bytes()
    if not data.endswith(b"\n") or b"\r" in data:
        return False  # each row is a line: a store has no unterminated or CRLF line
    golden = json.loads((case / "diagnostics.json").read_text())
    formats = {d["format"] for d in golden}
    if golden:
        return formats <= {"pi", "openclaw"}
    return data.startswith(b'{"type":"session"')


CASES = sorted(case for case in FIXTURES.iterdir() if case.is_dir() and _is_pi_family_case(case))


@pytest.fixture(scope="session")
def template_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store OpenClaw built by its own import of one clean pi session."""
    work = tmp_path_factory.mktemp("openclaw-template")
    built = build_store(work, [EXAMPLE.read_bytes()])
    return built.store


def _store_for(template: Path, tmp_path: Path, data: bytes, **kw: Any) -> tuple[Path, str]:
    where = tmp_path / "state" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    return store_from_file(template, where, data, **kw)


def _rows(store: Path, session_id: str) -> list[tuple[Any, ...]]:
    """Every column of every row of the session, in order (what a rewrite may change)."""
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return db.execute(
            "SELECT seq, CAST(event_json AS BLOB), created_at, event_zstd, event_utf8_bytes, "
            "navigation_json FROM transcript_events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
    finally:
        db.close()


def _session_text(store: Path, session_id: str, tmp_path: Path) -> bytes:
    with open_store(store) as opened:
        session = next(s for s in opened.sessions() if s.id == session_id)
        with transcript_of(opened, session) as transcript:
            return transcript.path.read_bytes()


def _compressible(data: bytes) -> set[int]:
    """Every third non-empty line, stored compressed."""
    return {k for k, line in enumerate(transcript_lines(data)) if k % 3 == 2 and line}


def _located(report: list[Any]) -> list[tuple[str, int, str, str | None]]:
    return [(d.code, d.row, d.severity.label, d.fix and d.fix.applicability.value) for d in report]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fixture_as_store_session(case: Path, template_store: Path, tmp_path: Path) -> None:
    """A store session holding a fixture's lines (some rows compressed) has the file's
    findings, on the same lines, at seq = line - 1; its repair in place stores exactly
    the lines the file's repair writes."""
    data = (case / "input.jsonl").read_bytes()
    store, session_id = _store_for(template_store, tmp_path, data, compress=_compressible(data))
    plain = tmp_path / "session.jsonl"
    plain.write_bytes(data)
    settings = Settings(quiescence=0.0)
    expected = check_file(plain, settings)
    reports = list(check_paths([store], settings))
    assert [r.session_id for r in reports] == [session_id]
    found = reports[0].diagnostics
    assert _located(found) == _located(expected)
    assert all(d.session_id == session_id and d.record_key == d.row - 1 for d in found)
    repaired = tmp_path / "repaired.jsonl"
    result = repair_to(plain, repaired, settings)
    before = _rows(store, session_id)
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--no-progress", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code in (0, 1), outcome.output
    if not result.changed:
        assert _rows(store, session_id) == before
        assert not list(store.parent.glob("*.sessionfix-bak-*"))
        return
    assert _session_text(store, session_id, tmp_path) == repaired.read_bytes()
    after = _rows(store, session_id)
    texts = [row[1] for row in before]
    kept = {row[1]: row for row in before if texts.count(row[1]) == 1}
    for row in after:  # a row the repair kept keeps every column but its seq
        old = kept.get(row[1])
        if old is not None:
            assert row[2:] == old[2:]
    _assert_consistent(store)


def _assert_consistent(store: Path) -> None:
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        db.close()


@pytest.fixture
def damaged(template_store: Path, tmp_path: Path) -> tuple[Path, str]:
    """A store whose session holds the overflow-recovery example (clones, a cloned
    compaction, a dangling label), one row compressed."""
    return _store_for(template_store, tmp_path, EXAMPLE.read_bytes(), compress={3})


def _digest(store: Path) -> dict[str, str]:
    """The store's files, each by its digest: the database, its backups, and a write-ahead
    log with anything in it (an empty `-wal` and the `-shm` index are what SQLite's WAL
    mode makes for any reader, `sqlite3 -readonly` too)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(store.parent.iterdir())
        if p.name.startswith(store.name)
        and not p.name.endswith("-shm")
        and not (p.name.endswith("-wal") and p.stat().st_size == 0)
    }


TOY_STORE: Final = """
from sessionfix.registry import SqliteStore
from sessionfix.formats.openclaw_store import is_store, open_store

CONTAINERS = (SqliteStore(frozenset({"toy-agent.sqlite"})),)
"""
"""A throw-away package that declares a store of its own name, read as OpenClaw's."""


def test_a_store_is_what_a_package_declares(
    damaged: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk takes a file of the name a package's declared store bears, and the run reads
    it as that store: its findings named by session and seq; an empty one is opened as
    a store too (and found holding none), not read as an empty session file."""
    store, session_id = damaged
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "sessionfix_toy_store.py").write_text(TOY_STORE)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    monkeypatch.setattr(
        registry,
        "PACKAGES",
        tuple(
            name.replace("sessionfix.formats.openclaw_store", "sessionfix_toy_store")
            for name in registry.PACKAGES
        ),
    )
    folder = tmp_path / "toy"
    folder.mkdir()
    shutil.copyfile(store, folder / "toy-agent.sqlite")
    (folder / "empty").mkdir()
    (folder / "empty" / "toy-agent.sqlite").touch()
    outcome = CliRunner().invoke(app, ["scan", "--output-format", "concise", str(folder)], env=ENV)
    assert outcome.exit_code == 2, outcome.output
    assert f"{folder / 'toy-agent.sqlite'}:{session_id}:seq 6: SF201" in outcome.stdout
    assert f"{folder / 'empty' / 'toy-agent.sqlite'}: not an OpenClaw session store" in (
        outcome.stderr
    )


def test_scan_reads_only(damaged: tuple[Path, str]) -> None:
    store, _ = damaged
    before = _digest(store)
    outcome = CliRunner().invoke(app, ["scan", str(store.parents[3])], env=ENV)
    assert outcome.exit_code == 1, outcome.output
    assert _digest(store) == before


def test_findings_name_store_session_and_seq(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    outcome = CliRunner().invoke(app, ["check", "--output-format", "json", str(store)], env=ENV)
    found = orjson.loads(outcome.stdout)
    assert [(d["code"], d["seq"]) for d in found] == [
        ("SF201", 6),
        ("SF201", 7),
        ("SF202", 10),
        ("SF503", 11),
        ("SF108", 12),
    ]
    assert {(d["filename"], d["session_id"]) for d in found} == {(str(store), session_id)}
    assert all(d["location"]["row"] == d["seq"] + 1 for d in found)
    text = CliRunner().invoke(app, ["check", "--output-format", "concise", str(store)], env=ENV)
    assert f"{store}:{session_id}:seq 6: SF201" in text.stdout
    assert "entry a0000005 at seq 5" in text.stdout


def _checked_as(store: Path, output_format: OutputFormat, *args: str) -> str:
    outcome = CliRunner().invoke(
        app, ["check", "--output-format", output_format.value, *args, str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    return outcome.stdout


def test_store_locations_read_the_same_in_every_output_format(
    damaged: tuple[Path, str],
) -> None:
    """Every output format names a store's finding by its session and seq, and the record
    its message names by its seq: never by the line of the transcript it was read from."""
    store, session_id = damaged
    place = f"{store}:{session_id}:seq 6"
    named = "entry a0000005 at seq 5"
    outputs = {output_format: _checked_as(store, output_format) for output_format in OutputFormat}
    assert set(outputs) == {
        OutputFormat.FULL,
        OutputFormat.CONCISE,
        OutputFormat.JSON,
        OutputFormat.JSON_LINES,
        OutputFormat.GITHUB,
        OutputFormat.SARIF,
    }, "a new output format is checked here too"
    for human in (OutputFormat.FULL, OutputFormat.CONCISE):
        assert f"{place}: SF201 [*] user message is identical to {named} " in outputs[human]
    assert " seq 6 | " in outputs[OutputFormat.FULL]
    assert f"{store}:7:" not in outputs[OutputFormat.FULL]
    as_json = orjson.loads(outputs[OutputFormat.JSON])
    as_lines = [orjson.loads(line) for line in outputs[OutputFormat.JSON_LINES].splitlines()]
    for found in (as_json, as_lines):
        first = found[0]
        assert first["record"] == {
            "session": session_id,
            "record_key": 6,
            "place": place,
        }
        assert (first["session_id"], first["seq"], first["location"]["row"]) == (session_id, 6, 7)
        assert named in first["message"]
    annotation = outputs[OutputFormat.GITHUB].splitlines()[0]
    assert annotation.startswith(f"::warning title=sessionfix (SF201),file={store}::{place}: ")
    assert named in annotation
    sarif = orjson.loads(outputs[OutputFormat.SARIF])
    jsonschema.Draft4Validator(sarif_schema()).validate(sarif)
    result = sarif["runs"][0]["results"][0]
    assert named in result["message"]["text"]
    (location,) = result["locations"]
    assert "region" not in location["physicalLocation"]
    assert location["logicalLocations"] == [
        {"name": session_id, "kind": "session"},
        {"name": "seq 6", "fullyQualifiedName": f"{session_id}:seq 6", "kind": "record"},
    ]
    assert result["properties"] == {"session_id": session_id, "seq": 6, "place": place}


def test_a_fix_names_the_records_it_moves_to_by_their_seq(
    template_store: Path, tmp_path: Path
) -> None:
    """A fix's message, like the finding's, names another record by the store's seq."""
    case = FIXTURES / "SF501-kept-from-a-tool-result"
    store, session_id = _store_for(template_store, tmp_path, (case / "input.jsonl").read_bytes())
    (found,) = orjson.loads(_checked_as(store, OutputFormat.JSON))
    assert found["message"].startswith(
        "compaction keeps history from a tool result ('a0000003', seq 3); "
    )
    assert found["fix"]["message"] == "move the cut forward to a0000004 (seq 4)"
    text = _checked_as(store, OutputFormat.FULL)
    assert f"{store}:{session_id}:seq 7: SF501" in text
    assert "fix (safe): move the cut forward to a0000004 (seq 4)" in text


def test_a_fix_made_safe_by_the_settings_still_names_records_by_their_seq(
    template_store: Path, tmp_path: Path
) -> None:
    case = FIXTURES / "SF103-dangling-parent-on-path"
    store, _ = _store_for(template_store, tmp_path, (case / "input.jsonl").read_bytes())
    for extra in ((), ("--extend-safe-fixes", "SF103")):
        (found,) = orjson.loads(_checked_as(store, OutputFormat.JSON, *extra))
        assert found["fix"]["applicability"] == ("safe" if extra else "unsafe")
        assert found["fix"]["message"] == "re-link to the preceding entry a0000002 (seq 2)"


def test_each_fix_in_a_store_lists_every_edit_of_its_transcript(
    damaged: tuple[Path, str], tmp_path: Path
) -> None:
    """A fix's edits, the rows of its transcript that its repair alone changes (a clone's
    drop re-links the row after it), are those of the same session checked as a file."""
    store, session_id = damaged
    outcome = CliRunner().invoke(app, ["check", "--output-format", "json", str(store)], env=ENV)
    in_store = [(d["code"], d["fix"]) for d in orjson.loads(outcome.stdout)]
    session = tmp_path / "sessions" / f"{session_id}.jsonl"
    session.parent.mkdir()
    session.write_bytes(_session_text(store, session_id, tmp_path))
    (report,) = check_paths([session], Settings(), describe=described_fixes)
    as_file = [(d["code"], d["fix"]) for d in map(diagnostic_json, report.diagnostics)]
    assert in_store == as_file
    clone = in_store[0][1]
    assert clone is not None
    assert [edit["op"] for edit in clone["edits"]] == ["delete", "replace_bytes"]


def test_context_of_a_store_session_is_that_of_its_transcript(
    damaged: tuple[Path, str],
) -> None:
    """`sessionfix context STORE` measures each session as the file it was imported from,
    now and after repair, and changes nothing."""
    store, session_id = damaged
    before = _digest(store)
    outcome = CliRunner().invoke(
        app,
        [
            "context",
            "--after-repair",
            "--output-format",
            "json",
            "--session",
            session_id,
            str(store),
        ],
        env=ENV,
    )
    assert outcome.exit_code == 0, outcome.output
    [entry] = orjson.loads(outcome.stdout)
    assert entry["filename"] == f"{store}:{session_id}"
    now, after = context_of(EXAMPLE), context_after_repair(EXAMPLE)
    assert (entry["now"]["messages"], entry["messages"]) == (now.messages, after.messages)
    assert entry["now"]["tokens"]["estimate"] == now.tokens
    assert entry["tokens"]["estimate"] == after.tokens
    assert _digest(store) == before


def test_session_option(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    ok = CliRunner().invoke(app, ["check", "--session", session_id, str(store)], env=ENV)
    assert ok.exit_code == 1
    missing = CliRunner().invoke(app, ["check", "--session", "nope", str(store)], env=ENV)
    assert missing.exit_code == 2
    assert "no session 'nope'" in missing.stderr


def test_export_and_diff(damaged: tuple[Path, str], tmp_path: Path) -> None:
    store, session_id = damaged
    before = _digest(store)
    text = tmp_path / "text.jsonl"
    text.write_bytes(_session_text(store, session_id, tmp_path))
    expected = tmp_path / "expected.jsonl"
    repair_to(text, expected, Settings(quiescence=0.0))
    exported = tmp_path / "exported.jsonl"
    outcome = CliRunner().invoke(app, ["repair", "-o", str(exported), str(store)], env=ENV)
    assert outcome.exit_code == 1, outcome.output  # SF503 remains: it has no fix
    assert exported.read_bytes() == expected.read_bytes()
    diff = CliRunner().invoke(app, ["repair", "--diff", str(store)], env=ENV)
    assert diff.exit_code == 1
    assert f"+++ b/{store}:{session_id}" in diff.stdout
    assert '-{"type":"message","id":"a0000006"' in diff.stdout
    assert _digest(store) == before


def test_repair_backup_and_restore(damaged: tuple[Path, str], tmp_path: Path) -> None:
    store, session_id = damaged
    before = _rows(store, session_id)
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    repaired = _rows(store, session_id)
    assert len(repaired) == len(before) - 4
    assert repaired[3][3] is not None  # the compressed row stays compressed
    _assert_consistent(store)
    listing = CliRunner().invoke(
        app, ["restore", "--list", "--output-format", "json", str(store)], env=ENV
    )
    backups = orjson.loads(listing.stdout)
    assert [(b["session_id"], b["rows"], b["status"]) for b in backups] == [
        (session_id, len(before), "ok")
    ]
    restored = CliRunner().invoke(app, ["restore", str(store)], env=ENV)
    assert restored.exit_code == 0, restored.output
    assert _rows(store, session_id) == before
    _assert_consistent(store)
    again = CliRunner().invoke(app, ["restore", "--list", str(store)], env=ENV)
    assert len(again.stdout.splitlines()) == 2  # the restore kept the repaired version


def test_rewrite_marks_projections_for_rebuild(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    generation = db.execute(
        "SELECT generation FROM transcript_rewrite_watermarks WHERE session_id = ?", (session_id,)
    ).fetchone()
    db.close()
    CliRunner().invoke(app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV)
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        state = db.execute(
            "SELECT needs_rebuild FROM session_transcript_index_state WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        assert state == (1,)
        rotated = db.execute(
            "SELECT generation FROM transcript_rewrite_watermarks WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        assert rotated is not None
        assert rotated != generation
        assert len(rotated[0]) == 32
        identities = db.execute(
            "SELECT event_id, seq FROM transcript_event_identities WHERE session_id = ? "
            "ORDER BY seq",
            (session_id,),
        ).fetchall()
        assert "a0000006" not in {event_id for event_id, _ in identities}
        assert [seq for _, seq in identities] == list(range(len(identities)))
    finally:
        db.close()


def _refused(store: Path, session_id: str) -> str:
    before = _rows(store, session_id)
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 2, outcome.output
    assert _rows(store, session_id) == before
    assert not list(store.parent.glob("*.sessionfix-bak-*"))
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1, outcome.stderr
    return lines[0]


def test_a_refused_verification_names_the_row_by_its_seq(
    template_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repair whose result fails verification names the record it blames as the store
    would hold it (the seq its row would be written at), not by a line of the temporary
    transcript."""
    clones = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
    store, session_id = _store_for(template_store, tmp_path, clones.read_bytes())
    monkeypatch.setattr(RepairPlan, "_climb", lambda self, index, owner=None: (None, "zzzzzzzz"))
    refused = _refused(store, session_id)
    assert "(parent link 'zzzzzzzz' at seq 6 names no entry)" in refused, refused
    assert "line" not in refused


def test_refused_while_the_store_is_written(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    writer = apsw.Connection(str(store))
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert "the store is being written" in _refused(store, session_id)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_refused_while_the_gateway_holds_its_coordinator(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    coordinator = coordinator_path(store.parents[3])
    coordinator.parent.mkdir(mode=0o700, exist_ok=True)
    holder = apsw.Connection(str(coordinator))
    holder.execute("PRAGMA journal_mode = MEMORY")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert "OpenClaw's gateway" in _refused(store, session_id)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        coordinator.unlink()


def test_refused_while_the_recorded_gateway_pid_lives(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    locks = store.parents[3] / "tmp" / f"openclaw-{os.getuid()}"
    locks.mkdir(parents=True)
    (locks / "gateway.state.lock").write_bytes(orjson.dumps({"pid": os.getpid(), "port": 1}))
    assert f"pid {os.getpid()}" in _refused(store, session_id)
    (locks / "gateway.state.lock").write_bytes(orjson.dumps({"pid": 2**22 + 17}))
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output  # a dead pid does not hold the store


def test_cold_session_scanned_not_rewritten(damaged: tuple[Path, str], tmp_path: Path) -> None:
    store, session_id = damaged
    lines = transcript_lines(EXAMPLE.read_bytes())
    records = [{"kind": "header", "version": 1, "sessionId": session_id, "generation": "0" * 32}]
    records += [
        {"kind": "event", "row": {"seq": k, "event_json": line.decode(), "created_at": k}}
        for k, line in enumerate(lines)
    ]
    archive = zstandard.ZstdCompressor().compress(
        b"".join(orjson.dumps(r) + b"\n" for r in records)
    )
    digest = hashlib.sha256(archive).hexdigest()
    cold = store.parents[1] / "sessions" / "cold"
    cold.mkdir(parents=True)
    (cold / f"{digest}.jsonl.zst").write_bytes(archive)
    db = apsw.Connection(str(store))
    with db:
        db.execute("DELETE FROM transcript_events WHERE session_id = ?", (session_id,))
        db.execute(
            "INSERT INTO session_transcript_cold_archives (session_id, generation, archive_name, "
            "archive_sha256, event_count, raw_bytes, archive_bytes, last_seq, archived_at, "
            "storage) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'file')",
            (
                session_id,
                "0" * 32,
                f"{digest}.jsonl.zst",
                digest,
                len(lines),
                1,
                len(archive),
                len(lines) - 1,
                1,
            ),
        )
    db.close()
    outcome = CliRunner().invoke(app, ["check", "--output-format", "json", str(store)], env=ENV)
    assert [d["seq"] for d in orjson.loads(outcome.stdout)] == [6, 7, 10, 11, 12]
    refused = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert refused.exit_code == 2
    assert "cold-archived" in refused.stderr


def test_bad_store_is_one_line(tmp_path: Path, template_store: Path) -> None:
    broken = tmp_path / "openclaw-agent.sqlite"
    data = bytearray(template_store.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)
    broken.write_bytes(bytes(data))
    outcome = CliRunner().invoke(app, ["check", str(broken)], env=ENV)
    assert outcome.exit_code == 2
    assert len(outcome.stderr.strip().splitlines()) == 1
    assert "Traceback" not in outcome.output


# ---- a rewrite cut short leaves the store as it was -------------------------------------

KILL_POINTS = ("begun", "rows", "before-commit")


def _state(store: Path, session_id: str) -> tuple[Any, ...]:
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return tuple(
            db.execute(query, (session_id,)).fetchall()
            for query in (
                "SELECT * FROM transcript_events WHERE session_id = ? ORDER BY seq",
                "SELECT * FROM transcript_event_identities WHERE session_id = ? ORDER BY seq",
                "SELECT * FROM transcript_rewrite_watermarks WHERE session_id = ?",
                "SELECT * FROM session_transcript_index_state WHERE session_id = ?",
                "SELECT transcript_updated_at FROM session_windows WHERE session_id = ?",
            )
        )
    finally:
        db.close()


def _repair_process(store: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`repair --in-place` of the store in a process of its own, whose temporary files go
    beside the store (a killed run cannot remove them)."""
    scratch = store.parent / "tmp"
    scratch.mkdir(exist_ok=True)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sessionfix",
            "repair",
            "--in-place",
            "--no-progress",
            "--quiescence",
            "0",
            str(store),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV, "TMPDIR": str(scratch), **env},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("point", KILL_POINTS)
def test_killed_rewrite_leaves_the_store(damaged: tuple[Path, str], point: str) -> None:
    store, session_id = damaged
    before = _state(store, session_id)
    killed = _repair_process(store, SESSIONFIX_KILL_AT=point)
    assert killed.returncode == -9, killed.stderr
    assert _state(store, session_id) == before
    _assert_consistent(store)
    done = _repair_process(store)
    assert done.returncode == 1, done.stderr
    assert len(_state(store, session_id)[0]) == len(before[0]) - 4


FILE_SIZE_LIMITS = (8 << 10, 24 << 10, 32 << 10, 40 << 10, 48 << 10, 64 << 10, 1 << 20)
"""Bytes a file may reach: from too little to read the store (its write-ahead log index
needs more) through failing rewrites to enough."""


def test_full_disk_leaves_the_store(template_store: Path, tmp_path: Path) -> None:
    """Writes fail past a file size limit (RLIMIT_FSIZE, as a full disk fails them): each
    repair either completes or leaves every row as it was, and says why on one line;
    the limits make some rewrites fail midway and let some through."""
    outcomes: list[str] = []
    for limit in FILE_SIZE_LIMITS:
        store, session_id = _store_for(
            template_store, tmp_path / str(limit), EXAMPLE.read_bytes(), compress={3}
        )
        before = _state(store, session_id)
        script = (
            "import resource, signal, sys, runpy;"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}));"
            "sys.argv = ['sessionfix', 'repair', '--in-place', '--no-progress',"
            f" '--quiescence', '0', {str(store)!r}];"
            "runpy.run_module('sessionfix', run_name='__main__')"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**os.environ, **ENV},
            timeout=120,
            check=False,
        )
        after = _state(store, session_id)
        assert "Traceback" not in done.stderr
        if done.returncode == 2:
            assert after == before
            assert not list(store.parent.glob("*.sessionfix-bak-*")), done.stderr
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1, done.stderr
            outcomes.append("write" if "cannot write the store" in lines[0] else "read")
        else:
            assert done.returncode == 1, done.stderr
            assert len(after[0]) == len(before[0]) - 4
            outcomes.append("repaired")
        _assert_consistent(store)
    assert {"read", "write", "repaired"} <= set(outcomes), outcomes


def test_fill_session_round_trip(template_store: Path, tmp_path: Path) -> None:
    """The fixture builder stores lines exactly (the tests above rest on it)."""
    data = EXAMPLE.read_bytes()
    store, session_id = _store_for(template_store, tmp_path, data, compress={1, 2})
    assert _session_text(store, session_id, tmp_path) == data
    fill_session(store, session_id, [b'{"type":"session"}', b"not json"])
    assert _session_text(store, session_id, tmp_path) == b'{"type":"session"}\nnot json\n'
    shutil.rmtree(store.parent)


def test_row_with_a_line_break_is_scanned_not_rewritten(
    template_store: Path, tmp_path: Path
) -> None:
    """A row holding a line break (valid JSON to OpenClaw, two lines to a JSONL reader)
    is reported on the lines it makes, at its seq, and never rewritten row by row."""
    lines = transcript_lines(EXAMPLE.read_bytes())
    record = orjson.loads(lines[2])
    lines[2] = orjson.dumps(record, option=orjson.OPT_INDENT_2)
    store, session_id = _store_for(template_store, tmp_path, EXAMPLE.read_bytes())
    fill_session(store, session_id, lines)
    outcome = CliRunner().invoke(app, ["check", "--output-format", "json", str(store)], env=ENV)
    found = orjson.loads(outcome.stdout)
    assert {d["seq"] for d in found if d["code"] == "SF008"} == {2}
    before = _rows(store, session_id)
    refused = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert refused.exit_code == 2
    assert "holds a line break" in refused.stderr
    assert _rows(store, session_id) == before


def test_row_with_invalid_utf8_keeps_its_bytes(template_store: Path, tmp_path: Path) -> None:
    """Rows are read as bytes: a row holding bytes that are not UTF-8 is the line the
    file would hold, and a repair of other rows copies it untouched."""
    data = EXAMPLE.read_bytes().replace(b"Two things look urgent", b"Two things \xff urgent")
    store, session_id = _store_for(template_store, tmp_path, data)
    plain = tmp_path / "session.jsonl"
    plain.write_bytes(data)
    settings = Settings(quiescence=0.0)
    expected = check_file(plain, settings)
    found = next(iter(check_paths([store], settings))).diagnostics
    assert _located(found) == _located(expected)
    repaired = tmp_path / "repaired.jsonl"
    repair_to(plain, repaired, settings)
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    assert _session_text(store, session_id, tmp_path) == repaired.read_bytes()


def test_store_failing_its_integrity_check_is_reported(damaged: tuple[Path, str]) -> None:
    """The whole store is checked after a rewrite: a store whose (unrelated) index is
    broken is rewritten, then reported on one line with exit 2, naming the backup."""
    store, session_id = damaged
    db = apsw.Connection(str(store))
    db.execute("CREATE TABLE unrelated (x INTEGER); CREATE INDEX unrelated_x ON unrelated (x)")
    db.executemany("INSERT INTO unrelated VALUES (?)", [(k,) for k in range(20)])
    db.execute("PRAGMA writable_schema = ON")
    db.execute(
        "UPDATE sqlite_schema SET sql = 'CREATE INDEX unrelated_x ON unrelated (x DESC)' "
        "WHERE name = 'unrelated_x'"
    )
    db.close()
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 2
    (line,) = [line for line in outcome.stderr.splitlines() if "error:" in line]
    assert "failed SQLite's integrity check (row 1 missing from index unrelated_x)" in line
    (backup,) = store.parent.glob("*.sessionfix-bak-*")
    assert str(backup) in line
    assert len(_rows(store, session_id)) == len(transcript_lines(EXAMPLE.read_bytes())) - 4


# ---- found in review: links, bytes, gaps, several sessions, damaged archives ------------


def test_store_named_through_a_link_is_locked_and_backed_up_where_it_is(
    damaged: tuple[Path, str], tmp_path: Path
) -> None:
    """OpenClaw's lock and the backups follow the store's real path, not the name given."""
    store, _ = damaged
    link = tmp_path / "elsewhere"
    link.mkdir()
    (link / store.name).symlink_to(store)
    locks = store.parents[3] / "tmp" / f"openclaw-{os.getuid()}"
    locks.mkdir(parents=True)
    (locks / "gateway.state.lock").write_bytes(orjson.dumps({"pid": os.getpid()}))
    refused = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(link / store.name)], env=ENV
    )
    assert refused.exit_code == 2
    assert f"pid {os.getpid()}" in refused.stderr
    (locks / "gateway.state.lock").unlink()
    done = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(link / store.name)], env=ENV
    )
    assert done.exit_code == 1, done.output
    assert list(store.parent.glob("*.sessionfix-bak-*"))
    assert not list(link.glob("*.sessionfix-bak-*"))
    restored = CliRunner().invoke(app, ["restore", str(store)], env=ENV)
    assert restored.exit_code == 0, restored.output


def test_a_store_in_a_folder_whose_name_is_not_utf8_is_read_repaired_and_restored(
    template_store: Path, tmp_path: Path
) -> None:
    """A store whose path holds a byte that is not UTF-8 (a home folder named in
    Latin-1) is opened by its bytes: every command works on it as on any store, and the
    JSON report names it escaped (each command was internal error: UnicodeEncodeError,
    the path given to SQLite as UTF-8 text)."""
    built, session_id = _store_for(template_store, tmp_path / "jose", EXAMPLE.read_bytes())
    home = Path(os.fsdecode(bytes(tmp_path) + b"/jos\xe9"))
    (tmp_path / "jose").rename(home)
    store = home / built.relative_to(tmp_path / "jose")
    before = _all_rows(_linked_plainly(store, tmp_path), session_id)
    checked = CliRunner().invoke(app, ["check", "--output-format", "json", str(store)], env=ENV)
    assert checked.exit_code == 1, checked.output
    assert {d["filename"] for d in orjson.loads(checked.stdout)} == {
        str(store).replace("\udce9", "\\xe9")
    }
    for argv, code in (
        (["context", "--output-format", "json", str(store)], 0),
        (["repair", "--in-place", "--quiescence", "0", str(store)], 1),
        (["restore", "--list", "--output-format", "json", str(store)], 0),
        (["restore", str(store)], 0),
    ):
        outcome = CliRunner().invoke(app, argv, env=ENV)
        assert outcome.exit_code == code, (argv, outcome.output)
    assert len(list(store.parent.glob("*.sessionfix-bak-*"))) == 2
    assert _all_rows(_linked_plainly(store, tmp_path), session_id) == before


def _linked_plainly(store: Path, tmp_path: Path) -> Path:
    """A link with a UTF-8 name to the store's folder, for the tests' own reads of it."""
    link = tmp_path / "plain"
    if not link.exists():
        link.symlink_to(store.parent)
    return link / store.name


def test_rewritten_row_that_is_not_utf8_keeps_its_bytes(
    template_store: Path, tmp_path: Path
) -> None:
    """A row the repair changes (the child of a dropped clone, re-linked) is written back
    with its bytes as they are, valid UTF-8 or not."""
    data = EXAMPLE.read_bytes().replace(b'HEARTBEAT_OK"}]', b'HEARTBEAT_OK \xff\xfe"}]', 1)
    store, session_id = _store_for(template_store, tmp_path, data)
    plain = tmp_path / "session.jsonl"
    plain.write_bytes(data)
    repaired = tmp_path / "repaired.jsonl"
    repair_to(plain, repaired, Settings(quiescence=0.0))
    assert b"\xff\xfe" in repaired.read_bytes()
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    assert _session_text(store, session_id, tmp_path) == repaired.read_bytes()


def test_seqs_with_gaps(template_store: Path, tmp_path: Path) -> None:
    """Rows numbered with gaps are named by their own seq; after a rewrite (numbered
    from 0 again, as OpenClaw's own rewrite does) what is left is named by the new seq."""
    store, _ = _store_for(template_store, tmp_path, EXAMPLE.read_bytes())
    lines = transcript_lines(EXAMPLE.read_bytes())
    add_session(store, "gaps", EXAMPLE.read_bytes(), seqs=[3 * k for k in range(len(lines))])
    found = orjson.loads(
        CliRunner()
        .invoke(app, ["check", "--session", "gaps", "--output-format", "json", str(store)])
        .stdout
    )
    assert [(d["code"], d["seq"]) for d in found] == [
        ("SF201", 18),
        ("SF201", 21),
        ("SF202", 30),
        ("SF503", 33),
        ("SF108", 36),
    ]
    assert "entry a0000005 at seq 15" in found[0]["message"]
    outcome = CliRunner().invoke(
        app,
        [
            "repair",
            "--in-place",
            "--quiescence",
            "0",
            "--session",
            "gaps",
            "--output-format",
            "json",
            str(store),
        ],
        env=ENV,
    )
    left = orjson.loads(outcome.stdout)
    assert [(d["code"], d["seq"], d["location"]["row"]) for d in left] == [("SF503", 8, 9)]
    assert "compaction at seq 7" in left[0]["message"]


def test_several_sessions_go_on_past_one_that_fails(template_store: Path, tmp_path: Path) -> None:
    """A session that cannot be read is one error line; the sessions after it are still
    previewed and repaired, and a session named in a walk is looked for in every store."""
    store, first = _store_for(template_store, tmp_path, EXAMPLE.read_bytes())
    add_session(store, "m-broken", EXAMPLE.read_bytes())
    add_session(store, "z-last", EXAMPLE.read_bytes())
    db = apsw.Connection(str(store))
    with db:
        db.execute(
            "UPDATE transcript_events SET event_json = NULL, event_zstd = ?, "
            "event_utf8_bytes = 5, navigation_json = ? WHERE session_id = 'm-broken' AND seq = 1",
            (zstandard.ZstdCompressor().compress(b"{}"), NAVIGATION),
        )
    db.close()
    diff = CliRunner().invoke(app, ["repair", "--diff", str(store)], env=ENV)
    assert diff.exit_code == 2
    assert diff.stdout.count("+++ b/") == 2
    assert "z-last" in diff.stdout
    done = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert done.exit_code == 2
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert "m-broken" in errors[0]
    assert "holds 2 bytes, not the 5 it records" in errors[0]
    assert len(_rows(store, "z-last")) == len(transcript_lines(EXAMPLE.read_bytes())) - 4
    assert len(_rows(store, first)) == len(transcript_lines(EXAMPLE.read_bytes())) - 4
    _store_for(template_store, tmp_path / "other", EXAMPLE.read_bytes())
    walk = CliRunner().invoke(
        app, ["scan", "--session", "z-last", "--output-format", "json", str(tmp_path)], env=ENV
    )
    assert walk.exit_code == 1, walk.output  # SF503 is left: it has no fix
    assert {d["session_id"] for d in orjson.loads(walk.stdout)} == {"z-last"}
    nowhere = CliRunner().invoke(app, ["scan", "--session", "nope", str(tmp_path)], env=ENV)
    assert nowhere.exit_code == 2
    assert "no session 'nope' in any session store read" in nowhere.stderr


def _archive_cold(store: Path, session_id: str, archive: bytes) -> None:
    """Move the session's rows out to `archive`, kept in the store as a blob."""
    digest = hashlib.sha256(archive).hexdigest()
    db = apsw.Connection(str(store))
    with db:
        db.execute("DELETE FROM transcript_events WHERE session_id = ?", (session_id,))
        db.execute(
            "INSERT INTO session_transcript_cold_archives (session_id, generation, archive_name, "
            "archive_sha256, event_count, raw_bytes, archive_bytes, last_seq, archived_at, "
            "storage, archive_blob) VALUES (?, ?, ?, ?, 1, 1, ?, 0, 1, 'sqlite', ?)",
            (session_id, "0" * 32, f"{digest}.jsonl.zst", digest, len(archive), archive),
        )
    db.close()


def test_corrupt_cold_archive_is_one_line(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    _archive_cold(store, session_id, b"\x28\xb5\x2f\xfd" + b"garbage that is no zstd frame" * 4)
    outcome = CliRunner().invoke(app, ["check", str(store)], env=ENV)
    assert outcome.exit_code == 2
    (line,) = outcome.stderr.strip().splitlines()
    assert "cold archive does not decompress" in line


def test_restore_takes_the_newest_intact_backup(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    before = _rows(store, session_id)
    CliRunner().invoke(app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV)
    CliRunner().invoke(app, ["restore", str(store)], env=ENV)
    newest = sorted(store.parent.glob("*.sessionfix-bak-*"))[-1]
    db = apsw.Connection(str(newest))
    with db:
        db.execute("UPDATE events SET created_at = created_at + 1 WHERE seq = 3")
    db.close()
    CliRunner().invoke(app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV)
    CliRunner().invoke(app, ["restore", str(store)], env=ENV)
    assert _rows(store, session_id) == before


def test_quoted_session_text_is_not_renumbered(damaged: tuple[Path, str]) -> None:
    store, session_id = damaged
    lines = transcript_lines(EXAMPLE.read_bytes())
    lines = [line.replace(b'"targetId":"deadbeef"', b'"targetId":"see line 3"') for line in lines]
    fill_session(store, session_id, lines)
    found = orjson.loads(
        CliRunner().invoke(app, ["check", "--output-format", "json", str(store)]).stdout
    )
    (label,) = [d for d in found if d["code"] == "SF108"]
    assert "'see line 3'" in label["message"]


# ---- hostile stores: schemas, foreign keys, triggers, bombs, damage, interrupts ----------


def _all_rows(store: Path, session_id: str) -> list[tuple[Any, ...]]:
    """Every column of every row of the session, each value by its type and bytes (text
    that is not UTF-8 included)."""
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        columns = [row[1] for row in db.execute("PRAGMA table_info(transcript_events)")]
        values = ", ".join(f'typeof("{c}"), hex("{c}")' for c in columns)
        return db.execute(
            f"SELECT {values} FROM transcript_events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        ).fetchall()
    finally:
        db.close()


def _one_line_refusal(store: Path, argv: list[str]) -> str:
    """`argv` on the store exits 2 with one error line (and at most `scan`'s note) and
    changes nothing."""
    before = _digest(store)
    outcome = CliRunner().invoke(app, argv, env=ENV)
    assert outcome.exit_code == 2, outcome.output
    lines = [line for line in outcome.stderr.splitlines() if not line.startswith("Scanned ")]
    assert len(lines) == 1, outcome.stderr
    assert "Traceback" not in outcome.output
    assert "internal error" not in outcome.stderr
    assert _digest(store) == before
    return lines[0]


def _set_versions(store: Path, header: int, recorded: int) -> None:
    db = apsw.Connection(str(store))
    try:
        with db:
            db.execute(
                "UPDATE schema_meta SET schema_version = ? WHERE role = 'agent'", (recorded,)
            )
        db.execute(f"PRAGMA user_version = {header}")
    finally:
        db.close()


def _add_column(store: Path, session_id: str) -> list[Any]:
    """A column sessionfix does not know, `origin`, holding a value in every row of the
    session (text and bytes, some text not UTF-8); returns them in seq order."""
    db = apsw.Connection(str(store))
    try:
        with db:
            db.execute("ALTER TABLE transcript_events ADD COLUMN origin ANY")
            seqs = [
                row[0]
                for row in db.execute(
                    "SELECT seq FROM transcript_events WHERE session_id = ? ORDER BY seq",
                    (session_id,),
                )
            ]
            for seq in seqs:
                value = (
                    f"CAST(x'ff{0x41 + seq:02x}' AS TEXT)",  # text that is not UTF-8
                    f"x'{seq:04x}'",
                    f"'origin {seq}'",
                )[seq % 3]
                db.execute(
                    f"UPDATE transcript_events SET origin = {value} "
                    "WHERE session_id = ? AND seq = ?",
                    (session_id, seq),
                )
        return [
            row[0]
            for row in db.execute(
                "SELECT typeof(origin) || ':' || hex(origin) FROM transcript_events "
                "WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        ]
    finally:
        db.close()


@pytest.mark.parametrize(
    ("header", "recorded", "said"),
    [
        (24, 24, "schema version 24 is not one sessionfix knows"),
        (22, 22, "schema version 22 is older than OpenClaw 2026.9's (23)"),
        (24, 23, "schema versions disagree (24 in its header, 23 in schema_meta)"),
    ],
)
def test_a_schema_it_does_not_know_is_refused_by_every_command(
    damaged: tuple[Path, str], header: int, recorded: int, said: str
) -> None:
    """A store of another agent schema (a newer OpenClaw's, with a column more) may hold
    its events otherwise: every command refuses it on one line, reading nothing wrong
    and writing nothing."""
    store, session_id = damaged
    _add_column(store, session_id)
    _set_versions(store, header, recorded)
    for argv in (
        ["check", str(store)],
        ["scan", str(store.parents[3])],
        ["context", str(store)],
        ["repair", "--diff", str(store)],
        ["repair", "--in-place", "--quiescence", "0", str(store)],
        ["restore", str(store)],
    ):
        line = _one_line_refusal(store, argv)
        assert said in line, line
        assert str(store) in line
    assert not list(store.parent.glob("*.sessionfix-bak-*"))


def test_every_column_of_every_kept_row_is_kept_and_backed_up(
    damaged: tuple[Path, str],
) -> None:
    """A column the rewrite does not know keeps its value, as stored, in every row the
    repair keeps, changed or not (a changed row keeps its row's); the backup holds it
    for every row, and a restore puts every value back."""
    store, session_id = damaged
    before = _all_rows(store, session_id)
    origins = dict(zip(_event_ids(store, session_id), _add_column(store, session_id), strict=True))
    with_origin = _all_rows(store, session_id)
    assert with_origin != before
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    kept = _kept_origins(store, session_id)
    assert len(kept) == len(before) - 4
    assert all(origins[event_id] == origin for event_id, origin in kept), kept
    (backup,) = store.parent.glob("*.sessionfix-bak-*")
    db = apsw.Connection(str(backup), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        backed_up = [
            row[0]
            for row in db.execute(
                "SELECT typeof(origin) || ':' || hex(origin) FROM events ORDER BY seq"
            )
        ]
    finally:
        db.close()
    assert backed_up == list(origins.values())
    restored = CliRunner().invoke(app, ["restore", str(store)], env=ENV)
    assert restored.exit_code == 0, restored.output
    assert _all_rows(store, session_id) == with_origin
    _assert_consistent(store)


def _event_ids(store: Path, session_id: str) -> list[str]:
    return [
        orjson.loads(line)["id"]
        for line in transcript_lines(_session_text(store, session_id, store))
    ]


def _kept_origins(store: Path, session_id: str) -> list[tuple[str, str]]:
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        origins = [
            row[0]
            for row in db.execute(
                "SELECT typeof(origin) || ':' || hex(origin) FROM transcript_events "
                "WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
        ]
    finally:
        db.close()
    return list(zip(_event_ids(store, session_id), origins, strict=True))


UNKNOWN_WRITERS = {
    "cascade": (
        "CREATE TABLE notes (session_id TEXT NOT NULL, seq INTEGER NOT NULL, note TEXT, "
        "FOREIGN KEY (session_id, seq) REFERENCES transcript_events (session_id, seq) "
        "ON DELETE CASCADE);"
        "INSERT INTO notes SELECT session_id, seq, 'note ' || seq FROM transcript_events;",
        "table notes refers to transcript_events by a foreign key sessionfix does not know",
    ),
    "trigger": (
        "CREATE TABLE notes (note TEXT);"
        "INSERT INTO notes VALUES ('kept');"
        "CREATE TRIGGER forget AFTER DELETE ON transcript_events BEGIN DELETE FROM notes; END;",
        "trigger forget on transcript_events is not one sessionfix knows",
    ),
    "trigger on the search index": (
        "CREATE TABLE notes (note TEXT);"
        "INSERT INTO notes VALUES ('kept');"
        "CREATE TRIGGER forget AFTER DELETE ON session_transcript_fts_rows "
        "BEGIN DELETE FROM notes; END;",
        "trigger forget on session_transcript_fts_rows is not one sessionfix knows",
    ),
    "update cascade": (
        "CREATE UNIQUE INDEX windows_updated ON session_windows (transcript_updated_at);"
        "CREATE TABLE notes (updated INTEGER REFERENCES session_windows (transcript_updated_at) "
        "ON UPDATE CASCADE, note TEXT);"
        "INSERT INTO notes SELECT transcript_updated_at, 'kept' FROM session_windows;",
        "table notes refers to session_windows by a foreign key sessionfix does not know",
    ),
}


@pytest.mark.parametrize("kind", UNKNOWN_WRITERS, ids=list(UNKNOWN_WRITERS))
def test_a_foreign_key_or_trigger_it_does_not_know_refuses_the_rewrite(
    damaged: tuple[Path, str], kind: str
) -> None:
    """A table that refers to the rewritten rows with ON DELETE CASCADE, or a trigger
    on a rewritten table, would lose or change rows elsewhere with the session's: the
    rewrite (and a restore) is refused on one line; a read is not."""
    store, session_id = damaged
    schema, said = UNKNOWN_WRITERS[kind]
    db = apsw.Connection(str(store))
    db.execute(schema)
    notes = db.execute("SELECT * FROM notes").fetchall()
    db.close()
    assert notes
    before = _state(store, session_id)
    line = _one_line_refusal(store, ["repair", "--in-place", "--quiescence", "0", str(store)])
    assert said in line, line
    assert "nothing changed" in line
    assert _state(store, session_id) == before
    assert not list(store.parent.glob("*.sessionfix-bak-*"))
    checked = CliRunner().invoke(app, ["check", str(store)], env=ENV)
    assert checked.exit_code == 1, checked.output
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    assert db.execute("SELECT * FROM notes").fetchall() == notes
    db.close()


BOMB = 1 << 30
"""What the hostile row expands to: 1 GiB."""
MEMORY_LIMIT = 1 << 30
"""The address space a run on it is given: the expansion cannot fit."""


def _bomb() -> bytes:
    """About 32 KiB of zstd that expands to `BOMB` bytes, made in 1 MiB steps."""
    packer = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(1 << 20)
    packed = b"".join(packer.compress(zeros) for _ in range(BOMB >> 20)) + packer.flush()
    assert len(packed) < 64 << 10
    return packed


def test_a_compressed_row_that_expands_without_bound_is_one_line(
    damaged: tuple[Path, str],
) -> None:
    """A small compressed row that records 100 bytes and expands to 1 GiB is read no
    further than its size: one line, the same as any row that does not hold what it
    records, in a run whose memory could not hold the expansion."""
    store, session_id = damaged
    db = apsw.Connection(str(store))
    with db:
        db.execute(
            "UPDATE transcript_events SET event_json = NULL, event_zstd = ?, "
            "event_utf8_bytes = 100, navigation_json = ? WHERE session_id = ? AND seq = 2",
            (_bomb(), NAVIGATION, session_id),
        )
    db.close()
    before = _digest(store)
    done = _check_in_little_memory(store)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"session {session_id}, seq 2: the compressed row expands past the 100 bytes" in line
    assert _digest(store) == before


def _check_in_little_memory(store: Path) -> subprocess.CompletedProcess[str]:
    """`sessionfix check STORE` in a process whose address space holds `MEMORY_LIMIT`."""
    script = (
        "import resource, sys, runpy;"
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}));"
        f"sys.argv = ['sessionfix', 'check', '--no-progress', {str(store)!r}];"
        "runpy.run_module('sessionfix', run_name='__main__')"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV},
        timeout=120,
        check=False,
    )


def test_a_cold_archive_that_expands_without_bound_is_one_line(
    damaged: tuple[Path, str],
) -> None:
    """A cold archive of 32 KiB that expands to 1 GiB on one line is read no further than
    a compressed session file may expand: one line, in a run whose memory could not hold
    the expansion, and the store as it was."""
    store, session_id = damaged
    _archive_cold(store, session_id, _bomb())
    before = _digest(store)
    done = _check_in_little_memory(store)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert f"session {session_id}'s cold archive decompresses to more than" in line, line
    assert _digest(store) == before


def test_a_store_whose_events_index_misses_rows_is_refused(damaged: tuple[Path, str]) -> None:
    """Rows missing from the events' index are missed by every read through it: a
    repair would drop what refers to them and write their seqs again. The store is
    refused on one line by reads and rewrites alike, and left as it is."""
    store, session_id = damaged
    hide_from_index(store, session_id, [4, 5])
    for argv in (
        ["check", str(store)],
        ["repair", "--in-place", "--quiescence", "0", str(store)],
    ):
        line = _one_line_refusal(store, argv)
        assert (
            "events' index sqlite_autoindex_transcript_events_1 holds 13 entries for 15 rows"
            in line
        ), line
    assert not list(store.parent.glob("*.sessionfix-bak-*"))


def _bytes_read() -> int:
    """What this process has read from files so far (`rchar`: SQLite's preads too)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_reads_go_through_the_events_key_alone(damaged: tuple[Path, str]) -> None:
    """An index a store added on the events (here partial, covering a read, and missing
    rows: it was built for seq < 5 and its schema then says otherwise) is never read
    through: SQLite took it for the session's rows, the check saw 5 of 15 rows and
    passed the session, and neither SQLite's quick check nor the count of the key's
    entries tells that such an index misses rows."""
    store, _ = damaged

    def found() -> list[tuple[str, int]]:
        outcome = CliRunner().invoke(app, ["check", "--output-format", "json", str(store)], env=ENV)
        assert outcome.exit_code == 1, outcome.output
        return [(d["code"], d["seq"]) for d in orjson.loads(outcome.stdout)]

    before = found()
    db = apsw.Connection(str(store))
    db.execute(
        "CREATE INDEX added ON transcript_events (session_id, seq, created_at, event_json, "
        "event_zstd, event_utf8_bytes) WHERE session_id IS NOT NULL AND seq < 5"
    )
    version = db.execute("PRAGMA schema_version").fetchone()[0]
    db.execute("PRAGMA writable_schema = ON")
    with db:
        db.execute(
            "UPDATE sqlite_schema SET sql = replace(sql, ' AND seq < 5', '') WHERE name = 'added'"
        )
    db.execute(f"PRAGMA schema_version = {version + 1}")
    db.close()
    assert found() == before


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts reads by /proc/self/io")
def test_reading_one_session_reads_not_the_rows_of_every_other(
    damaged: tuple[Path, str],
) -> None:
    """The check that the events' index shows every row costs a walk of the table's
    leaves, not a read of every row: a session read from a store whose other session
    holds 16 MiB of large rows reads a small part of them (SQLite's quick check read
    them all, in tree order: 10 s for a 700 MiB store not in the page cache, where the
    session alone took 0.7 s)."""
    store, session_id = damaged
    large = b"\n".join(
        orjson.dumps({"type": "custom", "id": f"l{k:07d}", "data": "x" * (256 << 10)})
        for k in range(64)
    )
    add_session(store, "large-rows", large + b"\n")
    before = _bytes_read()
    outcome = CliRunner().invoke(
        app, ["check", "--no-progress", "--session", session_id, str(store)], env=ENV
    )
    read = _bytes_read() - before
    assert outcome.exit_code == 1, outcome.output
    assert read < 4 << 20, f"{read:,} bytes read"


def test_a_compressed_row_that_records_more_than_it_may_expand_to_is_one_line(
    damaged: tuple[Path, str],
) -> None:
    """A compressed row that records a size no compressed session may expand to from its
    bytes (a terabyte from 20 bytes; OpenClaw's table admits 4 MiB, and a read-only
    check does not look at that) is refused on one line before it is decompressed: the
    read had asked for a buffer of the size recorded, internal error: MemoryError."""
    store, session_id = damaged
    db = apsw.Connection(str(store))
    db.execute("PRAGMA ignore_check_constraints = ON")
    with db:
        db.execute(
            "UPDATE transcript_events SET event_utf8_bytes = ? WHERE session_id = ? AND seq = 3",
            (1 << 40, session_id),
        )
    db.close()
    for argv in (["check", str(store)], ["context", str(store)]):
        line = _one_line_refusal(store, argv)
        assert (
            f"session {session_id}, seq 3: the compressed row records 1,099,511,627,776 bytes"
            in line
        ), line


LOOSE_VALUES = {
    "created_at NULL": ("created_at = NULL", 2, "the row's seq or created_at is not an integer"),
    "created_at text": ("created_at = 'noon'", 2, "the row's seq or created_at is not an integer"),
    "event_zstd text": ("event_zstd = 'abc'", 3, "the row's compressed event is not a blob"),
}


@pytest.mark.parametrize("kind", LOOSE_VALUES, ids=list(LOOSE_VALUES))
def test_a_row_of_a_type_its_strict_column_refuses_is_one_line(
    damaged: tuple[Path, str], kind: str
) -> None:
    """A row holding what its column's type refuses (written with the table's schema
    loosened, as only a damaged store holds it) is one line naming it, never an
    internal error."""
    store, session_id = damaged
    assignment, seq, said = LOOSE_VALUES[kind]
    db = apsw.Connection(str(store))
    try:
        db.execute("PRAGMA foreign_keys = OFF")
        (table,) = db.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'transcript_events'"
        ).fetchone()
        loose = table.replace("created_at INTEGER NOT NULL", "created_at").replace(") STRICT", ")")
        for sql in (loose, table):
            version = db.execute("PRAGMA schema_version").fetchone()[0]
            db.execute("PRAGMA writable_schema = ON")
            with db:
                db.execute(
                    "UPDATE sqlite_schema SET sql = ? WHERE name = 'transcript_events'", (sql,)
                )
            db.execute(f"PRAGMA schema_version = {version + 1}")
            db.execute("PRAGMA writable_schema = OFF")
            if sql == loose:
                with db:
                    db.execute(
                        f"UPDATE transcript_events SET {assignment} "
                        "WHERE session_id = ? AND seq = ?",
                        (session_id, seq),
                    )
    finally:
        db.close()
    for argv in (["check", str(store)], ["context", str(store)]):
        line = _one_line_refusal(store, argv)
        assert f"session {session_id}, seq {seq}: {said}" in line, line


def _renamed_session(store: Path, session_id: str, name: str) -> None:
    """Give the session the id `name` (an SQL expression) in every table that names it."""
    db = apsw.Connection(str(store))
    try:
        db.execute("PRAGMA foreign_keys = OFF")
        with db:
            for (table,) in db.execute(
                "SELECT m.name FROM sqlite_schema AS m, pragma_table_info(m.name) AS c "
                "WHERE m.type = 'table' AND c.name = 'session_id'"
            ).fetchall():
                db.execute(
                    f"UPDATE {table} SET session_id = {name} WHERE session_id = ?", (session_id,)
                )
    finally:
        db.close()


def test_a_session_id_that_is_not_utf8_is_one_line(damaged: tuple[Path, str]) -> None:
    """A session id stored as text that is not UTF-8 (SQLite keeps any bytes; OpenClaw
    reads them as other text and cannot name the session): every command says so on one
    line, where reading it was internal error: UnicodeDecodeError."""
    store, session_id = damaged
    _renamed_session(store, session_id, "CAST(x'41ff42' AS TEXT)")
    for argv in (
        ["check", str(store)],
        ["context", str(store)],
        ["repair", "--in-place", "--quiescence", "0", str(store)],
        ["restore", str(store)],
    ):
        line = _one_line_refusal(store, argv)
        assert "a session id is not UTF-8 text (b'A\\xffB')" in line, line


def test_a_session_key_that_is_not_utf8_is_read(damaged: tuple[Path, str]) -> None:
    """A session key (only shown) stored as text that is not UTF-8 is read with the bytes
    replaced; the session is checked as any other."""
    store, session_id = damaged
    db = apsw.Connection(str(store))
    with db:
        db.execute("PRAGMA foreign_keys = OFF")
        db.execute(
            "UPDATE session_windows SET session_key = CAST(x'6bff' AS TEXT) WHERE session_id = ?",
            (session_id,),
        )
    db.close()
    with open_store(store) as opened:
        (session,) = opened.sessions()
    assert (session.id, session.key) == (session_id, "k\ufffd")
    checked = CliRunner().invoke(app, ["check", str(store)], env=ENV)
    assert checked.exit_code == 1, checked.output


def test_a_backup_whose_record_is_not_utf8_is_damaged(damaged: tuple[Path, str]) -> None:
    """A backup whose record holds text that is not UTF-8 is listed as damaged and not
    restored: reading its record was internal error: UnicodeDecodeError, for `restore
    --list` as for `restore`."""
    store, _ = damaged
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    (backup,) = store.parent.glob("*.sessionfix-bak-*")
    db = apsw.Connection(str(backup))
    with db:
        db.execute("UPDATE meta SET value = CAST(x'41ff' AS TEXT) WHERE key = 'taken'")
    db.close()
    listing = CliRunner().invoke(
        app, ["restore", "--list", "--output-format", "json", str(store)], env=ENV
    )
    assert listing.exit_code == 0, listing.output
    assert [b["status"] for b in orjson.loads(listing.stdout)] == ["damaged"]
    line = _one_line_refusal(store, ["restore", str(store)])
    assert "no sessionfix backup of session" in line, line


def test_a_cold_archive_record_that_is_not_utf8_is_one_line(damaged: tuple[Path, str]) -> None:
    """A cold archive whose name is stored as text that is not UTF-8: one line, where
    reading it was internal error: UnicodeDecodeError."""
    store, session_id = damaged
    _archive_cold(store, session_id, zstandard.ZstdCompressor().compress(b"{}\n"))
    db = apsw.Connection(str(store))
    with db:
        db.execute("UPDATE session_transcript_cold_archives SET archive_name = CAST(x'ff' AS TEXT)")
    db.close()
    line = _one_line_refusal(store, ["check", str(store)])
    assert "its cold archive's record holds text that is not UTF-8" in line, line


def test_a_store_whose_touched_tables_fail_the_integrity_check_is_not_written(
    damaged: tuple[Path, str],
) -> None:
    """An index of a table the rewrite writes (the event identities') that does not
    match its rows: read as it is (the events are sound), never written."""
    store, session_id = damaged
    db = apsw.Connection(str(store))
    db.execute("PRAGMA writable_schema = ON")
    db.execute(
        "UPDATE sqlite_schema SET sql = replace(sql, '(session_id, seq)', "
        "'(session_id, seq DESC)') WHERE name = 'idx_agent_transcript_event_identity_sequence'"
    )
    db.close()
    checked = CliRunner().invoke(app, ["check", str(store)], env=ENV)
    assert checked.exit_code == 1, checked.output
    before = _state(store, session_id)
    line = _one_line_refusal(store, ["repair", "--in-place", "--quiescence", "0", str(store)])
    assert "the store fails SQLite's integrity check (" in line, line
    assert "idx_agent_transcript_event_identity_sequence" in line
    assert _state(store, session_id) == before
    assert not list(store.parent.glob("*.sessionfix-bak-*"))


def test_the_database_file_itself_holds_the_repair(
    damaged: tuple[Path, str], tmp_path: Path
) -> None:
    """The rewrite is checkpointed into the database file when it is committed: a copy
    of the file alone (as a backup tool takes it) holds the repair, not the rows before."""
    store, session_id = damaged
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    repaired = _rows(store, session_id)
    alone = tmp_path / "alone" / store.name
    alone.parent.mkdir()
    shutil.copyfile(store, alone)
    assert _rows(alone, session_id) == repaired


def test_a_hot_journal_is_refused_clearly_and_left_alone(
    template_store: Path, tmp_path: Path
) -> None:
    """A store in rollback-journal mode whose writer died mid-transaction (its journal
    hot, its database file part-written) cannot be read without rolling the journal
    back, which a read never does: one line saying so, the files left as they are."""
    store, _ = _store_for(template_store, tmp_path, EXAMPLE.read_bytes())
    db = apsw.Connection(str(store))
    db.execute("PRAGMA journal_mode = DELETE")
    db.close()
    pid = os.fork()
    if pid == 0:
        try:
            writer = apsw.Connection(str(store))
            writer.execute("PRAGMA cache_size = 1")
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("CREATE TABLE filler (data BLOB)")
            writer.execute("INSERT INTO filler VALUES (zeroblob(4000000))")
            writer.execute("UPDATE transcript_events SET created_at = created_at + 1")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    journal = store.with_name(store.name + "-journal")
    assert journal.stat().st_size > 0
    for argv in (["check", str(store)], ["context", str(store)]):
        line = _one_line_refusal(store, argv)
        assert "has a hot journal (a write to it was cut short)" in line, line
        assert "open it with OpenClaw or sqlite3 first" in line
    assert journal.exists()


# ---- an interrupt anywhere: the backup is kept whenever the rows are the rewrite ---------


def _backup_rows(backup: Path) -> list[tuple[Any, ...]]:
    """A backup's rows as `_all_rows` shows a session's, less its `session_id`."""
    db = apsw.Connection(str(backup), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        columns = [row[1] for row in db.execute("PRAGMA table_info(events)")]
        values = ", ".join(f'typeof("{c}"), hex("{c}")' for c in columns)
        return db.execute(f"SELECT {values} FROM events ORDER BY seq").fetchall()
    finally:
        db.close()


def _interrupted(argv: list[str], at: int | None) -> tuple[int, int]:
    """Run `argv` in a forked child that sends itself SIGINT at its `at`-th point: before
    each SQL statement any of its connections runs, and as each commit to a write-ahead
    log completes (SQLite's WAL hook, inside COMMIT, once the commit is made). Returns
    the child's exit status and how many points it passed."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.close(read)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            count = 0

            def point() -> None:
                nonlocal count
                count += 1
                if count == at:
                    os.kill(os.getpid(), signal.SIGINT)

            def traced(*_: object) -> bool:
                point()
                return True

            def committed(*_: object) -> int:
                point()
                return apsw.SQLITE_OK

            def hooked(connection: apsw.Connection) -> None:
                connection.exec_trace = traced
                connection.set_wal_hook(committed)

            apsw.connection_hooks.append(hooked)
            code = main(argv)
            os.write(write, f"{count}\n".encode())
        finally:
            os._exit(code)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    return status, int(said) if said else 0


def _sweep(argv: list[str], fresh: Any, judge: Any) -> dict[str, int]:
    """Run `argv` uninterrupted, then interrupted at each of its points in turn, on a
    fresh state each time; `judge` names what each run left."""
    fresh()
    status, points = _interrupted(argv, None)
    assert os.WIFEXITED(status), status
    assert points >= 50
    outcomes: dict[str, int] = {}
    for at in range(1, points + 1):
        fresh()
        status, _ = _interrupted(argv, at)
        assert os.WIFEXITED(status), f"point {at}: {status}"
        assert os.WEXITSTATUS(status) in (1, 2), f"point {at}: exit {os.WEXITSTATUS(status)}"
        outcome = judge(at)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_an_interrupt_anywhere_keeps_the_backup_of_a_rewrite(
    template_store: Path, tmp_path: Path
) -> None:
    """SIGINT at every point of `repair --in-place` (COMMIT included) and of `restore`:
    the session's rows are those before or those of the rewrite; whenever they are the
    rewrite, the backup of the rows it replaced exists, intact; whenever they are not,
    no backup is left of a rewrite that never was."""
    work = tmp_path / "work"
    store = work / "state" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    data = EXAMPLE.read_bytes()

    def fresh_store() -> None:
        shutil.rmtree(work, ignore_errors=True)
        store_from_file(template_store, store, data, compress={3})

    fresh_store()
    session_id = store_session(store)
    before = _all_rows(store, session_id)
    repair = ["repair", "--in-place", "--no-progress", "--quiescence", "0", str(store)]
    assert main(repair) == 1
    repaired = _all_rows(store, session_id)
    (first,) = store.parent.glob("*.sessionfix-bak-*")
    golden = tmp_path / "golden"
    golden.mkdir()
    _copy_database(store, golden / store.name)
    shutil.copyfile(first, golden / first.name)

    def judge_repair(at: int) -> str:
        rows = _all_rows(store, session_id)
        backups = list(store.parent.glob("*.sessionfix-bak-*"))
        _assert_consistent(store)
        if rows == before:
            assert backups == [], f"point {at}: a backup of no rewrite"
            return "before"
        assert rows == repaired, f"point {at}: the rows are neither"
        assert len(backups) == 1, f"point {at}: the rows are the repair, the backup is gone"
        assert _backup_rows(backups[0]) == [row[2:] for row in before], f"point {at}"
        return "rewritten"

    outcomes = _sweep(repair, fresh_store, judge_repair)
    assert set(outcomes) == {"before", "rewritten"}, outcomes

    def repaired_store() -> None:
        shutil.rmtree(work, ignore_errors=True)
        store.parent.mkdir(parents=True)
        _copy_database(golden / store.name, store)
        shutil.copyfile(golden / first.name, first)

    def judge_restore(at: int) -> str:
        rows = _all_rows(store, session_id)
        backups = set(store.parent.glob("*.sessionfix-bak-*"))
        _assert_consistent(store)
        if rows == repaired:
            assert backups == {first}, f"point {at}: a backup of no restore"
            return "before"
        assert rows == before, f"point {at}: the rows are neither"
        kept = backups - {first}
        assert len(kept) == 1, f"point {at}: the rows are restored, the backup is gone"
        assert _backup_rows(kept.pop()) == [row[2:] for row in repaired], f"point {at}"
        return "rewritten"

    restore = ["restore", str(store)]
    outcomes = _sweep(restore, repaired_store, judge_restore)
    assert set(outcomes) == {"before", "rewritten"}, outcomes


def _copy_database(source: Path, destination: Path) -> None:
    """A copy of a database, whatever its write-ahead log holds (SQLite's backup API)."""
    db = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        out = apsw.Connection(str(destination))
        try:
            with out.backup("main", db, "main") as backup:
                backup.step()
        finally:
            out.close()
    finally:
        db.close()


def test_a_backup_of_the_six_columns_is_still_restored(damaged: tuple[Path, str]) -> None:
    """A backup written before backups recorded their columns (the six of schema 23, the
    event as bytes) is still verified and restored, bytes and types as they were."""
    store, session_id = damaged
    before = _all_rows(store, session_id)
    source = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    original = source.execute(
        "SELECT seq, CAST(event_json AS BLOB), created_at, event_zstd, event_utf8_bytes, "
        "navigation_json FROM transcript_events WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ).fetchall()
    source.close()
    outcome = CliRunner().invoke(
        app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV
    )
    assert outcome.exit_code == 1, outcome.output
    (backup,) = store.parent.glob("*.sessionfix-bak-*")
    backup.unlink()
    old = apsw.Connection(str(backup))
    with old:
        old.execute(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) STRICT;"
            "CREATE TABLE events (seq INTEGER PRIMARY KEY, event_json BLOB, "
            "created_at INTEGER NOT NULL, event_zstd BLOB, event_utf8_bytes INTEGER, "
            "navigation_json TEXT)"
        )
        old.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", original)
        digest = xxhash.xxh3_64()
        for row in original:
            digest.update(orjson.dumps([v.hex() if isinstance(v, bytes) else v for v in row]))
        old.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [
                ("session_id", session_id),
                ("store", str(store)),
                ("taken", "2026-11-01T00:00:00+00:00"),
                ("rows", str(len(original))),
                ("digest", digest.hexdigest()),
            ],
        )
    old.close()
    listing = CliRunner().invoke(
        app, ["restore", "--list", "--output-format", "json", str(store)], env=ENV
    )
    assert [b["status"] for b in orjson.loads(listing.stdout)] == ["ok"]
    restored = CliRunner().invoke(app, ["restore", str(store)], env=ENV)
    assert restored.exit_code == 0, restored.output
    assert _all_rows(store, session_id) == before
    _assert_consistent(store)


def test_the_library_lists_and_restores_a_stores_session(damaged: tuple[Path, str]) -> None:
    """`run_restore` dispatches a store to the store's own backups: the same listing and
    notes the command prints."""
    store, session_id = damaged
    before = _rows(store, session_id)
    CliRunner().invoke(app, ["repair", "--in-place", "--quiescence", "0", str(store)], env=ENV)
    listing = run_restore(RestoreRequest(store, list_only=True))
    assert isinstance(listing, BackupListing)
    assert listing.stored is not None
    assert [(b.session_id, b.rows) for b in listing.stored] == [(session_id, len(before))]
    printed = CliRunner().invoke(app, ["restore", "--list", str(store)], env=ENV)
    assert printed.stdout_bytes == backup_listing(listing, as_json=False)
    none = run_restore(RestoreRequest(store, list_only=True, store_session="elsewhere"))
    assert isinstance(none, BackupListing)
    assert listing_note(none) == f"{store}: no sessionfix backup of session elsewhere beside it."
    done = run_restore(RestoreRequest(store))
    assert isinstance(done, RestoreDone)
    assert _rows(store, session_id) == before
    assert restore_note(done) == (
        f"Restored session {session_id} of {store} from {listing.stored[0].path.name}."
    )


def test_slim_counts_a_store_session_as_openclaw_loads_it(
    template_store: Path, tmp_path: Path
) -> None:
    """A session whose header is version 2 pi's file reader loads, and OpenClaw's store
    refuses until its doctor migrates it: slim counts what OpenClaw loads, nothing, and
    so writes nothing and says why."""
    lines = pi_session(tmp_path / "s.jsonl").read_bytes().split(b"\n", 1)
    data = lines[0].replace(b'"version":3', b'"version":2') + b"\n" + lines[1]
    store, _ = _store_for(template_store, tmp_path, data)
    before = store_digest(store)
    args = ["slim", "--in-place", "--quiescence", "0", "--budget", str(BUDGET), str(store)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "OpenClaw refuses a session whose header is version 2" in result.stderr
    assert "repair it before slimming it" in result.stderr
    assert store_digest(store) == before


def test_a_size_limit_is_refused_for_a_store_session(template_store: Path, tmp_path: Path) -> None:
    """A session in the store has no bytes of its own that a slim could bring under a
    size (the database keeps its pages; the bytes counted would be sessionfix's reading
    of its rows): `--max-size` is refused in one line, whatever the size and however the
    slim would write, and `context --after-slim` refuses it the same way; the store is
    left as it was."""
    store, _ = _store_for(template_store, tmp_path, pi_session(tmp_path / "s.jsonl").read_bytes())
    before = store_digest(store)
    said = "--max-size limits a session file's bytes"
    for how in (("--in-place",), ("--diff",), ("-o", str(tmp_path / "out.jsonl"))):
        for limits in (("--max-size", "10GB"), ("--budget", str(BUDGET), "--max-size", "1MB")):
            args = ["slim", *how, "--quiescence", "0", *limits, str(store)]
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 2, result.stderr
            assert said in result.stderr
            assert not (tmp_path / "out.jsonl").exists()
    args = ["context", "--after-slim", "--max-size", "10GB", str(store)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert said in result.stderr
    assert store_digest(store) == before
