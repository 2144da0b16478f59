"""The migration to OpenClaw's SQLite store, proven with OpenClaw's own import: a pi
session with a glued line (two records on one line) loses everything from that line on
when it is imported as it is, and keeps every record once `sessionfix repair` has split
the line, which OpenClaw then loads as pi's own loader loads the repaired file."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from typer.testing import CliRunner

from sessionfix import check_file
from sessionfix.cli import app

from .openclaw_loader import (
    ImportedSession,
    OpenClawLoad,
    build_store,
    load_sessions,
    misnamed_by_import,
    model_view,
    renamed,
    require_openclaw_at_collection,
    sample_session,
)
from .pi_loader import PiLoad, load_with_pi

require_openclaw_at_collection()

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
LONG_AGO = 1_700_000_000
"""An mtime well in the past: the repair leaves a file alone that may still be written."""
CORPUS_GLUED = "pi-mono__session.v1.glued-line.jsonl"
"""A real v1 pi session whose line 440 holds two records."""
CASES = ("v1-corpus", "v3-sample")


def _glued_sample() -> bytes:
    """`sample_session` with its lines 6 and 7 joined into one."""
    lines = sample_session("0b0b0b0b-0000-4000-8000-000000000001").split(b"\n")
    lines[5:7] = [lines[5] + lines[6]]
    return b"\n".join(lines)


def _readable_prefix(data: bytes) -> int:
    """The lines before the first one that is no JSON (the whole file when all parse)."""
    lines = data.splitlines()
    for n, line in enumerate(lines):
        try:
            json.loads(line)
        except ValueError:
            return n
    return len(lines)


def _entry_ids(data: bytes) -> set[str]:
    """The ids of the file's records (its header's too)."""
    return {json.loads(line)["id"] for line in data.splitlines()}


@dataclass(frozen=True)
class Case:
    """One glued session, imported as it is and as repaired."""

    original: bytes
    repaired: bytes
    as_is: ImportedSession
    fixed: ImportedSession
    load_as_is: OpenClawLoad
    load_fixed: OpenClawLoad
    pi_fixed: PiLoad
    """pi's own loader on the repaired file."""


def _repair(source: Path, target: Path) -> bytes:
    """`sessionfix repair -o target source`, through the CLI; the repaired bytes."""
    os.utime(source, (LONG_AGO, LONG_AGO))
    result = CliRunner().invoke(app, ["repair", str(source), "-o", str(target)], env=ENV)
    assert result.exit_code == 0, result.output
    return target.read_bytes()


@pytest.fixture(scope="module")
def cases(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    """Repair each glued session, import the originals and the repairs into one store
    with one doctor call (an original under a new header id: the repair keeps the id),
    and read them all with one Node.js process for OpenClaw and one for pi."""
    work = tmp_path_factory.mktemp("openclaw-import")
    originals = {
        "v1-corpus": (corpus / "openclaw" / CORPUS_GLUED).read_bytes(),
        "v3-sample": _glued_sample(),
    }
    repaired = {}
    for n, (name, data) in enumerate(originals.items()):
        source = work / f"{name}.jsonl"
        source.write_bytes(data)
        repaired[name] = _repair(source, work / f"{name}.repaired.jsonl")
        originals[name] = renamed(data, f"0c0c0c0c-0000-4000-8000-{n:012d}")
    build = build_store(work, [*originals.values(), *repaired.values()])
    loads = load_sessions(build.target(s) for s in build.sessions)
    pi = load_with_pi([work / f"{name}.repaired.jsonl" for name in CASES])
    count = len(CASES)
    return {
        name: Case(
            original=originals[name],
            repaired=repaired[name],
            as_is=build.sessions[n],
            fixed=build.sessions[count + n],
            load_as_is=loads[str(build.store), build.sessions[n].session_id],
            load_fixed=loads[str(build.store), build.sessions[count + n].session_id],
            pi_fixed=pi[work / f"{name}.repaired.jsonl"],
        )
        for n, name in enumerate(CASES)
    }


@pytest.mark.parametrize("name", CASES)
def test_importing_a_glued_file_loses_everything_from_the_glued_line_on(
    cases: dict[str, Case], name: str
) -> None:
    case = cases[name]
    prefix = _readable_prefix(case.original)
    assert prefix < case.original.count(b"\n")
    assert case.as_is.rows == prefix
    assert [issue["code"] for issue in case.as_is.issues] == ["transcript_malformed"]
    assert case.load_as_is.open.error is None
    assert case.load_as_is.open.entries == prefix - 1


@pytest.mark.parametrize("name", CASES)
def test_the_repair_splits_the_glued_line(cases: dict[str, Case], name: str) -> None:
    case = cases[name]
    assert case.repaired.count(b"\n") == _readable_prefix(case.repaired)
    assert _readable_prefix(case.repaired) > _readable_prefix(case.original) + 1


@pytest.mark.parametrize("name", CASES)
def test_importing_the_repair_keeps_every_record(cases: dict[str, Case], name: str) -> None:
    case = cases[name]
    lines = case.repaired.count(b"\n")
    assert case.fixed.issues == ()
    assert case.fixed.rows == lines
    assert len(case.fixed.event_ids) == lines
    assert case.load_fixed.open.entries == lines - 1


def test_every_entry_id_of_a_repaired_v3_file_is_in_the_store(cases: dict[str, Case]) -> None:
    """v3 ids are kept as they are (a v1 file has none: OpenClaw makes them up)."""
    case = cases["v3-sample"]
    assert case.fixed.event_ids == _entry_ids(case.repaired)


@pytest.mark.parametrize("name", CASES)
def test_openclaw_loads_the_repair_as_pi_loads_it(cases: dict[str, Case], name: str) -> None:
    case = cases[name]
    pi = case.pi_fixed
    assert pi.error is None
    assert pi.skipped == ()
    for view in (case.load_fixed.open, case.load_fixed.model_context):
        assert view.error is None
    assert list(case.load_fixed.open.messages) == pi.messages
    assert list(case.load_fixed.model_context.messages) == model_view(pi.messages)


def test_the_repaired_v3_sample_keeps_pi_s_leaf(cases: dict[str, Case]) -> None:
    case = cases["v3-sample"]
    assert case.load_fixed.open.leaf == case.pi_fixed.leaf
    assert case.load_fixed.model_context.leaf == case.pi_fixed.leaf


GENERATED = "9e8d7c6b-0000-4000-8000-0000000000"
"""The start of session ids as OpenClaw generates them (UUIDs), two hex digits short."""
NAMED: Final = {
    f"{GENERATED}01.jsonl": f"{GENERATED}01",
    f"{GENERATED}02.jsonl": f"{GENERATED}09",
    f"{GENERATED}03-topic-42.jsonl": f"{GENERATED}03",
    "support-desk-topic-42.jsonl": "support-desk",
    "support-desk-topic-43.jsonl": "support-desk-topic-43",
    f"2026-07-24T06-21-03-000Z_{GENERATED}04.jsonl": f"{GENERATED}04",
    f"2026-07-24T06-21-03-000Z_{GENERATED}05.jsonl": f"{GENERATED}06",
    f"{GENERATED}01.checkpoint.0b5c8a6e-1d2f-4a3b-9c8d-7e6f5a4b3c2d.jsonl": f"{GENERATED}01",
    f"{GENERATED}01.checkpoint.1b5c8a6e-1d2f-4a3b-9c8d-7e6f5a4b3c2d.jsonl": f"{GENERATED}07",
}
"""Names OpenClaw gives transcripts (a session's, a Telegram topic's, a fork's) and its
checkpoints, each with the header id of the file so named."""


def test_sf101_calls_misnamed_the_transcripts_openclaws_import_refuses(tmp_path: Path) -> None:
    """The import compares a transcript's header id with the id its name gives (a topic's
    and a fork's only when it is a generated id) and never looks into a checkpoint:
    SF101 reports a header id differing from its file name for exactly those files."""
    files = {name: sample_session(ident) for name, ident in NAMED.items()}
    refused = misnamed_by_import(tmp_path / "import", files)
    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    reported = set()
    for name, data in files.items():
        (folder / name).write_bytes(data)
        if any(d.code == "SF101" for d in check_file(folder / name)):
            reported.add(name)
    assert reported == refused
    assert refused == {
        f"{GENERATED}02.jsonl",
        "support-desk-topic-42.jsonl",
        f"2026-07-24T06-21-03-000Z_{GENERATED}05.jsonl",
    }
