"""What `formats.opencode.context` says opencode sends the model, held session by session
to what opencode 1.18.33 itself sends (`tests/opencode_loader.py`), on the described
sessions and on copies damaged as sessions are found in the field (spec
formats/opencode.md §6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from sessionfix.cli import app
from sessionfix.context import contexts
from sessionfix.formats.opencode.context import chat_message, model_messages
from sessionfix.formats.opencode.database import OpencodeDatabase
from sessionfix.formats.opencode.decode import decode_session
from sessionfix.formats.opencode.view import session_view
from sessionfix.model.loaded import LoadRefused

from .opencode_damages import DAMAGES, DESCRIPTIONS, SESSIONS
from .opencode_loader import load_with_opencode, require_opencode_at_collection
from .opencode_sessions import build_database, built_database, copy_database, damaged
from .slim_cases import BUDGET, OPENCODE_SESSION, assert_cut, opencode_description

require_opencode_at_collection()


@pytest.fixture(scope="module")
def database() -> Path:
    return built_database(DESCRIPTIONS)


REFUSED = "refused"


def predicted(database: Path, session: str) -> list[tuple[dict[str, Any], int]] | str:
    """What `context` says opencode sends for the session, each chat message with the
    size the neutral model counts for it; or `REFUSED` where it says opencode sends
    nothing. Read both ways: decoded rows alone, and the session in the neutral model."""
    with OpencodeDatabase(database) as db:
        row = next(found for found in db.sessions() if found.id == session)
        neutral = session_view(database, row, db.messages(session))
        try:
            direct = [
                chat_message(sent) for sent in model_messages(decode_session(db.messages(session)))
            ]
        except LoadRefused:
            direct = None
    try:
        loaded = list(neutral.loaded())
    except LoadRefused:
        assert direct is None
        return REFUSED
    assert direct is not None
    assert [neutral.keys[message.record] for message in loaded] == [
        sent.record for sent in neutral.sent
    ]
    return list(zip(direct, [message.size for message in loaded], strict=True))


def test_context_is_what_opencode_sends(database: Path, tmp_path: Path) -> None:
    """Session by session, the described ones and each damaged copy, the messages
    `context` derives from the rows are the ones opencode sends (all loaded by one
    server), and the size counted for each is that of the message opencode sends."""
    cases = [(database, session) for session in SESSIONS]
    for name, (session, statements) in DAMAGES.items():
        cases.append((damaged(database, tmp_path / f"{name}.db", *statements), session))
    loads = load_with_opencode(cases)
    mismatches = []
    for case in cases:
        sent = loads[case]
        actual: list[tuple[dict[str, Any], int]] | str = [
            (message, len(orjson.dumps(message))) for message in sent.messages
        ]
        if sent.error is not None:
            actual = REFUSED if sent.error.startswith("HTTP 500: ") else sent.error
        expected = predicted(*case)
        if actual != expected:
            mismatches.append((case[0].name, case[1], expected, actual))
    assert not mismatches, "\n\n".join(
        f"{name} {session}:\n context: {expected}\n opencode: {actual}"
        for name, session, expected, actual in mismatches
    )


@pytest.fixture(scope="module")
def slim_databases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The slim case's session imported by opencode, and a copy slimmed in place."""
    folder = tmp_path_factory.mktemp("opencode-slim")
    original = build_database(folder / "opencode.db", [opencode_description(folder / "slim.json")])
    slimmed = copy_database(original, folder / "slimmed.db")
    args = ["slim", "--in-place", "--quiescence", "0", "--budget", str(BUDGET), str(slimmed)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return original, slimmed


def test_a_slimmed_session_is_what_opencode_sends(slim_databases: tuple[Path, Path]) -> None:
    """`slim --in-place DB` brings the session under its budget: opencode sends exactly
    the messages `context` says, as many as before, and takes the probe prompt after
    them; the old tool outputs keep their head and tail around the placeholder, the
    last two turns are as they were."""
    original, slimmed = slim_databases
    loads = load_with_opencode([(original, OPENCODE_SESSION), (slimmed, OPENCODE_SESSION)])
    before, after = loads[original, OPENCODE_SESSION], loads[slimmed, OPENCODE_SESSION]
    assert after.error is None
    assert after.request
    expected = predicted(slimmed, OPENCODE_SESSION)
    assert [(m, len(orjson.dumps(m))) for m in after.messages] == expected
    measured = next(now for now, _ in contexts([slimmed]))
    assert measured.tokens <= BUDGET < next(now for now, _ in contexts([original])).tokens
    cut = 0
    for old, new in zip(before.messages, after.messages, strict=True):
        if old == new:
            continue
        assert old["role"] == new["role"] == "tool"
        assert_cut(old["content"], new["content"])
        cut += 1
    assert cut == 8
    assert before.messages[-8:] == after.messages[-8:]
