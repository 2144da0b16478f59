"""The OpenClaw harness itself: a store its import builds from clean sessions holds them
all, OpenClaw's two readers load each one as pi's own loader loads the JSONL, reading
leaves the store's bytes as they were, and OpenClaw's doctor finds nothing to say."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from .openclaw_loader import (
    OpenClawLoad,
    StoreBuild,
    build_store,
    doctor_lint,
    load_sessions,
    model_view,
    require_openclaw_at_collection,
    sample_session,
    store_digest,
)
from .pi_loader import PiLoad, load_with_pi

require_openclaw_at_collection()

CORPUS_FILES = ("letta-trajectory__pi-tool-calls.v3.jsonl", "pi-mono__before-compaction.v1.jsonl")
"""Clean corpus sessions: a v3 one, stored verbatim, and a v1 one, migrated on import."""
SAMPLES = {
    "sample-linear": sample_session("0a0a0a0a-0000-4000-8000-000000000001"),
    "sample-branched": sample_session("0a0a0a0a-0000-4000-8000-000000000002", branched=True),
}
"""Hand-written clean v3 sessions (`sample_session`)."""


@dataclass(frozen=True)
class Harness:
    """One store built from every session here, read once by OpenClaw and once by pi."""

    build: StoreBuild
    names: tuple[str, ...]
    """Each session's name, in the store's order."""
    files: dict[str, Path]
    """Each session's JSONL file as it was imported."""
    openclaw: dict[str, OpenClawLoad]
    pi: dict[str, PiLoad]
    digest_before: str
    digest_after: str
    """The store's SHA-256 before and after OpenClaw read it."""


@pytest.fixture(scope="session")
def harness(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Harness:
    """Import every session into one store with one doctor call, and read them all back
    with one Node.js process for OpenClaw and one for pi."""
    work = tmp_path_factory.mktemp("openclaw-harness")
    sessions = {name: (corpus / "openclaw" / name).read_bytes() for name in CORPUS_FILES}
    sessions.update(SAMPLES)
    files = {}
    for name, data in sessions.items():
        files[name] = work / f"{name}.jsonl"
        files[name].write_bytes(data)
    build = build_store(work, list(sessions.values()))
    before = store_digest(build.store)
    loads = load_sessions(build.target(s) for s in build.sessions)
    after = store_digest(build.store)
    names = tuple(sessions)
    pi = load_with_pi(list(files.values()))
    return Harness(
        build=build,
        names=names,
        files=files,
        openclaw={
            name: loads[str(build.store), s.session_id]
            for name, s in zip(names, build.sessions, strict=True)
        },
        pi={name: pi[files[name]] for name in names},
        digest_before=before,
        digest_after=after,
    )


NAMES = (*CORPUS_FILES, *SAMPLES)


@pytest.mark.parametrize("name", NAMES)
def test_every_line_of_a_clean_session_is_imported_without_an_issue(
    harness: Harness, name: str
) -> None:
    session = harness.build.sessions[harness.names.index(name)]
    lines = harness.files[name].read_bytes().count(b"\n")
    assert session.issues == ()
    assert session.rows == lines
    assert len(session.event_ids) == lines


@pytest.mark.parametrize("name", NAMES)
def test_both_readers_load_an_imported_session(harness: Harness, name: str) -> None:
    """`open` keeps every entry; the model-context reader only those on the leaf's path."""
    load = harness.openclaw[name]
    session = harness.build.sessions[harness.names.index(name)]
    for view in (load.open, load.model_context):
        assert view.error is None
        assert view.messages
        assert view.path[-1] == view.leaf
    assert load.open.entries == session.rows - 1
    assert load.model_context.entries == len(load.model_context.path)
    assert load.model_context.path == load.open.path


@pytest.mark.parametrize("name", NAMES)
def test_openclaw_loads_the_messages_pi_loads_from_the_jsonl(harness: Harness, name: str) -> None:
    load = harness.openclaw[name]
    pi = harness.pi[name]
    assert pi.error is None
    assert pi.skipped == ()
    assert list(load.open.messages) == pi.messages
    assert list(load.model_context.messages) == model_view(pi.messages)


@pytest.mark.parametrize("name", ["letta-trajectory__pi-tool-calls.v3.jsonl", *SAMPLES])
def test_a_v3_session_keeps_pi_s_leaf(harness: Harness, name: str) -> None:
    """v3 entry ids are stored as they are (a v1 file's are made up on migration, by pi
    and by OpenClaw each its own way)."""
    load = harness.openclaw[name]
    assert load.open.leaf == harness.pi[name].leaf
    assert load.model_context.leaf == harness.pi[name].leaf


def test_the_branched_sample_reads_the_branch_that_ends_the_file(harness: Harness) -> None:
    load = harness.openclaw["sample-branched"]
    assert load.open.path == ("e1", "e2", "e3", "e4", "e5", "e6", "e10")
    assert load.open.messages[-1]["content"][0]["text"] == "Bye, on a branch."


def test_the_model_context_reader_drops_tool_result_details(harness: Harness) -> None:
    """Why the model-context messages are compared without `details`."""
    pi = harness.pi["sample-linear"].messages
    assert any("details" in m for m in pi)
    assert not any("details" in m for m in harness.openclaw["sample-linear"].model_context.messages)


def test_reading_leaves_the_store_as_it_was(harness: Harness) -> None:
    assert harness.digest_after == harness.digest_before


def test_a_target_that_fails_gives_its_error_and_the_batch_goes_on(
    harness: Harness, tmp_path: Path
) -> None:
    bogus = tmp_path / "not-a-store.sqlite"
    bogus.write_bytes(b"this is not a SQLite database, only text to read as one." * 4)
    good = harness.build.target(harness.build.sessions[0])
    loads = load_sessions([{**good, "storePath": str(bogus)}, good])
    failed = loads[str(bogus), good["sessionId"]]
    assert failed.open.error is not None
    assert "not a database" in failed.open.error
    assert failed.model_context.error is not None
    assert loads[good["storePath"], good["sessionId"]] == harness.openclaw[harness.names[0]]


def test_openclaw_s_doctor_finds_nothing_about_the_fresh_store(harness: Harness) -> None:
    assert doctor_lint(harness.build.home) == []
