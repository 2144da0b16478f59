"""Claude Code sessions checked against Claude Code's own reader (`tests/claude/load.mjs`,
the Agent SDK's `getSessionMessages`), before and after `sessionfix repair`.

Every Claude Code session the tests can see is taken: the shared corpus, the examples
and every fixture whose input is a Claude Code session (told by its first record, so a
new fixture is taken without touching this module; it is repaired under the file name
its `case.json` gives, folders and all). Each is repaired with the safe and with the
unsafe fixes; the originals are loaded in one Node.js run and the repairs in a second
one. Then:

- the reader never throws and never writes to a file;
- the chain it loads, original or repaired, is the intended chain: an independent
  reading of the file in this module (`intended_chain`);
- a repair loses nothing from the loaded chain: the original's messages are still
  there, in the same order, with their content, but for result blocks that answer
  nothing (SF401, SF403), stale reads (SF301), media the provider refuses, replaced by
  a placeholder (SF604), blank text blocks (SF605), and replays of earlier history
  (SF203) that an SF502 fix takes off the chain, as sessionfix's own diagnostics of the
  file show (`_replays_unhooked`);
- where a case puts media the provider refuses or a blank text block on the loaded
  chain (SF604, SF605), the reader returns it before the repair and, after it, the
  placeholder in its place and no blank text, every other message as it was;
- every `tool_use` on the loaded chain has its `tool_result` later on the chain, except
  the pending call of a session that was captured mid-call (`PENDING_AT_END`) and,
  before an unsafe repair, the calls a fixture leaves unanswered mid-chain
  (`UNANSWERED_UNTIL_UNSAFE`);
- a record the repair re-links is loaded after its new parent's line; a record it
  brings back or writes is loaded; after the unsafe fixes a compaction's preserved
  segment is loaded whole, and one SF502 mended is loaded below its summary;
- a glued line (`GLUED`): what the reader does with it before the repair, and that the
  repair gives the file its records back as lines of their own.

A new case needs a new file only. The corpus's exceptions are named here; a fixture's
are read from its `case.json` (its description, and the lines it expects SF402 and
SF001 on); a test checks that `GLUED` names exactly the glued lines. Repairs the reader
shows to be wrong go in `KNOWN_REPAIR_GAPS` (empty while it shows none), their cases
expected to fail strictly.

What the reader (SDK 0.3.330) does, as observed on these files and read from its code,
and how `intended_chain` models it:

- It parses line by line (leading bytes up to the space skipped) with `JSON.parse`, drops
  the lines that fail (a byte-order mark is no space: its line fails too), and keeps the
  records typed `user`, `assistant`, `system`, `attachment` or `progress` that have a
  string `uuid`, by `uuid`: a later line with the same `uuid` replaces the earlier record
  (its content and its place).
- Compaction relinks (format §8): a `compact_boundary` with `preservedMessages` whose
  uuids all resolve chains them under the anchor (first under the anchor, each under
  the previous one) and moves the anchor's other children under the last; without
  `preservedMessages`, a `preservedSegment` puts the head under the anchor and the
  anchor's other children under the tail. The reader does this for every boundary, not
  only the last one with a segment; the corpus has one such boundary only.
- The leaf: the reader does not read `last-prompt` at all; it takes the physically last
  record that no other record (progress and sidechain records aside) names as parent,
  and walks back to the nearest user or assistant record. The model takes sessionfix's
  rule (the `leafUuid` of the last `last-prompt` if it names a conversation record,
  walked back to the nearest user or assistant record, else the last user or assistant
  record); the two agree on every file here. Records after the last turn (a
  `turn_duration`, an `away_summary`) are therefore never on the chain.
- The chain is walked back along `parentUuid` through `progress` records (which bridges
  them) and stops at a missing parent or a cycle.
- Parallel tool calls (format §4, §7 step 7): after the last chain member of each
  assistant `message.id`, the reader adds that message's other lines that are not on
  the chain, then the off-chain `tool_result` records that answer them (parented to,
  or `sourceToolAssistantUUID` naming, one of its lines), each set by time stamp. This
  is what puts parallel results back on the chain of `37-…`, `5a-…`, `60-…` and `8c-…`.
- Files over 5 MB are read from their last `compact_boundary` on (format §7 step 2); the
  model does not do that, and a test checks that no file here is that large.
- Prompts queued while a turn ran (`queued_command` attachments): one on the chain that
  a reply (an assistant record, a tool result, a cut-short notice) follows before a
  prompt does becomes a user message (under its `source_uuid` unless that names a
  record already there), and so do those that hang below the leaf through records that
  are no turn, added after the chain by time; forwarded ones never do.
- What it returns: the chain's `user`, `assistant` and `system` records, less those with
  `isSidechain` or a `teamName`, those with `isMeta` but for prompts relayed from a
  channel or a peer (`origin.kind`), and an assistant record that closes a quiet turn
  with no words (so `progress` and `attachment` records and the "caveat" user records
  are walked through but not returned).
- A sub-agent's transcript (a fixture named `<session>/subagents/agent-<id>.jsonl`) is
  read with `getSubagentMessages`: from its last user or assistant record back along
  `parentUuid` through its user, assistant and attachment records; it returns every
  user and assistant record of that chain.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessionfix import Applicability, Diagnostic, Settings, check_file
from sessionfix.context import context_of
from sessionfix.diagnostics import RewriteRecord
from sessionfix.model.loaded import Sent
from sessionfix.repair.targets import repair_to

from .claude_loader import (
    ClaudeLoad,
    LoadedMessage,
    Subagent,
    load_with_claude,
    require_claude_at_collection,
)
from .conftest import CORPUS, FIXTURES, ROOT
from .slim_cases import CUT_MARK, SlimCase, assert_cut, slimmed
from .test_fixtures import _settings, place_case

require_claude_at_collection()

CHAIN_TYPES = frozenset({"user", "assistant", "system", "attachment", "progress"})
"""Records the reader keeps by `uuid` (a `progress` record only links the chain)."""
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment"})
SIDE_TYPES = frozenset({"user", "assistant", "attachment"})
"""Records the reader links a sub-agent's chain through."""
RELAYED = frozenset(
    {"channel", "observer", "observer-activity", "slack-ping", "voice-call", "peer"}
)
"""`origin.kind` of the `isMeta` prompts the reader returns all the same."""
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


SHAPES = ROOT / "tests" / "claude" / "sessions"
"""Sessions written here in shapes the reader treats in its own way (what it returns of
the records after the last turn, of `isMeta` prompts, of a quiet turn's close, of
queued prompts)."""


def _claude_sessions() -> list[Path]:
    candidates = [
        *sorted((CORPUS / "claude").glob("**/*.jsonl")),
        *sorted(p for p in (ROOT / "examples").glob("**/*.jsonl") if p.is_file()),
        *sorted(FIXTURES.glob("*/input.jsonl")),
        *sorted(SHAPES.glob("*.jsonl")),
    ]
    return [path for path in candidates if _is_claude(path)]


SESSIONS = _claude_sessions()
MODES = ("safe", "unsafe")


def _name(path: Path) -> str:
    return str(path.relative_to(path.parents[1]))


def _subagent_of(copy: Path, root: Path) -> Subagent | None:
    """The sub-agent whose transcript `copy` stands for, placed under `root` as a
    case's file name puts it (`<session>/subagents/agent-<agent>.jsonl`), with its
    session's main transcript where the case places one beside it."""
    parts = copy.relative_to(root).parts
    name = parts[-1]
    if len(parts) < 3 or parts[-2] != "subagents" or not name.startswith("agent-"):
        return None
    main = root.joinpath(*parts[:-3], f"{parts[-3]}.jsonl")
    agent = name.removeprefix("agent-").removesuffix(".jsonl")
    return Subagent(parts[-3], agent, main if main.exists() else None)


def _case_settings(path: Path) -> tuple[Settings, str]:
    spec_file = path.parent / "case.json"
    if path.parent.parent == FIXTURES and spec_file.exists():
        spec = json.loads(spec_file.read_text())
        return _settings(spec), spec.get("filename", path.name)
    return Settings(quiescence=0.0), path.name


# --- the session's expected exceptions ----------------------------------------------------


def _case(path: Path) -> dict[str, Any] | None:
    """A fixture's `case.json` (None for the corpus and the examples)."""
    spec_file = path.parent / "case.json"
    if path.parent.parent != FIXTURES or not spec_file.exists():
        return None
    spec: dict[str, Any] = json.loads(spec_file.read_text())
    return spec


def _expected_rows(path: Path, code: str) -> list[int]:
    """The lines a fixture's `case.json` expects `code` on (written from the spec)."""
    spec = _case(path)
    return list(spec.get("expect", {}).get(code, [])) if spec is not None else []


def _record_on(path: Path, row: int) -> dict[str, Any]:
    record = _parse(_lines(path)[row - 1])
    assert record is not None, f"{_name(path)}:{row} does not parse"
    return record


def _calls_on(path: Path, row: int) -> list[str]:
    """The `tool_use` ids of the record on a line, in order."""
    return [str(b.get("id")) for b in _blocks(_record_on(path, row), "tool_use")]


def _ends_mid_call(path: Path) -> bool:
    """A fixture whose description says the session was captured while a call ran."""
    spec = _case(path)
    return spec is not None and "mid-call" in spec.get("description", "")


PENDING_AT_CORPUS_END = {
    "entireio-cli/60-fd31fcf44f-0.full.jsonl": "toolu_01WGYs8UbekNJUaEDd2rwDXv",
    "entireio-cli/71-69f9710768-0.full.jsonl": "toolu_01DhgKyDEyRxfLPsX1zNKtXk",
    "entireio-cli/4c-02af2759b6-0.full.jsonl": "toolu_01Y2W8G7AnRZx2Q7vWrRL9vA",
}


def _pending_at_end() -> dict[str, str]:
    """Sessions captured while a tool call was running (rules §10): the id of that call,
    the last block of the last message of the loaded chain, and the only one without a
    result. The corpus ones are named here; a fixture is one when its description says
    it ends mid-call, and its call is the one on the line it expects SF402 on."""
    found = dict(PENDING_AT_CORPUS_END)
    for path in SESSIONS:
        if _ends_mid_call(path):
            (row,) = _expected_rows(path, "SF402")
            found[_name(path)] = _calls_on(path, row)[-1]
    return found


def _unanswered_until_unsafe() -> dict[str, list[str]]:
    """Fixtures whose loaded chain holds a call without a result before a later record
    (rules §10, SF402 as an error): the calls on the lines `case.json` expects SF402 on.
    Only an unsafe repair answers them (or re-links their results)."""
    found: dict[str, list[str]] = {}
    for path in SESSIONS:
        rows = _expected_rows(path, "SF402")
        if rows and not _ends_mid_call(path):
            found[_name(path)] = [call for row in sorted(rows) for call in _calls_on(path, row)]
    return found


@dataclass(frozen=True)
class Glued:
    """A physical line holding two records with no newline between them."""

    row: int
    """Its line in the original (1-based)."""
    uuid: str
    """The `uuid` of its first record, an assistant message."""
    replayed_on: int | None
    """The later line that carries the same `uuid` again (written when the session was
    resumed under a newer version, with `message.context_management: null` added), or
    None where no line does."""
    second: str
    """The type of the line's second record, which the reader does not use."""


GLUED_IN_CORPUS = {
    "entireio-cli/37-995ebed6e4-2.full.jsonl": Glued(
        128, "3252495b-f5ee-4004-9370-21c6d432eb59", 131, "summary"
    ),
    "entireio-cli/5a-c45bc32212-0.full.jsonl": Glued(
        115, "aab06a4a-6ef3-4658-baa6-0f13dec5ce68", 116, "file-history-snapshot"
    ),
}


def _split_glued(line: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two records of a glued line."""
    text = line.decode()
    first, end = json.JSONDecoder().raw_decode(text)
    return first, json.loads(text[end:])


def _glued() -> dict[str, Glued]:
    """The corpus's glued lines as named above, and each fixture's from the lines its
    `case.json` expects SF001 on (its uuid, replay and second type read from the file)."""
    found = dict(GLUED_IN_CORPUS)
    for path in SESSIONS:
        for row in _expected_rows(path, "SF001"):
            lines = _lines(path)
            first, second = _split_glued(lines[row - 1])
            replays = [
                number
                for number, line in enumerate(lines[row:], row + 1)
                if (record := _parse(line)) is not None and record.get("uuid") == first["uuid"]
            ]
            found[_name(path)] = Glued(
                row, first["uuid"], replays[0] if replays else None, second["type"]
            )
    return found


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
    """The record the last `last-prompt` names, or the nearest user or assistant record
    above it (the reader's leaf is always one); else the last such record."""
    prompts = [r for r in parsed if r.get("type") == "last-prompt"]
    if prompts:
        named = by_uuid.get(str(prompts[-1].get("leafUuid")))
        if named is not None and named["type"] in CONVERSATION_TYPES:
            for uuid in _ancestors(by_uuid, named["uuid"]):
                if by_uuid[uuid]["type"] in ("user", "assistant"):
                    return uuid
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


def linked_records(parsed: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The records the reader keeps, by `uuid`, with the links of the compactions'
    preserved messages made (§8)."""
    by_uuid: dict[str, dict[str, Any]] = {}
    for record in parsed:
        if record.get("type") in CHAIN_TYPES and isinstance(record.get("uuid"), str):
            by_uuid[record["uuid"]] = record  # a later copy replaces it, in its place
    _relink_compactions(by_uuid)
    return by_uuid


def intended_chain(path: Path, side: bool = False) -> list[dict[str, Any]]:
    """The records Claude Code should resume the session with, in order (`side`: those
    it shows of a sub-agent's transcript): the module docstring says how this reading
    is made."""
    parsed = records(path)
    if side:
        return _side_chain(parsed)
    by_uuid = linked_records(parsed)
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    uuid = uuid_of_leaf = _leaf(parsed, by_uuid)
    while uuid is not None and uuid in by_uuid and uuid not in seen:
        seen.add(uuid)
        chain.append(by_uuid[uuid])
        uuid = by_uuid[uuid].get("parentUuid")
    chain.reverse()
    recovered = _recover_parallel_results(by_uuid, chain)
    trailing = _trailing_queued(by_uuid, recovered, uuid_of_leaf)
    return [r for r in _queued_as_prompts(recovered, trailing) if _returned(r)]


CUT_SHORT = (
    "[Request interrupted by user",
    "[Request interrupted: the session ended",
    "[This turn ended before it finished.]",
    "[Agent call interrupted:",
    "[Tool call did not complete:",
    "[Tool call interrupted:",
    "[Tool call result not in this copy:",
    "The user doesn't want to take this action right now.",
    "[Tool call skipped:",
)
"""How the user records start that say a turn or a call was cut short (a reply)."""


def _is_queued(record: dict[str, Any]) -> bool:
    attachment = record.get("attachment")
    return (
        record["type"] == "attachment"
        and isinstance(attachment, dict)
        and attachment.get("type") == "queued_command"
    )


def _trailing_queued(
    by_uuid: dict[str, dict[str, Any]], chain: list[dict[str, Any]], leaf: str | None
) -> list[dict[str, Any]]:
    """The queued prompts below the leaf through records that are no turn, off the
    chain, depth first by time, none of them above a turn off the chain."""
    if leaf is None:
        return []
    on_chain = {r["uuid"] for r in chain}
    children: dict[str, list[dict[str, Any]]] = {}
    for record in by_uuid.values():
        if record["type"] not in ("user", "assistant"):
            children.setdefault(str(record.get("parentUuid")), []).append(record)
    toward_turns: set[str] = set()
    for record in by_uuid.values():
        if record["type"] not in ("user", "assistant") or record["uuid"] in on_chain:
            continue
        if record.get("isSidechain") or record.get("teamName"):
            continue
        parent = by_uuid.get(str(record.get("parentUuid")))
        while parent and parent["uuid"] not in on_chain and parent["uuid"] not in toward_turns:
            toward_turns.add(parent["uuid"])
            parent = by_uuid.get(str(parent.get("parentUuid")))
    found, seen, stack = [], set(on_chain), [leaf]
    while stack:
        uuid = stack.pop()
        if uuid != leaf:
            if uuid in seen:
                continue
            seen.add(uuid)
            if _is_queued(by_uuid[uuid]) and uuid not in toward_turns:
                found.append(by_uuid[uuid])
        below = sorted(children.get(uuid, ()), key=lambda r: r.get("timestamp") or "")
        stack.extend(r["uuid"] for r in reversed(below) if r["uuid"] not in seen)
    return found


def _turn_state(record: dict[str, Any]) -> str | None:
    """ "reply" (an assistant record, a tool result, a cut-short notice), "prompt" (a user
    prompt) or None."""
    if record["type"] == "assistant":
        return "reply"
    if record["type"] != "user":
        return None
    if record.get("parentUuid") and any(True for _ in _blocks(record, "tool_result")):
        return "reply"
    if _cut_short((record.get("message") or {}).get("content")):
        return "reply"
    if record.get("isMeta") or record.get("isCompactSummary"):
        return None
    return "prompt"


def _cut_short(content: Any) -> bool:
    """A user message's content that only says a turn or a call was cut short: a text, or
    blocks each a text or an errored result saying so."""
    if isinstance(content, str):
        return content.startswith(CUT_SHORT)
    if not isinstance(content, list) or not content:
        return False
    for block in content:
        if not isinstance(block, dict):
            return False
        if block.get("type") == "text":
            text = block.get("text")
        elif block.get("type") == "tool_result" and block.get("is_error") is True:
            text = block.get("content")
        else:
            return False
        if not isinstance(text, str) or not text.startswith(CUT_SHORT):
            return False
    return True


def _queued_as_prompts(
    chain: list[dict[str, Any]], trailing: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The chain and the trailing queued prompts, each queued prompt a reply follows
    before a prompt does (or that trails) made the user message the reader makes of it."""
    listed = [*chain, *trailing]
    present = {r["uuid"] for r in listed}
    replied: set[int] = set()
    state = None
    for position in range(len(listed) - 1, -1, -1):
        if state == "reply":
            replied.add(position)
        state = _turn_state(listed[position]) or state
    made = []
    for position, record in enumerate(listed):
        attachment = record.get("attachment") or {}
        prompt = attachment.get("prompt")
        turned = (
            _is_queued(record)
            and (position in replied or position >= len(chain))
            and isinstance(prompt, str | list)
            and not _forwarded(attachment.get("forwardedIntent"))
        )
        source = attachment.get("source_uuid") if turned else None
        uuid = source if isinstance(source, str) and source else record["uuid"]
        if not turned or (uuid != record["uuid"] and uuid in present):
            made.append(record)
            continue
        present.add(uuid)
        made.append(
            {
                "type": "user",
                "uuid": uuid,
                "message": {"role": "user", "content": prompt},
                "isMeta": bool(attachment.get("isMeta")),
                "origin": attachment.get("origin"),
                "isSidechain": record.get("isSidechain"),
                "teamName": record.get("teamName"),
            }
        )
    return made


def _forwarded(intent: object) -> bool:
    return (
        isinstance(intent, dict)
        and isinstance(intent.get("lineage"), str)
        and bool(intent["lineage"])
        and isinstance(intent.get("source", ""), str)
    )


def _side_chain(parsed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A sub-agent's chain: from its last user or assistant record back along
    `parentUuid` through its user, assistant and attachment records (a later line with
    the same `uuid` standing for the earlier one); its user and assistant records."""
    kept = [r for r in parsed if r.get("type") in SIDE_TYPES and isinstance(r.get("uuid"), str)]
    by_uuid = {r["uuid"]: r for r in kept}
    turns = [r for r in kept if r["type"] in ("user", "assistant")]
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    record = turns[-1] if turns else None
    while record is not None and record["uuid"] not in seen:
        seen.add(record["uuid"])
        chain.append(record)
        record = by_uuid.get(str(record.get("parentUuid")))
    chain.reverse()
    return [r for r in chain if _returned(r, side=True)]


def _as_loaded(record: dict[str, Any]) -> LoadedMessage:
    return LoadedMessage(record["uuid"], record["type"], record.get("message"))


PENDING_AT_END = _pending_at_end()
UNANSWERED_UNTIL_UNSAFE = _unanswered_until_unsafe()
GLUED = _glued()


def _ancestors(records_by_uuid: dict[str, dict[str, Any]], uuid: str | None) -> Iterator[str]:
    """The uuids met walking back along `parentUuid` from `uuid` (itself first), to a
    missing parent or a cycle."""
    seen: set[str] = set()
    while uuid is not None and uuid in records_by_uuid and uuid not in seen:
        seen.add(uuid)
        yield uuid
        uuid = records_by_uuid[uuid].get("parentUuid")


def _returned(record: dict[str, Any], side: bool = False) -> bool:
    """Whether the reader returns the record when it is on the chain (`side`: the chain
    of a sub-agent's transcript, of which it returns every user and assistant record)."""
    if side:
        return record["type"] in ("user", "assistant")
    if record["type"] not in ("user", "assistant", "system") or _closes_quiet_turn(record):
        return False
    if record.get("isSidechain") or record.get("teamName"):
        return False
    origin = record.get("origin")
    relayed = isinstance(origin, dict) and origin.get("kind") in RELAYED
    return not record.get("isMeta") or relayed


def _closes_quiet_turn(record: dict[str, Any]) -> bool:
    """An assistant record marked `closesQuietTurn` whose one text block says nothing."""
    content = _content(record)
    return (
        record["type"] == "assistant"
        and record.get("closesQuietTurn") is True
        and isinstance((record.get("message") or {}).get("content"), list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
        and content[0].get("text") in ("", "No response requested.")
    )


# --- what the repairs are known to get wrong ------------------------------------------------


@dataclass(frozen=True)
class RepairGap:
    """A repair that Claude Code's reader shows to be wrong: its cases are expected to
    fail (strictly, so that they flag the fix once sessionfix has it)."""

    cases: frozenset[tuple[str, str]]
    """The (test function, mode) pairs that show it."""
    reason: str


KNOWN_REPAIR_GAPS: dict[str, RepairGap] = {}
"""Sessions whose repair the reader shows to be wrong, by `_name` (none at present)."""


# --- repairs and loads, once per run -----------------------------------------------------


@dataclass(frozen=True)
class Versions:
    original: Path
    copy: Path
    """The copy that was repaired, under the file name its case gives (with the files
    its case places beside it)."""
    repaired: dict[str, Path]
    subagent: Subagent | None
    """The sub-agent whose transcript the session is, where its file name makes it one:
    the reader reads it, and its repairs, as that sub-agent's."""


@pytest.fixture(scope="session")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Versions]:
    """Every session with its safe and unsafe repairs (`sessionfix.repair.targets.repair_to`)."""
    root = tmp_path_factory.mktemp("claude-repairs")
    found: dict[Path, Versions] = {}
    for number, path in enumerate(SESSIONS):
        settings, name = _case_settings(path)
        folder = root / str(number)
        folder.mkdir()
        if _case(path) is not None:
            copy = place_case(path.parent, folder)
        else:
            copy = folder / name
            shutil.copyfile(path, copy)
        repaired = {}
        for mode in MODES:
            target = folder / f"{mode}.jsonl"
            repair_to(
                copy, target, msgspec.structs.replace(settings, unsafe_fixes=mode == "unsafe")
            )
            repaired[mode] = target
        found[path] = Versions(path, copy, repaired, _subagent_of(copy, folder))
    return found


@pytest.fixture(scope="session")
def slim_case(tmp_path_factory: pytest.TempPathFactory) -> SlimCase:
    """A session over its budget and its slim (`tests/slim_cases.py`)."""
    return slimmed(tmp_path_factory.mktemp("claude-slim"), "claude")


@pytest.fixture(scope="session")
def size_case(tmp_path_factory: pytest.TempPathFactory) -> SlimCase:
    """The same session over a size alone, and its slim."""
    return slimmed(tmp_path_factory.mktemp("claude-slim-size"), "claude-size")


@pytest.fixture(scope="session")
def before(
    versions: dict[Path, Versions], slim_case: SlimCase, size_case: SlimCase
) -> dict[Path, ClaudeLoad]:
    """The originals, loaded in one Node.js run (the slim cases' too)."""
    places = {v.original: v.subagent for v in versions.values() if v.subagent is not None}
    originals = [v.original for v in versions.values()]
    return load_with_claude([*originals, slim_case.original, size_case.original], places)


@pytest.fixture(scope="session")
def after(
    versions: dict[Path, Versions], slim_case: SlimCase, size_case: SlimCase
) -> dict[Path, ClaudeLoad]:
    """All repairs, loaded in one Node.js run (the slims too)."""
    places = {
        repaired: v.subagent
        for v in versions.values()
        if v.subagent is not None
        for repaired in v.repaired.values()
    }
    repairs = [p for v in versions.values() for p in v.repaired.values()]
    return load_with_claude([*repairs, slim_case.slimmed, size_case.slimmed], places)


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


def _cases(check: str, modes: tuple[str, ...]) -> list[Any]:
    """(path, mode) for every session and mode; a case `KNOWN_REPAIR_GAPS` names is
    expected to fail (strictly)."""
    cases = []
    for path in SESSIONS:
        gap = KNOWN_REPAIR_GAPS.get(_name(path))
        for mode in modes:
            marks = []
            if gap is not None and (check, mode) in gap.cases:
                marks.append(pytest.mark.xfail(strict=True, reason=gap.reason))
            cases.append(pytest.param(path, mode, id=f"{mode}-{_name(path)}", marks=marks))
    return cases


# --- the tests ----------------------------------------------------------------------------


def _glued_lines(path: Path) -> Iterator[int]:
    """The lines (1-based) whose first JSON value ends before the line does and is
    followed by another."""
    decoder = json.JSONDecoder()
    for number, line in enumerate(_lines(path), 1):
        text = line.decode("utf-8", "replace").strip()
        if _parse(line) is not None or not text.startswith("{"):
            continue
        try:
            _, end = decoder.raw_decode(text)
        except ValueError:
            continue
        if text[end:].lstrip().startswith("{"):
            yield number


def test_the_exceptions_name_exactly_the_sessions_that_have_them() -> None:
    """`PENDING_AT_END`, `UNANSWERED_UNTIL_UNSAFE`, `GLUED` and `KNOWN_REPAIR_GAPS` name
    sessions the tests load, and every line of two glued records is in `GLUED`. No file is
    large enough for the reader to skip what precedes its last compaction, which
    `intended_chain` does not model."""
    assert all(path.stat().st_size <= LARGE_FILE for path in SESSIONS)
    names = {_name(path) for path in SESSIONS}
    assert set(PENDING_AT_END) <= names
    assert set(KNOWN_REPAIR_GAPS) <= names
    checks = {name for name in globals() if name.startswith("test_")}
    for gap in KNOWN_REPAIR_GAPS.values():
        assert {check for check, _ in gap.cases} <= checks
        assert {mode for _, mode in gap.cases} <= {"original", *MODES}
    glued = {(_name(path), row) for path in SESSIONS for row in _glued_lines(path)}
    assert glued == {(name, g.row) for name, g in GLUED.items()}


def test_a_known_gap_marks_its_cases_as_strict_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry of `KNOWN_REPAIR_GAPS` makes exactly its (check, mode) cases strict
    xfails, and only for its session: the table works when a gap is listed again."""
    name = _name(SESSIONS[0])
    check = "test_a_repair_loses_nothing_from_the_loaded_chain"
    gap = RepairGap(frozenset({(check, "unsafe")}), "a listed gap")
    monkeypatch.setitem(KNOWN_REPAIR_GAPS, name, gap)
    marked = {case.id: [(m.name, m.kwargs) for m in case.marks] for case in _cases(check, MODES)}
    assert marked[f"unsafe-{name}"] == [("xfail", {"strict": True, "reason": "a listed gap"})]
    assert [case for case, marks in marked.items() if marks] == [f"unsafe-{name}"]
    assert all(not case.marks for case in _cases("test_a_relink_is_followed", MODES))


@pytest.mark.parametrize(
    ("path", "mode"),
    _cases("test_the_reader_loads_without_error_and_writes_nothing", ("original", *MODES)),
)
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


@pytest.mark.parametrize(
    ("path", "mode"),
    _cases("test_the_loaded_chain_is_the_intended_chain", ("original", *MODES)),
)
def test_the_loaded_chain_is_the_intended_chain(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """Uuids, types and message content, in order, as `intended_chain` reads the file."""
    file, loaded = _load(path, mode, versions, before, after)
    side = versions[path].subagent is not None
    assert [_as_loaded(r) for r in intended_chain(file, side)] == list(loaded.messages)


def _tool_results(message: LoadedMessage) -> list[dict[str, Any]]:
    return list(_blocks({"message": message.message}, "tool_result"))


def _spare_results(messages: tuple[LoadedMessage, ...]) -> dict[tuple[int, int], str]:
    """The `tool_result` blocks of a loaded chain that answer nothing (position of the
    message, of the block → why): no `tool_use` with their id earlier on the chain, or
    an earlier block already answered it. Rules §10 (SF401, SF403) let a repair drop
    these, and a record left without content with them."""
    calls: set[str] = set()
    answered: set[str] = set()
    spare: dict[tuple[int, int], str] = {}
    for position, message in enumerate(messages):
        content = _content({"message": message.message})
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            if message.type == "assistant" and block.get("type") == "tool_use":
                calls.add(str(block.get("id")))
            elif message.type == "user" and block.get("type") == "tool_result":
                call = str(block.get("tool_use_id"))
                if call not in calls:
                    spare[(position, index)] = "orphan"
                elif call in answered:
                    spare[(position, index)] = "duplicate"
                answered.add(call)
    return spare


_PADDED_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _refused_thinking(messages: tuple[LoadedMessage, ...]) -> dict[tuple[int, int], str]:
    """The thinking blocks of a loaded chain whose signature Anthropic refuses (position of
    the message, of the block → why): a Claude model's, with no signature, an empty one,
    or one that is no whole signature (under 100 characters, or not padded base64). An
    SF606 fix removes these, and a record left without content with them."""
    refused: dict[tuple[int, int], str] = {}
    for position, message in enumerate(messages):
        model = message.message.get("model") if isinstance(message.message, dict) else None
        if message.type != "assistant" or not (isinstance(model, str) and "claude" in model):
            continue
        for index, block in enumerate(_content({"message": message.message})):
            if not isinstance(block, dict) or block.get("type") != "thinking":
                continue
            signature = block.get("signature")
            if not (
                isinstance(signature, str)
                and len(signature) >= 100
                and len(signature) % 4 == 0
                and _PADDED_BASE64.fullmatch(signature)
            ):
                refused[(position, index)] = "refused signature"
    return refused


STALE_READ = "[sessionfix: stale read of "
"""How sessionfix's placeholder for a superseded read (SF301) starts."""
MEDIA_REMOVED = re.compile(r"\[sessionfix: .+ removed - over the limits of ")
"""sessionfix's placeholder for an image or document the provider refuses (SF604)."""
MEDIA_TYPES = frozenset({"image", "document"})


def _blank_text(block: Any) -> bool:
    """A text block that is empty or whitespace only, which a repair removes (SF605)."""
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
        and not block["text"].strip(" \t\n\r\f\v")
    )


def _media_replaced(old: Any, new: Any) -> bool:
    """Whether `new` is `old`, an inline image or document replaced by sessionfix's
    placeholder (SF604), in a tool result's content too."""
    if old == new:
        return True
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return False
    if old.get("type") in MEDIA_TYPES:
        text = new.get("text")
        return (
            new.get("type") == "text" and isinstance(text, str) and bool(MEDIA_REMOVED.match(text))
        )
    inner, replaced = old.get("content"), new.get("content")
    return (
        old.get("type") == "tool_result"
        and {**old, "content": None} == {**new, "content": None}
        and isinstance(inner, list)
        and isinstance(replaced, list)
        and len(inner) == len(replaced)
        and all(_media_replaced(a, b) for a, b in zip(inner, replaced, strict=True))
    )


def _kept_as_intended(original: Any, repaired: Any, spare: set[int]) -> bool:
    """Whether a repaired message is the original less spare result blocks (by index;
    one whose rule is off stays) and blank text blocks (SF605), with a read result's
    text replaced by sessionfix's placeholder (SF301) and media the provider refuses by
    its own (SF604) at most."""
    if original == repaired:
        return True
    if not isinstance(original, dict) or not isinstance(repaired, dict):
        return False
    if {k: v for k, v in original.items() if k != "content"} != {
        k: v for k, v in repaired.items() if k != "content"
    }:
        return False
    after = [b for b in _content({"message": repaired}) if not _blank_text(b)]
    before = []
    for i, block in enumerate(_content({"message": original})):
        kept = len(before) < len(after) and after[len(before)] == block
        if not _blank_text(block) and (i not in spare or kept):
            before.append(block)
    if len(before) != len(after):
        return False
    for old, new in zip(before, after, strict=True):
        if _media_replaced(old, new):
            continue
        if not (isinstance(old, dict) and isinstance(new, dict)):
            return False
        if old.get("type") != "tool_result" or {**old, "content": None} != {
            **new,
            "content": None,
        }:
            return False
        text = new.get("content")
        if isinstance(text, list):
            text = "".join(str(b.get("text", "")) for b in text if isinstance(b, dict))
        if not (isinstance(text, str) and text.startswith(STALE_READ)):
            return False
    return True


@pytest.mark.parametrize(
    ("path", "mode"), _cases("test_a_repair_loses_nothing_from_the_loaded_chain", MODES)
)
def test_a_repair_loses_nothing_from_the_loaded_chain(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """The original's loaded messages are all on the repair's loaded chain, in the same
    order, each with its content; what may go is only what answers nothing: a result
    block for a call not on the chain before it or already answered (SF401, SF403), a
    thinking block whose signature Anthropic refuses (SF606), and a record with nothing
    else, which is then gone from the file. A read result may
    have its text replaced by sessionfix's placeholder (SF301). And a replay may leave
    the chain whole (`_replays_unhooked`): a copy of earlier history that an SF502 fix
    takes off the chain by re-parenting the record below it."""
    file, repaired = _load(path, mode, versions, before, after)
    original = before[path].messages
    spare = _spare_results(original) | _refused_thinking(original)
    unhooked = _replays_unhooked(path, mode, versions)
    in_file = {r.get("uuid") for r in records(file)}
    kept = {m.uuid: m for m in repaired.messages}
    order = iter(m.uuid for m in repaired.messages)
    lost, changed = [], []
    for position, message in enumerate(original):
        dropped = {index for (at, index) in spare if at == position}
        content = _content({"message": message.message})
        if message.uuid not in kept and message.uuid in unhooked:
            continue
        if message.uuid not in kept:
            blank = {i for i, block in enumerate(content) if _blank_text(block)}
            whole = bool(content) and dropped | blank == set(range(len(content)))
            if not (whole and message.uuid not in in_file):
                lost.append(message.uuid)
            continue
        if message.uuid not in order:
            lost.append(message.uuid)
        elif not _kept_as_intended(message.message, kept[message.uuid].message, dropped):
            changed.append(message.uuid)
    assert (lost, changed) == ([], [])


CONTENT_CASES = [
    pytest.param(path, id=_name(path))
    for path in SESSIONS
    if re.match(r"SF60[45]-(?!trap-)", _name(path))
]


def _blocks_of(messages: tuple[LoadedMessage, ...]) -> Iterator[tuple[str, Any]]:
    """(uuid, block) for every content block the reader returns, in tool results too."""
    for message in messages:
        for block in _content({"message": message.message}):
            yield message.uuid, block
            inner = block.get("content") if isinstance(block, dict) else None
            if isinstance(block, dict) and block.get("type") == "tool_result":
                for part in inner if isinstance(inner, list) else []:
                    yield message.uuid, part


def _placeholders(messages: tuple[LoadedMessage, ...]) -> list[str]:
    return [
        uuid
        for uuid, block in _blocks_of(messages)
        if isinstance(block, dict)
        and isinstance(block.get("text"), str)
        and MEDIA_REMOVED.match(block["text"])
    ]


@pytest.mark.parametrize("path", CONTENT_CASES)
def test_the_reader_returns_no_refused_block_after_the_repair(
    path: Path,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """Before the repair the reader returns the blocks the provider refuses where the case
    puts them in context: a blank text block, or an image where the placeholder stands
    after the repair. After it (with the unsafe fixes): no blank text block, each such
    image replaced by the placeholder, and every other message as it was (a record that
    held only blank text gone, its child loaded in its place)."""
    original = before[path].messages
    repaired = after[versions[path].repaired["unsafe"]].messages
    blank_before = [uuid for uuid, block in _blocks_of(original) if _blank_text(block)]
    replaced = _placeholders(repaired)
    media_before = {
        uuid
        for uuid, block in _blocks_of(original)
        if isinstance(block, dict) and block.get("type") in MEDIA_TYPES
    }
    assert [uuid for uuid, block in _blocks_of(repaired) if _blank_text(block)] == []
    assert set(replaced) <= media_before
    assert _placeholders(original) == []
    if _name(path).startswith("SF605-"):
        assert blank_before
    elif "-info" not in _name(path):
        assert replaced
    only_blank = {
        m.uuid
        for m in original
        if _content({"message": m.message})
        and all(_blank_text(b) for b in _content({"message": m.message}))
    }
    assert [m.uuid for m in repaired] == [m.uuid for m in original if m.uuid not in only_blank]
    by_uuid = {m.uuid: m.message for m in original}
    changed = [
        m.uuid
        for m in repaired
        if _changed_otherwise(by_uuid[m.uuid], m.message, m.uuid in replaced)
    ]
    assert changed == []


def _changed_otherwise(old: Any, new: Any, replaced: bool) -> bool:
    """Whether a message changed but for a placeholder in it (`replaced`) or a blank
    text block it held."""
    if old == new:
        return False
    if not _kept_as_intended(old, new, set()):
        return True
    return not replaced and not any(_blank_text(b) for b in _content({"message": old}))


def test_thinking_the_provider_refuses_is_not_loaded_after_the_repair(
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """SF606 (anthropics/claude-code#21726): the reader loads the three thinking blocks
    with an empty, a missing and a 24-character signature, which Claude Code sends back
    and Anthropic refuses; after the unsafe repair their lines are gone from the loaded
    chain and every other message is loaded as it was. The safe repair changes nothing."""
    path = FIXTURES / "SF606-claude-empty-missing-and-cut-signatures" / "input.jsonl"
    original = before[path].messages
    refused = _refused_thinking(original)
    signatures = [original[at].message["content"][block].get("signature") for at, block in refused]
    assert signatures[:2] == ["", None]
    assert len(signatures) == 3
    assert len(signatures[2]) == 24
    gone = {original[at].uuid for at, _ in refused}
    repaired = after[versions[path].repaired["unsafe"]].messages
    assert list(repaired) == [m for m in original if m.uuid not in gone]
    assert _refused_thinking(repaired) == {}
    assert after[versions[path].repaired["safe"]].messages == original


def _applied(path: Path, mode: str, versions: dict[Path, Versions]) -> list[Diagnostic]:
    """sessionfix's diagnostics of the copy it repaired, with `mode`'s settings, each
    with its fix only if a repair in `mode` applies it (else none)."""
    settings, _ = _case_settings(path)
    settings = msgspec.structs.replace(settings, unsafe_fixes=mode == "unsafe")
    return [
        d.with_fix(None)
        if d.fix is not None and d.fix.applicability is Applicability.UNSAFE and mode != "unsafe"
        else d
        for d in check_file(versions[path].copy, settings)
    ]


def _replays_unhooked(path: Path, mode: str, versions: dict[Path, Versions]) -> set[str]:
    """The uuids a repair in `mode` may take off the loaded chain as replays, read from
    sessionfix's own diagnostics of the copy it repaired (with `mode`'s settings).

    A record qualifies only if it is both: a proven copy, a uuid on more than one line
    of the original that an SF203 diagnostic finds to be a replay (it offers to drop the
    copy for a survivor) and no mere conflict; and a record the chain used to pass
    through that an applied SF502 fix unhooks, i.e. an ancestor of a re-parented
    record's old parent in the original that is no ancestor of its new parent in the
    repair (walked as the reader links them, `linked_records`). The fix must be in the
    repair: the re-parented record carries the new parent there."""
    diagnostics = _applied(path, mode, versions)
    counts: dict[str, int] = {}
    for record in records(path):
        if isinstance(uuid := record.get("uuid"), str):
            counts[uuid] = counts.get(uuid, 0) + 1
    copies = {
        uuid
        for d in diagnostics
        if d.code == "SF203" and d.fix is not None
        if isinstance(uuid := _record_on(path, d.row).get("uuid"), str) and counts[uuid] > 1
    }
    old_links = linked_records(records(path))
    new_records = records(versions[path].repaired[mode])
    new_links = linked_records(new_records)
    unhooked: set[str] = set()
    for d in diagnostics:
        if d.code != "SF502" or d.fix is None:
            continue
        for edit in d.fix.edits:
            if not isinstance(edit, RewriteRecord) or edit.produce is None:
                continue
            before_fix = _record_on(path, edit.row)
            after_fix = json.loads(edit.produce())
            uuid, parent = before_fix.get("uuid"), after_fix.get("parentUuid")
            if parent == before_fix.get("parentUuid") or after_fix.get("uuid") != uuid:
                continue
            if not any(
                r.get("uuid") == uuid and r.get("parentUuid") == parent for r in new_records
            ):
                continue
            above = set(_ancestors(old_links, before_fix.get("parentUuid")))
            unhooked |= (above - set(_ancestors(new_links, parent))) & copies
    return unhooked


def _unanswered(messages: tuple[LoadedMessage, ...]) -> list[tuple[int, str]]:
    """(position, id) of each `tool_use` with no `tool_result` later on the chain."""
    answers: dict[str, list[int]] = {}
    for position, message in enumerate(messages):
        if message.type == "user":
            for block in _tool_results(message):
                answers.setdefault(str(block.get("tool_use_id")), []).append(position)
    found = []
    for position, message in enumerate(messages):
        if message.type == "assistant":
            for block in _blocks({"message": message.message}, "tool_use"):
                call = str(block.get("id"))
                if not any(later > position for later in answers.get(call, ())):
                    found.append((position, call))
    return found


@pytest.mark.parametrize(
    ("path", "mode"),
    _cases("test_every_tool_call_on_the_loaded_chain_has_its_result", ("original", *MODES)),
)
def test_every_tool_call_on_the_loaded_chain_has_its_result(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """The API refuses a resumed session otherwise ("tool_use ids were found without
    tool_result blocks"). The exceptions: a session captured mid-call, whose call is the
    last block of its last message (`PENDING_AT_END`); and before an unsafe repair, the
    calls left without a result mid-chain (`UNANSWERED_UNTIL_UNSAFE`), which only the
    unsafe fixes answer."""
    _, loaded = _load(path, mode, versions, before, after)
    name = _name(path)
    expected = [] if mode == "unsafe" else list(UNANSWERED_UNTIL_UNSAFE.get(name, ()))
    pending = PENDING_AT_END.get(name)
    unanswered = _unanswered(loaded.messages)
    if pending is not None:
        last = len(loaded.messages) - 1
        assert unanswered[-1:] == [(last, pending)]
        assert _content({"message": loaded.messages[last].message})[-1]["id"] == pending
        unanswered = unanswered[:-1]
    assert [call for _, call in unanswered] == expected


REPEAT_IN_ONE_RECORD = FIXTURES / "SF403-claude-repeat-in-one-record" / "input.jsonl"


@pytest.mark.parametrize("mode", MODES)
def test_a_result_repeated_in_one_record_loads_once_with_its_first_text(
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """A user record answering its call twice (`ok`, then `again`): the repair drops the
    repeat only, so the reader returns the call's first result and no placeholder for a
    missing one (a repair that dropped the whole record put one there)."""

    def results(load: ClaudeLoad) -> list[Any]:
        return [
            block.get("content")
            for _, block in _blocks_of(load.messages)
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    assert results(before[REPEAT_IN_ONE_RECORD]) == ["ok", "again"]
    _, repaired = _load(REPEAT_IN_ONE_RECORD, mode, versions, before, after)
    assert results(repaired) == ["ok"]
    assert _unanswered(repaired.messages) == []


def _nearest_returned(
    records_by_uuid: dict[str, dict[str, Any]], uuid: str | None, side: bool
) -> str | None:
    for ancestor in _ancestors(records_by_uuid, uuid):
        if _returned(records_by_uuid[ancestor], side):
            return ancestor
    return None


@pytest.mark.parametrize(("path", "mode"), _cases("test_a_relink_is_followed", MODES))
def test_a_relink_is_followed(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """A record the repair gives a new parent (SF103, SF105, SF402, SF502; or where a
    dropped record's child takes its parent) brings that parent's history with it:
    where the reader loads the record, it loads before it the nearest record it returns
    up the new parent's line."""
    file, repaired = _load(path, mode, versions, before, after)
    old = {r["uuid"]: r for r in records(path) if isinstance(r.get("uuid"), str)}
    new = {r["uuid"]: r for r in records(file) if isinstance(r.get("uuid"), str)}
    position = {m.uuid: i for i, m in enumerate(repaired.messages)}
    unfollowed = []
    for uuid, record in new.items():
        if uuid not in old or old[uuid].get("parentUuid") == record.get("parentUuid"):
            continue
        if uuid not in position:
            continue
        parent = _nearest_returned(
            new, record.get("parentUuid"), versions[path].subagent is not None
        )
        if parent is not None and position.get(parent, len(position)) >= position[uuid]:
            unfollowed.append(uuid)
    assert unfollowed == []


@pytest.mark.parametrize(("path", "mode"), _cases("test_what_a_repair_adds_is_loaded", MODES))
def test_what_a_repair_adds_is_loaded(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """A record the repair gives back or writes (a glued or damaged line's record split
    or cut out, SF001 and SF008; a missing result, SF402) is on the chain the reader
    loads, where the reader returns its kind: a record brought back only to stay off
    the chain restores nothing."""
    file, repaired = _load(path, mode, versions, before, after)
    old = {r.get("uuid") for r in records(path)}
    loaded = {m.uuid for m in repaired.messages}
    added = [
        r["uuid"]
        for r in records(file)
        if isinstance(r.get("uuid"), str) and r["uuid"] not in old and r.get("type") in CHAIN_TYPES
    ]
    side = versions[path].subagent is not None
    assert [u for u in added if u not in loaded and _returned_by_uuid(file, u, side)] == []


def _returned_by_uuid(file: Path, uuid: str, side: bool) -> bool:
    return _returned(linked_records(records(file))[uuid], side)


@pytest.mark.parametrize(
    ("path", "mode"), _cases("test_a_preserved_segment_is_loaded_whole", ("unsafe",))
)
def test_a_preserved_segment_is_loaded_whole(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """After the unsafe fixes (SF502), each compaction's preserved segment whose head and
    tail are in the file is whole on the chain the reader loads: with its tail, the
    reader loads its head, and every record it returns from the tail back to the head
    (walked as the reader links them, `linked_records`), in that order. A segment an
    SF502 fix mended is loaded in any case: the compaction's summary (the anchor, which
    the reader puts the head below), then the head, then the tail."""
    file, repaired = _load(path, mode, versions, before, after)
    by_uuid = linked_records(records(file))
    loaded = [m.uuid for m in repaired.messages]
    mended = {
        _record_on(path, d.row).get("uuid")
        for d in _applied(path, mode, versions)
        if d.code == "SF502" and d.fix is not None
    }
    broken = []
    for record in by_uuid.values():
        metadata = record.get("compactMetadata")
        segment = metadata.get("preservedSegment") if isinstance(metadata, dict) else None
        if record.get("subtype") != "compact_boundary" or not isinstance(segment, dict):
            continue
        head, tail = segment.get("headUuid"), segment.get("tailUuid")
        anchor = segment.get("anchorUuid")
        if record["uuid"] in mended:
            shown = [u for u in (anchor, head, tail) if u in by_uuid and _returned(by_uuid[u])]
            if (
                tail not in by_uuid
                or head not in shown
                or [u for u in loaded if u in shown] != shown
            ):
                broken.append(record["uuid"])
                continue
        if head not in by_uuid or tail not in by_uuid or tail not in loaded:
            continue
        walk = list(_ancestors(by_uuid, tail))
        kept = (
            [u for u in reversed(walk[: walk.index(head) + 1]) if _returned(by_uuid[u])]
            if head in walk
            else []
        )
        if head not in walk or [u for u in loaded if u in kept] != kept:
            broken.append(record["uuid"])
    assert broken == []


GLUED_CASES = [pytest.param(path, id=_name(path)) for path in SESSIONS if _name(path) in GLUED]


@pytest.mark.parametrize("path", GLUED_CASES)
@pytest.mark.parametrize("mode", MODES)
def test_a_glued_line_before_and_after_the_repair(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """Before the repair the reader drops the glued line. Where a later line replays its
    assistant message's `uuid`, the reader keeps that copy, so the message is on the
    chain all the same; where none does, the message is missing from the chain. The
    repair splits the line: both records are lines of their own again, the message is
    on the loaded chain (the replay where there is one: the physically last record of a
    `uuid` wins), and with a replay the loaded chain is the same message for message."""
    glued = GLUED[_name(path)]
    lines = _lines(path)
    assert _parse(lines[glued.row - 1]) is None
    first, second = _split_glued(lines[glued.row - 1])
    assert (first["uuid"], first["type"]) == (glued.uuid, "assistant")
    assert second["type"] == glued.second
    file = versions[path].repaired[mode]
    assert first in records(file)
    assert second in records(file)
    original = {m.uuid: m for m in before[path].messages}
    repaired = after[file].messages
    if glued.replayed_on is None:
        assert glued.uuid not in original
        assert {m.uuid: m for m in repaired}[glued.uuid].message == first["message"]
        return
    replay = _parse(lines[glued.replayed_on - 1])
    assert replay is not None
    assert replay["uuid"] == glued.uuid
    assert first["message"] != replay["message"]
    assert first["message"] == {
        k: v for k, v in replay["message"].items() if k != "context_management"
    }
    assert original[glued.uuid].message == replay["message"]
    assert {m.uuid: m for m in repaired}[glued.uuid].message == replay["message"]
    assert repaired == before[path].messages


_SENT_OF_TYPE = {"assistant": Sent.ASSISTANT, "system": Sent.SYSTEM}


def _sent(message: LoadedMessage) -> Sent:
    """A returned record as `sessionfix context` names it."""
    if message.type != "user":
        return _SENT_OF_TYPE.get(message.type, Sent.OTHER)
    if _tool_results(message):
        return Sent.TOOL_RESULT
    return Sent.USER


@pytest.mark.parametrize(("path", "mode"), _cases("context", ("original", *MODES)))
def test_context_counts_what_the_reader_returns(
    path: Path,
    mode: str,
    versions: dict[Path, Versions],
    before: dict[Path, ClaudeLoad],
    after: dict[Path, ClaudeLoad],
) -> None:
    """`sessionfix context` counts the records Claude Code's reader returns, by kind."""
    file, loaded = _load(path, mode, versions, before, after)
    session = versions[path]
    context = context_of(file, named_as=session.copy)
    chain = intended_chain(file, session.subagent is not None)
    summaries = sum(1 for r in chain if r.get("isCompactSummary") is True)
    expected = Counter(_sent(message) for message in loaded.messages)
    expected[Sent.USER] -= summaries
    expected[Sent.SUMMARY] += summaries
    assert context.messages == len(loaded.messages)
    assert context.by_sent == {sent: expected[sent] for sent in Sent if expected[sent] > 0}


def _parallel_reads_session() -> list[dict[str, Any]]:
    """A prompt answered by two assistant messages that each call tools in parallel
    (one API message over several lines, each line a call; each result a child of its
    call's line, off the chain until the reader re-attaches it)."""
    session = "5d0c1f7e-93a2-4c6b-8e15-2b7f4a9d6c31"
    records: list[dict[str, Any]] = []

    def add(kind: str, parent: str | None, body: dict[str, Any]) -> str:
        uuid = f"5d0c1f7e-0000-4000-8000-{len(records) + 1:012d}"
        stamp = f"2026-09-14T16:00:{len(records) + 1:02d}.000Z"
        records.append(
            {"parentUuid": parent, "isSidechain": False, "type": kind, **body}
            | {"uuid": uuid, "timestamp": stamp, "sessionId": session, "cwd": "/home/dev/app"}
        )
        return uuid

    def calls(parent: str, message: str, first: int, count: int) -> list[str]:
        lines = []
        for call in range(first, first + count):
            block = {"type": "tool_use", "id": f"toolu_01par{call:019d}", "name": "Read"}
            block["input"] = {"file_path": f"/home/dev/app/{call}.json"}
            content = {"role": "assistant", "id": message, "type": "message"}
            content |= {"content": [block], "stop_reason": "tool_use"}
            parent = add("assistant", parent, {"message": content})
            lines.append(parent)
        return lines

    def result(call: int, line: str) -> str:
        block = {"type": "tool_result", "tool_use_id": f"toolu_01par{call:019d}", "content": "{}"}
        body = {"message": {"role": "user", "content": [block]}}
        return add("user", line, body | {"sourceToolAssistantUUID": line})

    prompt = add("user", None, {"message": {"role": "user", "content": "Compare the configs."}})
    first = calls(prompt, "msg_01ParallelReadsA", 1, 3)
    last = [result(call, line) for call, line in enumerate(first, 1)][-1]
    second = calls(last, "msg_01ParallelReadsB", 4, 2)
    for call, line in enumerate(second, 4):
        result(call, line)
    return records


def test_context_counts_what_the_reader_returns_of_parallel_results_it_cannot_read(
    tmp_path: Path,
) -> None:
    """Results of parallel calls on lines the reader cannot parse (a byte-order mark, a
    record spread over lines; the file's last line among them): it never sees them, so
    it neither re-attaches them nor stops its chain there. `context` cut the chain at
    the first such result it would have re-attached (1 message where the reader returns
    8)."""
    records = _parallel_reads_session()
    lines = [json.dumps(record).encode() for record in records]
    bom = b"\xef\xbb\xbf"
    lines[4] = bom + lines[4]
    lines[5] = json.dumps(records[5], indent=2).encode()
    lines[-1] = bom + lines[-1]
    path = tmp_path / f"{records[0]['sessionId']}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    loaded = load_with_claude([path])[path]
    assert loaded.error is None
    context = context_of(path)
    assert context.messages == len(loaded.messages) == 8
    expected = Counter(_sent(message) for message in loaded.messages)
    assert context.by_sent == {sent: count for sent, count in expected.items() if count}


def test_the_reader_loads_the_slimmed_session_as_context_predicts(
    slim_case: SlimCase, before: dict[Path, ClaudeLoad], after: dict[Path, ClaudeLoad]
) -> None:
    """`slim` brings the session under its budget and its size: Claude Code's reader
    returns every record it returned before, in order, which `context` counts; the old
    tool outputs keep their head and tail around the placeholder, and so does the
    `toolUseResult` copy for the UI; the old prompt's image is a placeholder; the old
    `progress` records are gone, the results parented to them parented to what Claude
    Code bridges them to; the last two turns are as they were."""
    old_load, new_load = before[slim_case.original], after[slim_case.slimmed]
    assert new_load.error is None
    context = context_of(slim_case.slimmed)
    assert slim_case.budget is not None
    assert slim_case.max_size is not None
    assert context.tokens <= slim_case.budget < context_of(slim_case.original).tokens
    assert slim_case.slimmed.stat().st_size <= slim_case.max_size
    assert context.messages == len(new_load.messages)
    assert context.by_sent == dict(Counter(_sent(message) for message in new_load.messages))
    cut = replaced = 0
    for old, new in zip(old_load.messages, new_load.messages, strict=True):
        assert (old.uuid, old.type) == (new.uuid, new.type)
        if old.message == new.message:
            continue
        was, now = old.message["content"][-1], new.message["content"][-1]
        if was["type"] == "tool_result":
            assert_cut(was["content"], now["content"])
            cut += 1
        else:
            assert (was["type"], now["type"]) == ("image", "text")
            assert now["text"].startswith(CUT_MARK)
            replaced += 1
    assert (cut, replaced) == (8, 1)
    assert old_load.messages[-8:] == new_load.messages[-8:]
    originals = {
        record["uuid"]: record
        for record in map(json.loads, slim_case.original.read_text().splitlines())
    }
    slimmed = {
        record["uuid"]: record
        for record in map(json.loads, slim_case.slimmed.read_text().splitlines())
    }
    assert [uuid for uuid in originals if uuid not in slimmed] == [
        uuid for uuid, record in originals.items() if record["type"] == "progress"
    ][:8]
    copies = 0
    for uuid, record in slimmed.items():
        original = originals[uuid]
        parent = originals.get(original["parentUuid"])
        if parent is not None and parent["uuid"] not in slimmed:
            assert record["parentUuid"] == parent["parentUuid"]
        else:
            assert record["parentUuid"] == original["parentUuid"]
        if record.get("toolUseResult") != original.get("toolUseResult"):
            assert_cut(original["toolUseResult"]["stdout"], record["toolUseResult"]["stdout"])
            copies += 1
    assert copies == 8


def test_the_reader_loads_a_session_slimmed_to_a_size_as_it_was(
    size_case: SlimCase, before: dict[Path, ClaudeLoad], after: dict[Path, ClaudeLoad]
) -> None:
    """`slim --max-size` alone drops the old `progress` records and cuts the
    `toolUseResult` copies of the old outputs: Claude Code's reader returns exactly the
    messages it returned before, which `context` counts as it did."""
    old_load, new_load = before[size_case.original], after[size_case.slimmed]
    assert new_load.error is None
    assert new_load.messages == old_load.messages
    assert size_case.max_size is not None
    assert size_case.slimmed.stat().st_size <= size_case.max_size
    context, was = context_of(size_case.slimmed), context_of(size_case.original)
    assert (context.tokens, context.messages) == (was.tokens, was.messages)
    assert context.messages == len(new_load.messages)
    records = [json.loads(line) for line in size_case.slimmed.read_text().splitlines()]
    assert sum(record["type"] == "progress" for record in records) == 2
    copies = [record["toolUseResult"]["stdout"] for record in records if "toolUseResult" in record]
    assert sum(CUT_MARK in copy for copy in copies) == 8
