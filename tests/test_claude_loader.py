"""Claude Code sessions checked against Claude Code's own reader (`tests/claude/load.mjs`,
the Agent SDK's `getSessionMessages`), before and after `sessionfix repair`.

Every Claude Code session the tests can see is taken: the shared corpus, the examples
and every fixture whose input is a Claude Code session (told by its first record, so a
new fixture is taken without touching this module). Each is repaired with the safe and
with the unsafe fixes; the originals are loaded in one Node.js run and the repairs in a
second one. Then:

- the reader never throws and never writes to a file;
- the chain it loads, original or repaired, is the intended chain: an independent
  reading of the file in this module (`intended_chain`);
- a repair loses nothing from the loaded chain: the original's messages are still
  there, in the same order;
- every `tool_use` on the repaired chain has its `tool_result` later on the chain, except
  the pending call of a session that was captured mid-call (`PENDING_AT_END`);
- a glued line (`GLUED`): what the reader does with it before the repair, and that the
  repair gives the file its records back as lines of their own.

A new case needs a new file only; `PENDING_AT_END` and `GLUED` name the expected
exceptions, and a test checks that they name exactly the sessions that have them.

What the reader (SDK 0.3.330) does, as observed on these files and read from its code,
and how `intended_chain` models it:

- It parses line by line (leading bytes up to the space skipped) with `JSON.parse`, drops
  the lines that fail, and keeps the records typed `user`, `assistant`, `system`,
  `attachment` or `progress` that have a string `uuid`, by `uuid`: a later line with the
  same `uuid` replaces the earlier record (its content and its place).
- Compaction relinks (format §8): a `compact_boundary` with `preservedMessages` whose
  uuids all resolve chains them under the anchor (first under the anchor, each under
  the previous one) and moves the anchor's other children under the last; without
  `preservedMessages`, a `preservedSegment` puts the head under the anchor and the
  anchor's other children under the tail. The reader does this for every boundary, not
  only the last one with a segment; the corpus has one such boundary only.
- The leaf: the reader does not read `last-prompt` at all; it takes the physically last
  record that no other record (progress and sidechain records aside) names as parent,
  and walks back to the nearest user or assistant record. The model takes sessionfix's
  rule (the `leafUuid` of the last `last-prompt` if it names a conversation record, else
  the last user or assistant record); the two agree on every file here.
- The chain is walked back along `parentUuid` through `progress` records (which bridges
  them) and stops at a missing parent or a cycle.
- Parallel tool calls (format §4, §7 step 7): after the last chain member of each
  assistant `message.id`, the reader adds that message's other lines that are not on
  the chain, then the off-chain `tool_result` records that answer them (parented to,
  or `sourceToolAssistantUUID` naming, one of its lines), each set by time stamp. This
  is what puts parallel results back on the chain of `37-…`, `5a-…`, `60-…` and `8c-…`.
- Files over 5 MB are read from their last `compact_boundary` on (format §7 step 2); the
  model does not do that, and a test checks that no file here is that large.
- What it returns: the chain's `user`, `assistant` and `system` records, less those with
  `isMeta`, `isSidechain` or a `teamName` (so `progress` and `attachment` records and
  the "caveat" user records are walked through but not returned).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sessionfix import Settings
from sessionfix.repair import repair_to

from .claude_loader import ClaudeLoad, LoadedMessage, load_with_claude, require_claude_at_collection
from .conftest import CORPUS, FIXTURES, ROOT
from .test_fixtures import _settings

require_claude_at_collection()

CHAIN_TYPES = frozenset({"user", "assistant", "system", "attachment", "progress"})
"""Records the reader keeps by `uuid` (a `progress` record only links the chain)."""
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment"})
CLAUDE_ONLY_TYPES = frozenset(
    {"summary", "file-history-snapshot", "queue-operation", "last-prompt", "progress"}
    | {"ai-title", "custom-title", "agent-name", "permission-mode", "attribution-snapshot"}
)
"""Line types no pi or OpenClaw session starts with."""
LARGE_FILE = 5 * 1024 * 1024
"""The size above which the reader skips the bytes before the last compaction."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(line: bytes) -> dict[str, Any] | None:
    """The line as `JSON.parse` reads it, or None where it throws (or reads no object)."""
    text = line.lstrip(bytes(range(33))).decode("utf-8", "replace")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# --- which files ------------------------------------------------------------------------


def _first_record(path: Path) -> dict[str, Any] | None:
    """The file's first line that parses to a JSON object."""
    with path.open("rb") as stream:
        for line in stream:
            if (record := _parse(line)) is not None:
                return record
    return None


def _is_claude(path: Path) -> bool:
    """Whether the file's first record is a Claude Code record: a chain record (it has
    `parentUuid`) or a line type only Claude Code writes."""
    first = _first_record(path)
    if first is None:
        return False
    return "parentUuid" in first or first.get("type") in CLAUDE_ONLY_TYPES


def _claude_sessions() -> list[Path]:
    candidates = [
        *sorted((CORPUS / "claude").glob("**/*.jsonl")),
        *sorted(p for p in (ROOT / "examples").glob("**/*.jsonl") if p.is_file()),
        *sorted(FIXTURES.glob("*/input.jsonl")),
    ]
    return [path for path in candidates if _is_claude(path)]


SESSIONS = _claude_sessions()
MODES = ("safe", "unsafe")


def _name(path: Path) -> str:
    return str(path.relative_to(path.parents[1]))


def _case_settings(path: Path) -> tuple[Settings, str]:
    spec_file = path.parent / "case.json"
    if path.parent.parent == FIXTURES and spec_file.exists():
        spec = json.loads(spec_file.read_text())
        return _settings(spec), spec.get("filename", path.name)
    return Settings(quiescence=0.0), path.name


# --- the session's expected exceptions ----------------------------------------------------

PENDING_AT_END = {
    "entireio-cli/60-fd31fcf44f-0.full.jsonl": "toolu_01WGYs8UbekNJUaEDd2rwDXv",
    "entireio-cli/71-69f9710768-0.full.jsonl": "toolu_01DhgKyDEyRxfLPsX1zNKtXk",
    "entireio-cli/4c-02af2759b6-0.full.jsonl": "toolu_01Y2W8G7AnRZx2Q7vWrRL9vA",
}
"""Sessions captured while a tool call was running (rules §10): the id of that call, the
last block of the last message of the loaded chain, and the only one without a result."""


@dataclass(frozen=True)
class Glued:
    """A physical line holding two records with no newline between them."""

    row: int
    """Its line in the original (1-based)."""
    uuid: str
    """The `uuid` of its first record, an assistant message."""
    replayed_on: int
    """The later line that carries the same `uuid` again (written when the session was
    resumed under a newer version, with `message.context_management: null` added)."""
    second: str
    """The type of the line's second record, which the reader does not use."""


GLUED = {
    "entireio-cli/37-995ebed6e4-2.full.jsonl": Glued(
        128, "3252495b-f5ee-4004-9370-21c6d432eb59", 131, "summary"
    ),
    "entireio-cli/5a-c45bc32212-0.full.jsonl": Glued(
        115, "aab06a4a-6ef3-4658-baa6-0f13dec5ce68", 116, "file-history-snapshot"
    ),
}


# --- an independent reading of the intended chain -----------------------------------------


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def records(path: Path) -> list[dict[str, Any]]:
    """Every record of the file that parses, in file order."""
    return [r for r in map(_parse, _lines(path)) if r is not None]


def _content(record: dict[str, Any]) -> list[Any]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _blocks(record: dict[str, Any], kind: str) -> Iterator[dict[str, Any]]:
    for block in _content(record):
        if isinstance(block, dict) and block.get("type") == kind:
            yield block


def _message_id(record: dict[str, Any]) -> str | None:
    message = record.get("message")
    if record["type"] != "assistant" or not isinstance(message, dict):
        return None
    value = message.get("id")
    return value if isinstance(value, str) else None


def _relink_compactions(by_uuid: dict[str, dict[str, Any]]) -> None:
    """Re-parent the kept messages of each compaction with a preserved segment (§8)."""

    def reparent(uuid: str, parent: str) -> None:
        by_uuid[uuid] = {**by_uuid[uuid], "parentUuid": parent}

    boundaries = [
        r
        for r in list(by_uuid.values())
        if r["type"] == "system" and r.get("subtype") == "compact_boundary"
    ]
    for boundary in boundaries:
        metadata = boundary.get("compactMetadata") or {}
        kept, segment = metadata.get("preservedMessages"), metadata.get("preservedSegment")
        if kept:
            uuids = kept["uuids"]
            if not uuids or any(u not in by_uuid for u in uuids):
                continue
            anchor = kept["anchorUuid"]
            for parent, uuid in zip([anchor, *uuids], uuids, strict=False):
                reparent(uuid, parent)
            head, tail = uuids[0], uuids[-1]
        elif segment:
            anchor, head, tail = segment["anchorUuid"], segment["headUuid"], segment["tailUuid"]
            if head in by_uuid:
                reparent(head, anchor)
        else:
            continue
        for uuid, record in list(by_uuid.items()):
            if record.get("parentUuid") == anchor and uuid != head:
                reparent(uuid, tail)


def _leaf(parsed: list[dict[str, Any]], by_uuid: dict[str, dict[str, Any]]) -> str | None:
    prompts = [r for r in parsed if r.get("type") == "last-prompt"]
    if prompts:
        named = by_uuid.get(str(prompts[-1].get("leafUuid")))
        if named is not None and named["type"] in CONVERSATION_TYPES:
            return str(named["uuid"])
    last = None
    for record in parsed:
        if record.get("type") in ("user", "assistant") and isinstance(record.get("uuid"), str):
            last = record["uuid"]
    return last


def _is_answer(record: dict[str, Any]) -> bool:
    return (
        record["type"] == "user"
        and bool(record.get("parentUuid"))
        and any(True for _ in _blocks(record, "tool_result"))
    )


def _recover_parallel_results(
    by_uuid: dict[str, dict[str, Any]], chain: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """After the last chain line of each assistant message, its lines that are off the
    chain and then the off-chain results parented to (or sourced from) one of its lines,
    each by time stamp (§4)."""
    on_chain = {r["uuid"] for r in chain}
    lines_of: dict[str, list[dict[str, Any]]] = {}
    for record in by_uuid.values():
        if (mid := _message_id(record)) is not None:
            lines_of.setdefault(mid, []).append(record)
    last_on_chain: dict[str, str] = {}
    for record in chain:
        if (mid := _message_id(record)) is not None:
            last_on_chain[mid] = record["uuid"]
    added: dict[str, list[dict[str, Any]]] = {}
    for mid, last in last_on_chain.items():
        members = {r["uuid"] for r in lines_of[mid]}
        siblings = [r for r in lines_of[mid] if r["uuid"] not in on_chain]
        answers = [
            r
            for r in by_uuid.values()
            if r["uuid"] not in on_chain
            and _is_answer(r)
            and (r.get("parentUuid") in members or r.get("sourceToolAssistantUUID") in members)
        ]
        found = [
            *sorted(siblings, key=lambda r: r.get("timestamp") or ""),
            *sorted(answers, key=lambda r: r.get("timestamp") or ""),
        ]
        on_chain.update(r["uuid"] for r in found)
        added[last] = found
    result: list[dict[str, Any]] = []
    for record in chain:
        result.append(record)
        result.extend(added.get(record["uuid"], ()))
    return result


def intended_chain(path: Path) -> list[dict[str, Any]]:
    """The records Claude Code should resume the session with, in order: the module
    docstring says how this reading is made."""
    parsed = records(path)
    by_uuid: dict[str, dict[str, Any]] = {}
    for record in parsed:
        if record.get("type") in CHAIN_TYPES and isinstance(record.get("uuid"), str):
            by_uuid[record["uuid"]] = record  # a later copy replaces it, in its place
    _relink_compactions(by_uuid)
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    uuid = _leaf(parsed, by_uuid)
    while uuid is not None and uuid in by_uuid and uuid not in seen:
        seen.add(uuid)
        chain.append(by_uuid[uuid])
        uuid = by_uuid[uuid].get("parentUuid")
    chain.reverse()
    return [
        r
        for r in _recover_parallel_results(by_uuid, chain)
        if r["type"] in ("user", "assistant", "system")
        and not r.get("isMeta")
        and not r.get("isSidechain")
        and not r.get("teamName")
    ]


def _as_loaded(record: dict[str, Any]) -> LoadedMessage:
    return LoadedMessage(record["uuid"], record["type"], record.get("message"))


# --- repairs and loads, once per run -----------------------------------------------------


@dataclass(frozen=True)
class Versions:
    original: Path
    repaired: dict[str, Path]


@pytest.fixture(scope="session")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Versions]:
    """Every session with its safe and unsafe repairs (`sessionfix.repair.repair_to`)."""
    root = tmp_path_factory.mktemp("claude-repairs")
    found: dict[Path, Versions] = {}
    for number, path in enumerate(SESSIONS):
        settings, name = _case_settings(path)
        folder = root / str(number)
        folder.mkdir()
        copy = folder / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
        repaired = {}
        for mode in MODES:
            target = folder / f"{mode}.jsonl"
            repair_to(copy, target, dataclasses.replace(settings, unsafe_fixes=mode == "unsafe"))
            repaired[mode] = target
        found[path] = Versions(path, repaired)
    return found


@pytest.fixture(scope="session")
def before(versions: dict[Path, Versions]) -> dict[Path, ClaudeLoad]:
    """The originals, loaded in one Node.js run."""
    return load_with_claude([v.original for v in versions.values()])


@pytest.fixture(scope="session")
def after(versions: dict[Path, Versions]) -> dict[Path, ClaudeLoad]:
    """All repairs, loaded in one Node.js run."""
    return load_with_claude([p for v in versions.values() for p in v.repaired.values()])


def _load(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> tuple[Path, ClaudeLoad]:
    if mode == "original":
        return path, before[path]
    file = versions[path].repaired[mode]
    return file, after[file]


def _cases(modes: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(path, mode, id=f"{mode}-{_name(path)}") for path in SESSIONS for mode in modes
    ]


# --- the tests ----------------------------------------------------------------------------


def test_the_exceptions_name_exactly_the_sessions_that_have_them() -> None:
    """`PENDING_AT_END` and `GLUED` name sessions the tests load, and every session with
    a line of two glued records is in `GLUED` (a line whose first JSON value ends before
    the line does and is followed by another). No file is large enough for the reader to
    skip what precedes its last compaction, which `intended_chain` does not model."""
    assert all(path.stat().st_size <= LARGE_FILE for path in SESSIONS)
    names = {_name(path) for path in SESSIONS}
    assert set(PENDING_AT_END) <= names
    glued = set()
    decoder = json.JSONDecoder()
    for path in SESSIONS:
        for line in _lines(path):
            text = line.decode("utf-8", "replace").strip()
            if _parse(line) is not None or not text.startswith("{"):
                continue
            try:
                _, end = decoder.raw_decode(text)
            except ValueError:
                continue
            if text[end:].lstrip().startswith("{"):
                glued.add(_name(path))
    assert glued == set(GLUED)


@pytest.mark.parametrize(("path", "mode"), _cases(("original", *MODES)))
def test_the_reader_loads_without_error_and_writes_nothing(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    file, loaded = _load(path, mode, versions, before, after)
    assert loaded.error is None
    assert loaded.untouched
    carried = {r.get("sessionId") for r in records(file) if r.get("type") in ("user", "assistant")}
    assert loaded.session_id in carried or not carried


@pytest.mark.parametrize(("path", "mode"), _cases(("original", *MODES)))
def test_the_loaded_chain_is_the_intended_chain(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """Uuids, types and message content, in order, as `intended_chain` reads the file."""
    file, loaded = _load(path, mode, versions, before, after)
    assert [_as_loaded(r) for r in intended_chain(file)] == list(loaded.messages)


@pytest.mark.parametrize(("path", "mode"), _cases(MODES))
def test_a_repair_loses_nothing_from_the_loaded_chain(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """The original's loaded messages are all on the repair's loaded chain, in the same
    order. (The repairs of Claude Code files fix lines only so far: none may go. A repair
    that drops a proven duplicate will have to name what it drops here.)"""
    _, repaired = _load(path, mode, versions, before, after)
    kept = iter(m.uuid for m in repaired.messages)
    missing = [m.uuid for m in before[path].messages if m.uuid not in kept]
    assert missing == []


def _unanswered(messages: tuple[LoadedMessage, ...]) -> list[tuple[int, str]]:
    """(position, id) of each `tool_use` with no `tool_result` later on the chain."""
    answers: dict[str, list[int]] = {}
    for position, message in enumerate(messages):
        if message.type == "user":
            for block in _blocks({"message": message.message}, "tool_result"):
                answers.setdefault(str(block.get("tool_use_id")), []).append(position)
    found = []
    for position, message in enumerate(messages):
        if message.type == "assistant":
            for block in _blocks({"message": message.message}, "tool_use"):
                call = str(block.get("id"))
                if not any(later > position for later in answers.get(call, ())):
                    found.append((position, call))
    return found


@pytest.mark.parametrize(("path", "mode"), _cases(MODES))
def test_every_tool_call_on_the_loaded_chain_has_its_result(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """The API refuses a resumed session otherwise ("tool_use ids were found without
    tool_result blocks"); the one exception is a session captured mid-call, whose call
    is the last block of its last message."""
    _, loaded = _load(path, mode, versions, before, after)
    pending = PENDING_AT_END.get(_name(path))
    if pending is None:
        assert _unanswered(loaded.messages) == []
    else:
        last = len(loaded.messages) - 1
        assert _unanswered(loaded.messages) == [(last, pending)]
        assert _content({"message": loaded.messages[last].message})[-1]["id"] == pending


GLUED_CASES = [pytest.param(CORPUS / "claude" / name, id=name) for name in GLUED]


@pytest.mark.parametrize("path", GLUED_CASES)
@pytest.mark.parametrize("mode", MODES)
def test_a_glued_line_before_and_after_the_repair(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """Before the repair the reader drops the glued line, yet its assistant message is on
    the chain: a later line replays its `uuid`, and the reader keeps that copy. The
    repair splits the line: both records are lines of their own again, the reader still
    keeps the later copy (the physically last record of a `uuid` wins), and the loaded
    chain is the same message for message."""
    glued = GLUED[_name(path)]
    lines = _lines(path)
    assert _parse(lines[glued.row - 1]) is None
    first, end = json.JSONDecoder().raw_decode(lines[glued.row - 1].decode())
    second = json.loads(lines[glued.row - 1].decode()[end:])
    replay = _parse(lines[glued.replayed_on - 1])
    assert replay is not None
    assert (first["uuid"], first["type"], replay["uuid"]) == (glued.uuid, "assistant", glued.uuid)
    assert second["type"] == glued.second
    assert first["message"] != replay["message"]
    assert first["message"] == {
        k: v for k, v in replay["message"].items() if k != "context_management"
    }

    original = {m.uuid: m for m in before[path].messages}
    assert original[glued.uuid].message == replay["message"]

    file = versions[path].repaired[mode]
    assert first in records(file)
    assert second in records(file)
    repaired = after[file].messages
    assert {m.uuid: m for m in repaired}[glued.uuid].message == replay["message"]
    assert repaired == before[path].messages
