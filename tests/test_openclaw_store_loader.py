"""OpenClaw itself loads the store sessions sessionfix repaired with the intended context.

One store is built by OpenClaw's own import from pi sessions. OpenClaw loads each clean
session (`SessionManager.open` and `openModelContext`): that is the context each should
have. Then the rows are damaged as the field reports them (a user message cloned with a
new id, a compaction cloned right after itself, a parent that names no entry) in
sessions that hold rows OpenClaw compressed; OpenClaw loads the damage (the test
checks it sees it), `sessionfix repair --in-place` repairs the store (the dangling parent with
`--unsafe-fixes`, as its re-link is unsafe),
and OpenClaw loads every session again: both readers give exactly the clean context,
the store passes its integrity checks, and OpenClaw's own doctor finds nothing it did
not find before the damage. A session imported with overflow-recovery clones already
in it loads, once repaired, as the import of its repaired file does.

Rows OpenClaw's reader treats otherwise than pi's file reader treats lines (`SHAPES`: a
blank or whitespace row, on which `SessionManager.open` throws; a `null` row, which it
keeps aside; a row pretty-printed over several lines, which it reads whole; a missing or
legacy header, which it refuses) are written into sessions of
the same store and loaded in the same batch as the damage, then taken out again before
the repair: `sessionfix context STORE` must count what OpenClaw loads, or say it loads
nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import orjson
import pytest
import zstandard
from typer.testing import CliRunner

from sessionfix import Settings
from sessionfix.cli import app
from sessionfix.context import contexts

from .conftest import ROOT
from .openclaw_loader import (
    OpenClawLoad,
    StoreBuild,
    build_store,
    doctor_lint,
    load_sessions,
    renamed,
    require_openclaw_at_collection,
)
from .slim_cases import BUDGET, CUT_MARK, assert_cut, pi_session

require_openclaw_at_collection()

CORPUS = ROOT.parent / "shared" / "corpus" / "openclaw"
EXAMPLE = ROOT / "examples" / "sessions" / "openclaw-overflow-recovery.jsonl"
ENV = {"NO_COLOR": "1"}


def _rows(db: apsw.Connection, session_id: str) -> list[tuple[int, dict[str, Any] | None]]:
    """(seq, parsed event) of a session, in order (compressed rows decompressed; None for
    a row that is not a JSON object)."""
    rows: list[tuple[int, dict[str, Any] | None]] = []
    for seq, text, packed in db.execute(
        "SELECT seq, CAST(event_json AS BLOB), event_zstd FROM transcript_events "
        "WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ):
        data = (
            text
            if text is not None
            else zstandard.ZstdDecompressor().decompressobj().decompress(packed)
        )
        event = orjson.loads(data)
        rows.append((seq, event if isinstance(event, dict) else None))
    return rows


def _rewrite(db: apsw.Connection, session_id: str, seq: int, event: dict[str, Any]) -> None:
    """Store `event` as row `seq`, uncompressed."""
    db.execute(
        "UPDATE transcript_events SET event_json = ?, event_zstd = NULL, "
        "event_utf8_bytes = NULL, navigation_json = NULL WHERE session_id = ? AND seq = ?",
        (orjson.dumps(event).decode(), session_id, seq),
    )


def _insert_row(db: apsw.Connection, session_id: str, at: int, event: dict[str, Any]) -> None:
    """Insert `event` as row `at`, moving the rows from `at` on one place down (and
    their identities), as an append of OpenClaw's overflow recovery left it."""
    db.execute(
        "UPDATE transcript_events SET seq = -seq - 1 WHERE session_id = ? AND seq >= ?",
        (session_id, at),
    )
    db.execute(
        "UPDATE transcript_events SET seq = -seq WHERE session_id = ? AND seq < 0", (session_id,)
    )
    db.execute(
        "UPDATE transcript_event_identities SET seq = seq + 1 WHERE session_id = ? AND seq >= ?",
        (session_id, at),
    )
    created = db.execute(
        "SELECT max(created_at) FROM transcript_events WHERE session_id = ?", (session_id,)
    ).fetchone()[0]
    db.execute(
        "INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
        "VALUES (?, ?, ?, ?)",
        (session_id, at, orjson.dumps(event).decode(), created),
    )
    db.execute(
        "INSERT INTO transcript_event_identities (session_id, event_id, seq, event_type, "
        "parent_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, event["id"], at, event["type"], event.get("parentId"), created),
    )


def _clone_after(
    db: apsw.Connection,
    session_id: str,
    is_original: Callable[[dict[str, Any]], bool],
    new_id: str,
) -> None:
    """Write the last row `is_original` picks again right after itself with a new id,
    its child now following the clone: the shape overflow recovery leaves (#66443)."""
    rows = _rows(db, session_id)
    at, original = next(
        (seq, event) for seq, event in reversed(rows) if event is not None and is_original(event)
    )
    clone = {**original, "id": new_id, "parentId": original["id"]}
    for seq, event in rows:
        if event is not None and event.get("parentId") == original["id"]:
            _rewrite(db, session_id, seq, {**event, "parentId": new_id})
    _insert_row(db, session_id, at + 1, clone)


def clone_user_message(db: apsw.Connection, session_id: str) -> None:
    """The last user message re-appended back to back with a new id."""
    _clone_after(
        db, session_id, lambda e: (e.get("message") or {}).get("role") == "user", "c1a0c1a0"
    )


def clone_compaction(db: apsw.Connection, session_id: str) -> None:
    """The last compaction written again right after itself with a new id."""
    _clone_after(db, session_id, lambda e: e.get("type") == "compaction", "c0ba1c0b")


def dangle_parent(db: apsw.Connection, session_id: str) -> None:
    """A parent link that names no entry (a compaction pointed at a row that is gone)."""
    rows = _rows(db, session_id)
    seq, event = next(
        (seq, event)
        for seq, event in rows[len(rows) // 2 :]
        if event is not None and event.get("type") == "message" and event.get("parentId")
    )
    _rewrite(db, session_id, seq, {**event, "parentId": "deadbeef"})


Undo = Callable[[], None]


def _max_seq(db: apsw.Connection, session_id: str) -> tuple[int, int]:
    """The session's last seq and its `created_at`."""
    seq, created = db.execute(
        "SELECT seq, created_at FROM transcript_events WHERE session_id = ? "
        "ORDER BY seq DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return int(seq), int(created)


def _append_row(text: str) -> Callable[[apsw.Connection, str], Undo]:
    """Append a row holding `text` (with no identity: it is no entry)."""

    def damage(db: apsw.Connection, session_id: str) -> Undo:
        seq, created = _max_seq(db, session_id)
        db.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at) "
            "VALUES (?, ?, ?, ?)",
            (session_id, seq + 1, text, created),
        )
        return lambda: db.execute(
            "DELETE FROM transcript_events WHERE session_id = ? AND seq = ?",
            (session_id, seq + 1),
        )

    return damage


def _saved(db: apsw.Connection, table: str, session_id: str, seq: int) -> Undo:
    """What puts the table's rows of `seq` back as they are now."""
    columns = [name for (name,) in db.execute(f"SELECT name FROM pragma_table_info('{table}')")]
    rows = db.execute(
        f"SELECT {', '.join(columns)} FROM {table} WHERE session_id = ? AND seq = ?",
        (session_id, seq),
    ).fetchall()

    def undo() -> None:
        db.execute(f"DELETE FROM {table} WHERE session_id = ? AND seq = ?", (session_id, seq))
        marks = ", ".join("?" * len(columns))
        for row in rows:
            db.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", row)

    return undo


HEADER_TABLES = ("transcript_events", "transcript_event_identities")
"""The tables that hold a row of the header (seq 0)."""


def drop_header(db: apsw.Connection, session_id: str) -> Undo:
    """The header row gone (seq 0), its identity with it."""
    undo = [_saved(db, table, session_id, 0) for table in HEADER_TABLES]
    for table in reversed(HEADER_TABLES):
        db.execute(f"DELETE FROM {table} WHERE session_id = ? AND seq = 0", (session_id,))

    def put_back() -> None:
        for step in undo:
            step()

    return put_back


def legacy_header(db: apsw.Connection, session_id: str) -> Undo:
    """The header says version 2, as a session not yet migrated does."""
    undo = _saved(db, "transcript_events", session_id, 0)
    header = dict(_rows(db, session_id)[0][1] or {})
    _rewrite(db, session_id, 0, {**header, "version": 2})
    return undo


@dataclass(frozen=True)
class Shape:
    """Rows OpenClaw's store reader reads otherwise than pi reads the lines of a file."""

    name: str
    damage: Callable[[apsw.Connection, str], Undo]
    refused: bool
    """`SessionManager.open` throws on it."""


SHAPE_SOURCE = CORPUS / "letta-trajectory__pi-tool-calls.v3.jsonl"


def _pretty_row(db: apsw.Connection, session_id: str) -> Undo:
    """A message appended below the last entry, its row pretty-printed (over several
    lines, which `JSON.parse` reads as one value)."""
    last = [event for _, event in _rows(db, session_id) if event is not None][-1]
    prompt = {"role": "user", "content": [{"type": "text", "text": "And the tests?"}]}
    event = {"type": "message", "id": "feedbeef", "parentId": last["id"]}
    event |= {"timestamp": "2026-07-24T06:30:00.000Z", "message": prompt}
    return _append_row(orjson.dumps(event, option=orjson.OPT_INDENT_2).decode())(db, session_id)


SHAPES = (
    Shape("pretty-printed row", _pretty_row, refused=False),
    Shape("blank row", _append_row(""), refused=True),
    Shape("whitespace row", _append_row(" \t "), refused=True),
    Shape("null row", _append_row("null"), refused=False),
    Shape("no header", drop_header, refused=True),
    Shape("legacy header", legacy_header, refused=True),
)


@dataclass(frozen=True)
class Case:
    name: str
    source: Path
    damage: Callable[[apsw.Connection, str], None] | None
    unsafe: bool = False
    """Its fix is unsafe (a dangling parent is re-linked only with --unsafe-fixes)."""


def _sessions(ids: dict[str, str], cases: list[Case]) -> list[str]:
    return [arg for case in cases for arg in ("--session", ids[case.name])]


CASES = (
    Case("user clone", CORPUS / "letta-trajectory__pi-tool-calls.v3.jsonl", clone_user_message),
    Case("cloned compaction", CORPUS / "pi-mono__before-compaction.v1.jsonl", clone_compaction),
    Case(
        "dangling parent",
        CORPUS / "letta-trajectory__openclaw-tool-calls.jsonl",
        dangle_parent,
        unsafe=True,
    ),
    Case("large rows", CORPUS / "pi-mono__large-session.v1.jsonl", clone_user_message),
    Case("imported clones", EXAMPLE, None),
)


@dataclass
class SlimRun:
    """The slim case's session (`tests/slim_cases.py`) in the store, slimmed in place."""

    session: str
    before: OpenClawLoad
    after: OpenClawLoad
    exit: int
    stderr: str
    measured: tuple[int, int]
    """`sessionfix context` of it after the slim: messages, tokens."""


@dataclass
class Run:
    build: StoreBuild
    ids: dict[str, str]
    """Each case's session in the store, by case name."""
    clean: dict[str, OpenClawLoad]
    """Each case's session as imported, before the damage, by case name."""
    intended: dict[str, OpenClawLoad]
    """The import of the clean file repaired by sessionfix (the context the repaired
    store session should give), by case name."""
    damaged: dict[str, OpenClawLoad]
    repaired: dict[str, OpenClawLoad]
    lint_before: list[Any]
    lint_after: list[Any]
    repair_exit: int
    compressed: int
    measured: dict[str, tuple[int, int]]
    """`sessionfix context` of each case's session, damaged and repaired: messages."""
    shapes: dict[str, tuple[OpenClawLoad, int, str | None]]
    """Each shape's session as OpenClaw loaded it, and as `sessionfix context` measured
    it (messages, why it loads nothing), by shape name."""
    slim: SlimRun


def _load(build: StoreBuild) -> dict[str, OpenClawLoad]:
    """Every session of the store as OpenClaw's two readers load it, by session id."""
    loads = load_sessions([build.target(session) for session in build.sessions])
    return {session_id: load for (_, session_id), load in loads.items()}


def _repaired_file(case: Case, work: Path) -> bytes:
    """The case's clean file as `repair -o` writes it, under a session id of its own
    (it is imported beside the original)."""
    fixed = work / f"{case.name.replace(' ', '-')}.jsonl"
    args = ["repair", "-o", str(fixed), str(case.source)]
    outcome = CliRunner().invoke(app, [*args, *(["--unsafe-fixes"] if case.unsafe else [])])
    assert outcome.exit_code in (0, 1), outcome.output
    header, rest = fixed.read_bytes().split(b"\n", 1)
    record = orjson.loads(header)
    record["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, record["id"]))
    return orjson.dumps(record) + b"\n" + rest


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    work = tmp_path_factory.mktemp("openclaw-store")
    originals = [case.source.read_bytes() for case in CASES]
    intended_files = [_repaired_file(case, work) for case in CASES]
    shaped = [
        renamed(SHAPE_SOURCE.read_bytes(), str(uuid.uuid5(uuid.NAMESPACE_URL, shape.name)))
        for shape in SHAPES
    ]
    slim_session = str(uuid.uuid5(uuid.NAMESPACE_URL, "slim"))
    slimmed = renamed(pi_session(work / "slim.jsonl").read_bytes(), slim_session)
    build = build_store(work, [*originals, *intended_files, *shaped, slimmed])
    sessions = [session.session_id for session in build.sessions]
    assert sessions[-1] == slim_session
    ids = dict(zip((case.name for case in CASES), sessions, strict=False))
    intended_ids = dict(
        zip((case.name for case in CASES), sessions[len(CASES) : 2 * len(CASES)], strict=True)
    )
    shape_ids = dict(
        zip((shape.name for shape in SHAPES), sessions[2 * len(CASES) : -1], strict=True)
    )
    before = _load(build)
    lint_before = doctor_lint(build.home)
    db = apsw.Connection(str(build.store))
    try:
        compressed = db.execute(
            "SELECT count(*) FROM transcript_events WHERE event_json IS NULL"
        ).fetchone()[0]
        with db:
            for case in CASES:
                if case.damage is not None:
                    case.damage(db, ids[case.name])
            undo = [shape.damage(db, shape_ids[shape.name]) for shape in SHAPES]
        damaged = _load(build)
        damaged_counts = _context_counts(build.store)
        with db:
            for step in undo:
                step()
    finally:
        db.close()
    repair = ["repair", "--in-place", "--quiescence", "0", str(build.store)]
    unsafe = [case for case in CASES if case.unsafe]
    outcome = CliRunner().invoke(app, [*repair, *_sessions(ids, unsafe), "--unsafe-fixes"], env=ENV)
    assert outcome.exit_code in (0, 1), outcome.output
    outcome = CliRunner().invoke(
        app, [*repair, *_sessions(ids, [c for c in CASES if not c.unsafe])], env=ENV
    )
    slim = [*repair[:-1], "--budget", str(BUDGET), "--session", slim_session, str(build.store)]
    slim_outcome = CliRunner().invoke(app, ["slim", *slim[1:]], env=ENV)
    after = _load(build)
    repaired_counts = _context_counts(build.store)
    slim_measured = next(
        now for now, _ in contexts([build.store], Settings(sessions=(slim_session,)))
    )
    lint_after = doctor_lint(build.home)

    def by_case(loads: dict[str, OpenClawLoad], which: dict[str, str]) -> dict[str, OpenClawLoad]:
        return {name: loads[session_id] for name, session_id in which.items()}

    return Run(
        build,
        ids,
        by_case(before, ids),
        by_case(before, intended_ids),
        by_case(damaged, ids),
        by_case(after, ids),
        lint_before,
        lint_after,
        outcome.exit_code,
        compressed,
        {name: (damaged_counts[i][0], repaired_counts[i][0]) for name, i in ids.items()},
        {name: (damaged[i], *damaged_counts[i]) for name, i in shape_ids.items()},
        SlimRun(
            slim_session,
            before[slim_session],
            after[slim_session],
            slim_outcome.exit_code,
            slim_outcome.stderr,
            (slim_measured.messages, slim_measured.tokens),
        ),
    )


def _context_counts(store: Path) -> dict[str, tuple[int, str | None]]:
    """`sessionfix context` of every session of the store: messages and why it loads
    none, by session id."""
    measured = [now for now, _ in contexts([store], Settings())]
    return {now.filename.rpartition(":")[2]: (now.messages, now.refused) for now in measured}


def test_the_store_holds_compressed_rows(run: Run) -> None:
    assert run.compressed > 0


@pytest.mark.parametrize("case", [c for c in CASES if c.damage], ids=lambda c: c.name)
def test_openclaw_sees_the_damage(run: Run, case: Case) -> None:
    damaged, clean = run.damaged[case.name], run.clean[case.name]
    assert (damaged.open, damaged.model_context) != (clean.open, clean.model_context)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_repaired_session_loads_as_intended(run: Run, case: Case) -> None:
    """Both of OpenClaw's readers give the repaired store session exactly the context of
    the repaired clean file, which differs from what they gave the damaged session."""
    repaired, intended = run.repaired[case.name], run.intended[case.name]
    assert repaired.open.error is None
    assert repaired.model_context.error is None
    assert repaired.open.messages == intended.open.messages
    assert repaired.model_context.messages == intended.model_context.messages
    damaged = run.damaged[case.name]
    assert (damaged.open.messages, damaged.model_context.messages) != (
        intended.open.messages,
        intended.model_context.messages,
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_context_counts_what_openclaw_loads(run: Run, case: Case) -> None:
    """`sessionfix context STORE` counts the messages `SessionManager.open` loads, for the
    damaged session and for the repaired one."""
    damaged, repaired = run.measured[case.name]
    assert damaged == len(run.damaged[case.name].open.messages)
    assert repaired == len(run.repaired[case.name].open.messages)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_context_counts_what_openclaw_loads_from_rows_it_reads_its_own_way(
    run: Run, shape: Shape
) -> None:
    """`sessionfix context STORE` counts the messages `SessionManager.open` loads from
    the shape's session, or says, as OpenClaw throws, that it loads nothing."""
    loaded, messages, refused = run.shapes[shape.name]
    assert (loaded.open.error is not None) == shape.refused
    assert (refused is not None) == shape.refused
    assert messages == len(loaded.open.messages)


def test_store_stays_consistent_and_doctor_finds_nothing_new(run: Run) -> None:
    assert run.repair_exit in (0, 1)
    db = apsw.Connection(str(run.build.store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        db.close()
    assert run.lint_after == run.lint_before


def test_a_slimmed_store_session_loads_as_context_predicts(run: Run) -> None:
    """`slim --in-place STORE --session ID` brings the session under its budget in the
    store: OpenClaw loads every message it loaded before, which `context STORE` counts;
    the old tool outputs keep their head and tail around the placeholder, the old
    prompt's image is a placeholder, the last two turns are as they were."""
    slim = run.slim
    assert slim.exit == 0, slim.stderr
    assert "tokens remain, within the budget" in slim.stderr
    before, after = slim.before.open.messages, slim.after.open.messages
    assert slim.after.open.error is None
    assert slim.after.model_context.error is None
    assert slim.measured[0] == len(after) == len(before)
    assert slim.measured[1] <= BUDGET
    cut = replaced = 0
    for old, new in zip(before, after, strict=True):
        assert old["role"] == new["role"]
        if old == new:
            continue
        if old["role"] == "toolResult":
            assert_cut(old["content"][0]["text"], new["content"][0]["text"])
            cut += 1
        else:
            assert new["content"][1]["text"].startswith(CUT_MARK)
            replaced += 1
    assert (cut, replaced) == (8, 1)
    assert before[-8:] == after[-8:]
