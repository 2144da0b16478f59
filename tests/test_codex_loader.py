"""Codex rollouts checked against Codex's own history reconstruction (`codex app-server`
0.169.0, `tests/codex_loader.py`), before and after `sessionfix repair`.

Every Codex rollout the tests can see is taken: the shared corpus, the example, every
fixture whose input is a Codex rollout (`tests/fixtures/*codex*/`, by glob, so a new
fixture is taken without touching this module), a fixed set of generated rollouts
(`tests/sessions.py`'s `rollouts()`, each drawn under a fixed seed) and a small clean
rollout with one kind of damage per copy (`_variants`). Each is repaired with the safe
and with the unsafe fixes, and loaded in Codex with the original and with its intended
records written one per line (`intended_records`). Then:

- Codex's history of the original is `codex_history` of its lines (a model of what
  Codex does, below), and Codex refuses the thread where the model says it would;
- Codex loads the repair wherever it loads the original, and the repair's history is
  exactly the one Codex rebuilds from the intended records, which is also
  `intended_history` (the model applied to them): a glued line's records apart, a
  line's BOM, NUL bytes and CR gone, a record broken over two lines whole, torn and
  garbled lines gone;
- a rollout Codex refuses is one sessionfix reports (SF101, or SF005 for a BOM before
  the `session_meta` record); a repair of a rollout with no `session_meta` stays
  refused.
- `sessionfix context` counts one message per item Codex sends, of the kind Codex sent,
  for each of them (none where Codex refuses it).

Codex 0.169 takes only UUIDs as thread ids; most hand-written samples have other ids.
Those are loaded a second time with a UUID standing in (`stand_in_id`, on a private copy:
the id takes no part in the history), so that their history is checked as well.

Repairs Codex shows to be wrong are named in `KNOWN_REPAIR_GAPS`, refusals sessionfix
does not report in `KNOWN_UNREPORTED_REFUSALS`; their cases are expected to fail,
strictly.

What Codex 0.169.0 does when it rebuilds history, as observed with this harness:

- the first non-blank line must be a `session_meta` record whose payload has a UUID
  `id` and string `timestamp`, `cwd`, `originator` and `cli_version` (else "does not
  start with session metadata"; with no `session_meta` payload it can read at all, "is
  empty"; with another record first, an error about that record's fields); a BOM
  before it is the same as no `session_meta`; blank lines before it are fine;
- each other line is parsed on its own (whitespace, CR included, around the JSON is
  fine); a line that does not parse (a BOM, NUL bytes after the JSON, two records glued
  together: both are lost), or has no string `timestamp`, is skipped; so is a
  `response_item` whose payload is no item Codex knows (`_valid_item`);
- the history opens with a developer message holding the base instructions
  (`session_meta.payload.base_instructions.text`; Codex's own where there is none, an
  older `instructions` string is not used);
- `response_item` payloads follow in file order, sent with the fields Codex knows only
  (`status` on an output and unknown keys dropped, `content: null` added to reasoning;
  an inline image it cannot decode becomes the text "image content omitted because it
  could not be processed"; `_sent_as`);
- a `compacted` record's `replacement_history` replaces the history before it, and a
  compaction without one rebuilds it as the user messages so far and the `message` (or
  "(no summary available)"); a `compacted` record without a string `message` is
  skipped. But where a `thread_rolled_back` (of one turn or more) is anywhere in the
  file, before or after them, Codex takes no replacement history at all: it replays
  the lines, and a compaction without one still adds its summary message;
- `thread_rolled_back {num_turns}` cuts the history before its last user message, that
  many times;
- tool outputs are then paired: an output with no call before it is dropped; a call
  with no output gets one, `"aborted"`, right after it; two outputs for one call are
  both sent.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import Phase, given, seed
from hypothesis import settings as hypothesis_settings

from sessionfix import Settings, check_file
from sessionfix.context import context_of
from sessionfix.model.loaded import Sent
from sessionfix.repair.targets import repair_to

from .codex_loader import (
    PROBE,
    CodexLoad,
    _private_copy,
    load_with_codex,
    require_codex_at_collection,
)
from .conftest import CORPUS, FIXTURES, ROOT
from .sessions import rollouts
from .slim_cases import SlimCase, assert_cut, slimmed
from .test_fixtures import _settings

require_codex_at_collection()

MODES = ("safe", "unsafe")
GENERATED = 40
"""Generated rollouts of each kind (damaged and clean)."""

KNOWN_REPAIR_GAPS: dict[str, str] = {}
"""Repairs Codex shows to be wrong (test id → what is wrong); their cases of
`test_a_repair_loads_with_the_intended_history` and
`test_a_repair_shows_the_intended_turns` are expected to fail, strictly."""
UNSAFE_ONLY: dict[str, str] = {
    "fixtures/SF008-codex-partial-line-then-full-record": (
        "the whole record after a damaged prefix comes back only with unsafe fixes (SF008)"
    ),
}
"""Rollouts whose intended history only the unsafe repair gives (name → why): their
safe repair loads as the original does."""
KNOWN_UNREPORTED_REFUSALS: dict[str, str] = {
    **dict.fromkeys(
        (
            "corpus/session-doctor__basic-session.jsonl",
            "corpus/session-doctor__current-response-item-ambiguities.jsonl",
            "corpus/session-doctor__current-response-items.jsonl",
            "corpus/simonw-claude-code-transcripts__sample_codex_session.jsonl",
        ),
        'the session_meta id is no UUID: Codex 0.169 refuses the thread ("does not start '
        'with session metadata") and sessionfix reports nothing',
    ),
    "variants/meta-without-originator.jsonl": (
        "the session_meta payload has no originator: Codex 0.169 refuses the thread "
        '("does not start with session metadata") and sessionfix reports nothing'
    ),
    "corpus/session-doctor__event-msg-fallback.jsonl": (
        "the session_meta payload has no timestamp and no originator: Codex 0.169 refuses "
        'the thread ("is empty") and sessionfix reports nothing'
    ),
}
"""Originals Codex refuses that sessionfix does not report (name → why Codex refuses);
their case of `test_a_refused_rollout_is_reported` is expected to fail, strictly."""


# --- which files --------------------------------------------------------------------------


def _first_record(data: bytes) -> Any:
    for line in data.splitlines():
        if line.strip():
            try:
                return json.loads(line.lstrip(b"\xef\xbb\xbf"))
            except ValueError:
                return None
    return None


def _is_codex(path: Path) -> bool:
    """A rollout: its first record is `session_meta`, or shaped `{timestamp, type,
    payload}`."""
    first = _first_record(path.read_bytes())
    return isinstance(first, dict) and (
        first.get("type") == "session_meta" or {"timestamp", "type", "payload"} <= set(first)
    )


def _draw(corrupt: bool, number: int) -> bytes:
    """One rollout drawn from `rollouts()` under a fixed seed: the same every run."""
    drawn: list[bytes] = []

    @seed(number)
    @hypothesis_settings(max_examples=5, database=None, phases=[Phase.generate])
    @given(rollouts(corrupt=corrupt))
    def draw(data: bytes) -> None:
        drawn.append(data)

    draw()
    return drawn[-1]


def _generated() -> dict[str, bytes]:
    """Generated rollouts by name, damaged and clean ones."""
    found: dict[str, bytes] = {}
    for corrupt in (True, False):
        kind = "damaged" if corrupt else "clean"
        for number in range(GENERATED):
            data = _draw(corrupt, number)
            if data not in found.values():
                found[f"generated/{kind}-{number:02d}.jsonl"] = data
    return found


def _line(second: int, line_type: str, payload: dict[str, Any]) -> bytes:
    stamp = f"2026-10-01T09:00:{second:02d}.000Z"
    record = {"timestamp": stamp, "type": line_type, "payload": payload}
    return json.dumps(record, separators=(",", ":")).encode()


def _turn(n: int, second: int) -> list[bytes]:
    call = f"call_v{n}"
    return [
        _line(second, "turn_context", {"turn_id": f"turn-{n}", "cwd": "/home/me/app"}),
        _line(
            second + 1,
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"step {n}"}],
            },
        ),
        _line(
            second + 2,
            "response_item",
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": f"make step{n}"}),
                "call_id": call,
            },
        ),
        _line(
            second + 3,
            "response_item",
            {
                "type": "function_call_output",
                "call_id": call,
                "output": "Process exited with code 0",
            },
        ),
        _line(
            second + 4,
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"step {n} done"}],
            },
        ),
    ]


def _variants() -> dict[str, bytes]:
    """A small clean rollout and copies of it with one kind of damage each, to pin down
    what Codex does with each (lines: 1 `session_meta`, then turns of five lines:
    `turn_context`, user message, call, output, assistant message)."""
    meta = {
        "id": "019f8e4a-1c2d-7e3f-8a4b-5c6d7e8f9a0b",
        "timestamp": "2026-10-01T09:00:00.000Z",
        "cwd": "/home/me/app",
        "originator": "codex_cli_rs",
        "cli_version": "0.169.0",
        "source": "cli",
        "model_provider": "openai",
    }
    head = _line(0, "session_meta", meta)
    lines = [head, *_turn(1, 1), *_turn(2, 10)]
    # 0 session_meta; 1-5 the first turn (3 its call, 4 its output); 6-10 the second.

    def join(parts: list[bytes], end: bytes = b"\n") -> bytes:
        return b"".join(part + end for part in parts)

    no_stamp = json.loads(lines[5])
    del no_stamp["timestamp"]
    short_meta = {k: v for k, v in meta.items() if k != "originator"}
    return {
        "variants/clean.jsonl": join(lines),
        "variants/bom-first-line.jsonl": join([b"\xef\xbb\xbf" + head, *lines[1:]]),
        "variants/bom-on-output.jsonl": join([*lines[:4], b"\xef\xbb\xbf" + lines[4], *lines[5:]]),
        "variants/glued-call-and-output.jsonl": join([*lines[:3], lines[3] + lines[4], *lines[5:]]),
        "variants/nul-after-output.jsonl": join([*lines[:9], lines[9] + b"\x00" * 8, *lines[10:]]),
        "variants/crlf.jsonl": join(lines, b"\r\n"),
        "variants/blank-lines.jsonl": join([b"", head, b"  ", *lines[1:]]),
        "variants/torn-tail.jsonl": join(lines) + lines[3][:40],
        "variants/no-timestamp.jsonl": join(
            [*lines[:5], json.dumps(no_stamp).encode(), *lines[6:]]
        ),
        "variants/meta-without-originator.jsonl": join(
            [_line(0, "session_meta", short_meta), *lines[1:]]
        ),
        "variants/meta-not-first.jsonl": join([lines[1], head, *lines[2:]]),
        "variants/orphan-and-missing-output.jsonl": join(
            [*lines[:4], lines[4].replace(b"call_v1", b"call_gone"), *lines[5:]]
        ),
        "variants/duplicate-output.jsonl": join([*lines[:5], lines[4], *lines[5:]]),
        # As a repository commits a rollout: every record spread over lines, indented.
        "variants/pretty-printed.jsonl": join([_pretty(line) for line in lines]),
        "variants/pretty-printed-call.jsonl": join([*lines[:3], _pretty(lines[3]), *lines[4:]]),
    }


def _pretty(line: bytes) -> bytes:
    """A record pretty-printed, as `JSON.stringify(record, null, 2)` writes it."""
    return json.dumps(json.loads(line), indent=2).encode()


GENERATED_ROLLOUTS = {**_generated(), **_variants()}


def _sources() -> dict[str, Path | None]:
    """Each rollout by its name in test ids (None: a generated one, in
    `GENERATED_ROLLOUTS`)."""
    found: dict[str, Path | None] = {}
    for path in sorted((CORPUS / "codex").glob("*.jsonl")):
        found[f"corpus/{path.name}"] = path
    example = ROOT / "examples" / "sessions" / "codex-rollout.jsonl"
    found[f"examples/{example.name}"] = example
    for path in sorted(FIXTURES.glob("*codex*/input.jsonl")):
        if _is_codex(path):
            found[f"fixtures/{path.parent.name}"] = path
    found.update(dict.fromkeys(GENERATED_ROLLOUTS))
    return found


SOURCES = _sources()


def _case_settings(name: str) -> tuple[Settings, str]:
    path = SOURCES[name]
    if path is not None and path.parent.parent == FIXTURES:
        spec_file = path.parent / "case.json"
        if spec_file.exists():
            spec = json.loads(spec_file.read_text())
            return _settings(spec), spec.get("filename", path.name)
    return Settings(quiescence=0.0), Path(name).name


# --- Codex's reading of a rollout, as a model ---------------------------------------------

BASE = {"type": "message", "role": "developer", "base_instructions": None}
"""Stands for the developer message of base instructions that opens every history
(`base_instructions` None: Codex's own text, not checked)."""
CALLS = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "local_shell_call": "function_call_output",
    "tool_search_call": "tool_search_output",
}
OUTPUTS = frozenset(CALLS.values())
META_FIELDS = ("timestamp", "cwd", "originator", "cli_version")
CONTENT_TYPES = frozenset({"input_text", "output_text", "input_image"})
KEPT_UNSENT = frozenset({"ghost_snapshot"})
"""Items Codex reads back and never sends to the model."""


def _is_uuid(text: Any) -> bool:
    import uuid

    try:
        uuid.UUID(text)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


def _session_meta(record: Any, stand_in: bool) -> dict[str, Any] | None:
    """The payload of a `session_meta` record Codex accepts (None if it refuses it);
    with `stand_in`, any string id is taken (the loader gives it a UUID)."""
    if not isinstance(record, dict) or record.get("type") != "session_meta":
        return None
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return None
    if not (_is_uuid(payload.get("id")) or (stand_in and isinstance(payload.get("id"), str))):
        return None
    if not all(isinstance(payload.get(field), str) for field in META_FIELDS):
        return None
    return payload


def _valid_item(item: Any) -> bool:
    """Whether Codex reads a `response_item` payload as an item it sends."""
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        return False
    kind = item["type"]
    if kind == "message":
        content = item.get("content")
        return (
            isinstance(item.get("role"), str)
            and isinstance(content, list)
            and all(isinstance(c, dict) and c.get("type") in CONTENT_TYPES for c in content)
        )
    if kind in CALLS or kind in OUTPUTS:
        return isinstance(item.get("call_id"), str)
    return kind not in KEPT_UNSENT


def codex_history(records: list[Any], stand_in: bool = False) -> list[dict[str, Any]] | None:
    """The history Codex rebuilds from a rollout's records (one per line, None for a
    line that does not parse), or None where it refuses the thread."""
    present = [r for r in records if r is not EMPTY]
    if not present:
        return None
    meta = _session_meta(present[0], stand_in)
    if meta is None:
        return None
    instructions = meta.get("base_instructions")
    text = instructions.get("text") if isinstance(instructions, dict) else None
    base = {**BASE, "base_instructions": text if isinstance(text, str) else None}
    history: list[dict[str, Any]] = []
    replays = any(
        isinstance(r, dict)
        and isinstance(r.get("timestamp"), str)
        and r.get("type") == "event_msg"
        and isinstance(r.get("payload"), dict)
        and _rolled_back(r["payload"]) > 0
        for r in present[1:]
    )
    for record in present[1:]:
        if not isinstance(record, dict) or not isinstance(record.get("timestamp"), str):
            continue
        payload = record.get("payload")
        kind = record.get("type")
        if kind == "response_item" and _valid_item(payload):
            history.append(payload)
        elif kind == "compacted" and isinstance(payload, dict):
            history = _compacted(history, payload, replays)
        elif kind == "event_msg" and isinstance(payload, dict):
            for _ in range(_rolled_back(payload)):
                starts = [at for at, item in enumerate(history) if _is_user(item)]
                history = history[: starts[-1]] if starts else history
    return [base, *_paired(history)]


def _rolled_back(payload: dict[str, Any]) -> int:
    """The turns a `thread_rolled_back` event takes back (0 for any other event)."""
    turns = payload.get("num_turns")
    if payload.get("type") != "thread_rolled_back" or not isinstance(turns, int):
        return 0
    return max(turns, 0)


def _is_user(item: dict[str, Any]) -> bool:
    return item.get("type") == "message" and item.get("role") == "user"


NO_SUMMARY = "(no summary available)"


def _compacted(
    history: list[dict[str, Any]], payload: dict[str, Any], replays: bool
) -> list[dict[str, Any]]:
    """The history after a `compacted` record: its `replacement_history` (unless the
    rollout rolls a turn back somewhere, `replays`: then Codex takes none); without one,
    the user messages so far and its `message` (or `NO_SUMMARY`) as a user message. A
    record without a string `message` is no compaction Codex reads."""
    message = payload.get("message")
    if not isinstance(message, str):
        return history
    carried = payload.get("replacement_history")
    metadata = payload.get("replacement_history_metadata")
    if metadata is not None and (
        not isinstance(carried, list)
        or not isinstance(metadata, list)
        or len(metadata) != len(carried)
    ):
        return history
    if isinstance(carried, list):
        return history if replays else [item for item in carried if _valid_item(item)]
    summary = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": message or NO_SUMMARY}],
    }
    return [*[item for item in history if _is_user(item)], summary]


def _paired(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outputs with no call before them dropped, calls with none after them answered
    `"aborted"` right after the call."""
    answered = {(item["type"], item["call_id"]) for item in history if item.get("type") in OUTPUTS}
    called: set[tuple[str, str]] = set()
    out = []
    for item in history:
        kind = item.get("type")
        if kind in OUTPUTS and (kind, item["call_id"]) not in called:
            continue
        out.append(item)
        if kind in CALLS:
            key = (CALLS[kind], item["call_id"])
            called.add(key)
            if key not in answered:
                out.append(_aborted(kind, item["call_id"]))
                answered.add(key)
    return out


def _aborted(kind: str, call_id: str) -> dict[str, Any]:
    """The output Codex puts after a call that has none."""
    if kind == "tool_search_call":
        return {
            "type": "tool_search_output",
            "call_id": call_id,
            "status": "completed",
            "execution": "client",
            "tools": [],
        }
    return {"type": CALLS[kind], "call_id": call_id, "output": "aborted"}


EMPTY = object()
"""A blank line."""


def codex_records(data: bytes) -> list[Any]:
    """The file's lines as Codex parses them: each on its own, whitespace (CR too) around
    the JSON allowed, anything else (a BOM, NUL bytes, a second record) fails it."""
    records: list[Any] = []
    for line in data.split(b"\n"):
        if not line.strip():
            records.append(EMPTY)
            continue
        try:
            records.append(json.loads(line.decode("utf-8")))
        except ValueError:
            records.append(None)
    return records


def _objects(text: str) -> list[Any] | None:
    """The JSON values written one after the other in `text` (a glued line), or None
    where it is not that."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    text = text.strip()
    while at < len(text):
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            return None
        found.append(value)
        at = end
        while at < len(text) and text[at] in " \t\r":
            at += 1
    return found


SPREAD_LINES = 200
"""Lines a record spread over lines may take, in these rollouts."""


def intended_records(data: bytes) -> list[Any]:
    """The records the file was meant to hold, one per line: a line's BOM, NUL bytes
    and CR gone, a glued line's records apart, a record broken over lines (or
    pretty-printed) whole, a torn or garbled line dropped (rules SF001-SF009)."""
    lines = data.split(b"\n")
    records: list[Any] = []
    at = 0
    while at < len(lines):
        line = lines[at].replace(b"\x00", b"").strip().removeprefix(b"\xef\xbb\xbf")
        at += 1
        if not line:
            continue
        text = line.decode("utf-8", "replace")
        objects = _objects(text)
        joined = text
        for end in range(at, min(len(lines), at + SPREAD_LINES)):
            if objects is not None or not _outside_strings(joined):
                break
            joined += lines[end].replace(b"\x00", b"").decode("utf-8", "replace").strip()
            objects = _objects(joined)
            if objects is not None:
                at = end + 1
        if objects is None:
            objects = _whole_record_after_damage(text)
        records.extend(o for o in objects or () if isinstance(o, dict))
    return records


def _outside_strings(text: str) -> bool:
    """Whether the end of `text` lies outside JSON strings, where a line break is only
    whitespace (inside one, it may stand for a character that is gone)."""
    return re.sub(r"\\.", "", text, flags=re.DOTALL).count('"') % 2 == 0


def _whole_record_after_damage(text: str) -> list[Any] | None:
    """A whole record written after a damaged prefix (two writes interleaved): the
    first `{` from which the rest of the line is one record."""
    at = text.find("{", 1)
    while at > 0:
        found = _objects(text[at:])
        record = found[0] if found and len(found) == 1 else None
        if isinstance(record, dict) and record.keys() >= {"timestamp", "type", "payload"}:
            return found
        at = text.find("{", at + 1)
    return None


def intended_history(data: bytes, stand_in: bool = False) -> list[dict[str, Any]] | None:
    """The history the session should have had: its intended records, rebuilt as Codex
    rebuilds them (None where Codex would refuse them)."""
    return codex_history(intended_records(data), stand_in)


# --- comparing what Codex sent with the model -----------------------------------------------


def _sent_as(expected: dict[str, Any], sent: dict[str, Any]) -> bool:
    """Whether Codex sent `expected` as `sent`: the same item with the fields Codex knows
    (it drops others, e.g. `status` on an output, and may add an `id`)."""
    if expected.keys() >= {"type", "base_instructions"}:
        if sent.get("type") != "message" or sent.get("role") != "developer":
            return False
        text = expected["base_instructions"]
        return text is None or sent.get("content") == [{"type": "input_text", "text": text}]
    if expected == sent:
        return True
    return sent.get("type") == expected.get("type") and all(
        key == "id"
        or (key not in expected and value is None)
        or (key in expected and _same_value(key, expected[key], value))
        for key, value in sent.items()
    )


OMITTED_IMAGE = {
    "type": "input_text",
    "text": "image content omitted because it could not be processed",
}
"""What Codex sends for an inline image it cannot decode."""


def _same_value(key: str, expected: Any, sent: Any) -> bool:
    if key != "content" or not isinstance(expected, list) or not isinstance(sent, list):
        return bool(expected == sent)
    return len(expected) == len(sent) and all(
        want == got
        or (isinstance(want, dict) and want.get("type") == "input_image" and got == OMITTED_IMAGE)
        for want, got in zip(expected, sent, strict=True)
    )


def _mismatch(expected: list[dict[str, Any]], sent: tuple[dict[str, Any], ...]) -> str | None:
    """Where Codex's history departs from the expected one (None if nowhere)."""
    for n, (want, got) in enumerate(zip(expected, sent, strict=False)):
        if not _sent_as(want, got):
            return (
                f"item {n}: expected {json.dumps(want)[:400]}, Codex sent {json.dumps(got)[:400]}"
            )
    if len(expected) != len(sent):
        return f"{len(expected)} items expected, Codex sent {len(sent)}"
    return None


# --- the loads ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Versions:
    original: Path
    ideal: Path
    """The original's intended records, one per line (`intended_records`)."""
    repaired: dict[str, Path]


def _needs_stand_in(data: bytes) -> bool:
    """A rollout whose thread id is a string but no UUID."""
    first = _first_record(data)
    payload = first.get("payload") if isinstance(first, dict) else None
    ident = payload.get("id") if isinstance(payload, dict) else None
    return isinstance(ident, str) and not _is_uuid(ident)


@pytest.fixture(scope="session")
def versions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Versions]:
    """Every rollout with its safe and unsafe repairs (`repair_to`)."""
    root = tmp_path_factory.mktemp("codex-repairs")
    found: dict[str, Versions] = {}
    for number, (name, source) in enumerate(SOURCES.items()):
        settings, file_name = _case_settings(name)
        folder = root / str(number)
        folder.mkdir()
        copy = folder / file_name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source is None:
            copy.write_bytes(GENERATED_ROLLOUTS[name])
        else:
            shutil.copyfile(source, copy)
        repaired = {}
        for mode in MODES:
            target = folder / f"{mode}.jsonl"
            repair_to(
                copy, target, msgspec.structs.replace(settings, unsafe_fixes=mode == "unsafe")
            )
            repaired[mode] = target
        ideal = folder / "ideal.jsonl"
        ideal.write_bytes(
            b"".join(
                json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                for r in intended_records(copy.read_bytes())
            )
        )
        found[name] = Versions(copy, ideal, repaired)
    return found


@pytest.fixture(scope="session")
def slim_case(tmp_path_factory: pytest.TempPathFactory) -> SlimCase:
    """A rollout over its budget and its slim (`tests/slim_cases.py`)."""
    return slimmed(tmp_path_factory.mktemp("codex-slim"), "codex")


@pytest.fixture(scope="session")
def history_case(tmp_path_factory: pytest.TempPathFactory) -> SlimCase:
    """A rollout over its size by a superseded replacement history, and its slim."""
    return slimmed(tmp_path_factory.mktemp("codex-slim-histories"), "codex-histories")


@pytest.fixture(scope="session")
def loads(
    versions: dict[str, Versions], slim_case: SlimCase, history_case: SlimCase
) -> dict[tuple[Path, bool], CodexLoad]:
    """Every original and repair loaded in Codex (by path and stand-in), the ones whose
    thread id is no UUID a second time with a UUID standing in; the slim cases' rollouts
    and their slims too."""
    files = [p for v in versions.values() for p in (v.original, v.ideal, *v.repaired.values())]
    files += [slim_case.original, slim_case.slimmed, history_case.original, history_case.slimmed]
    found = {(path, False): load for path, load in load_with_codex(files).items()}
    stand_ins = [p for p in files if _needs_stand_in(p.read_bytes())]
    found.update(
        {(path, True): load for path, load in load_with_codex(stand_ins, stand_in=True).items()}
    )
    return found


def _ways(path: Path) -> tuple[bool, ...]:
    return (False, True) if _needs_stand_in(path.read_bytes()) else (False,)


# --- the tests ----------------------------------------------------------------------------


def _known(case: str, known: dict[str, str]) -> list[Any]:
    if case in known:
        return [pytest.mark.xfail(reason=known[case], strict=True)]
    return []


REPAIRS = [
    pytest.param(n, m, id=f"{n}-{m}", marks=_known(f"{n}-{m}", KNOWN_REPAIR_GAPS))
    for n in SOURCES
    for m in MODES
]
"""Every rollout with each repair mode."""


@pytest.mark.parametrize("name", list(SOURCES))
def test_codex_reads_the_original_as_modelled(
    name: str, versions: dict[str, Versions], loads: dict[tuple[Path, bool], CodexLoad]
) -> None:
    """Codex's history of the original is `codex_history` of its lines; where the model
    says it refuses the thread, it does."""
    path = versions[name].original
    for stand_in in _ways(path):
        load = loads[path, stand_in]
        expected = codex_history(codex_records(path.read_bytes()), stand_in)
        if expected is None:
            assert load.error is not None, f"Codex read {name} (stand-in: {stand_in})"
            continue
        assert load.error is None
        assert _mismatch(expected, load.history) is None


@pytest.mark.parametrize(("name", "mode"), REPAIRS)
def test_a_repair_loads_with_the_intended_history(
    name: str,
    mode: str,
    versions: dict[str, Versions],
    loads: dict[tuple[Path, bool], CodexLoad],
) -> None:
    """Codex loads the repair wherever it loads the original, and its history is the
    intended one: the history Codex rebuilds from the original's intended records
    (`intended_records`, written one per line), and `intended_history` where the model
    covers the records."""
    original = versions[name].original
    repaired = versions[name].repaired[mode]
    for stand_in in _ways(original):
        before, after = loads[original, stand_in], loads[repaired, stand_in]
        ideal = loads[versions[name].ideal, stand_in]
        expected = intended_history(original.read_bytes(), stand_in)
        if before.error is None:
            assert after.error is None, f"Codex refuses the repair: {after.error}"
        assert (after.error is None) == (ideal.error is None), (after.error, ideal.error)
        assert (expected is None) == (ideal.error is not None), ideal.error
        if expected is None:
            continue
        if mode == "safe" and name in UNSAFE_ONLY:
            assert after.history == before.history
            continue
        assert _mismatch(list(ideal.history), after.history) is None
        assert _mismatch(expected, after.history) is None


@pytest.mark.parametrize(("name", "mode"), REPAIRS)
def test_a_repair_shows_the_intended_turns(
    name: str,
    mode: str,
    versions: dict[str, Versions],
    loads: dict[tuple[Path, bool], CodexLoad],
) -> None:
    """The turns Codex's UI shows for a resumed repair (`thread/read`) are the ones it
    shows for the original's intended records: a glued line's records come back, and
    nothing but a proven duplicate is gone."""
    original = versions[name].original
    for stand_in in _ways(original):
        after = loads[versions[name].repaired[mode], stand_in]
        ideal = loads[versions[name].ideal, stand_in]
        if after.error is not None or ideal.error is not None:
            continue
        if mode == "safe" and name in UNSAFE_ONLY:
            assert after.turns == loads[original, stand_in].turns
            continue
        assert after.turns == ideal.turns


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=_known(n, KNOWN_UNREPORTED_REFUSALS)) for n in SOURCES]
)
def test_a_refused_rollout_is_reported(
    name: str, versions: dict[str, Versions], loads: dict[tuple[Path, bool], CodexLoad]
) -> None:
    """A rollout Codex refuses as it is is one sessionfix reports: Codex's reason is
    always that the file does not start with session metadata ("does not start with
    session metadata", or "is empty" where no line is), which is SF101 (or SF005, a
    BOM before the `session_meta` record, or SF008 on it, spread over lines). The
    repair of a rollout that has no `session_meta` record at all stays refused."""
    path = versions[name].original
    if loads[path, False].error is None:
        return
    diagnostics = check_file(path, _case_settings(name)[0])
    found = {d.code for d in diagnostics}
    if "SF008" in found:
        # A record spread over lines from the first line on: the session_meta record.
        first = next(d for d in diagnostics if d.code == "SF008")
        if first.end_row is not None and first.row == 1:
            found.add("SF008 on session_meta")
    expected = {"SF101", "SF005", "SF008 on session_meta"}
    assert found & expected, f"Codex refuses it ({loads[path, False].error}); {found}"
    records = intended_records(path.read_bytes())
    if not any(isinstance(r, dict) and r.get("type") == "session_meta" for r in records):
        for repaired in versions[name].repaired.values():
            assert loads[repaired, False].error is not None


def _summaries(data: bytes) -> set[str]:
    """The texts of the summary messages Codex makes for the file's compactions that
    carry no history."""
    found = set()
    for record in codex_records(data):
        payload = record.get("payload") if isinstance(record, dict) else None
        if _record_type(record) == "compacted" and isinstance(payload, dict):
            message = payload.get("message")
            if isinstance(message, str) and not isinstance(
                payload.get("replacement_history"), list
            ):
                found.add(message or NO_SUMMARY)
    return found


def _record_type(record: Any) -> Any:
    return record.get("type") if isinstance(record, dict) else None


def _sent_kind(item: dict[str, Any], summaries: set[str]) -> Sent:
    """What `sessionfix context` should call an item Codex sent."""
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        content = item.get("content")
        if (
            role == "user"
            and isinstance(content, list)
            and len(content) == 1
            and content[0].get("text") in summaries
        ):
            return Sent.SUMMARY
        roles = {"user": Sent.USER, "assistant": Sent.ASSISTANT}
        return roles.get(role, Sent.SYSTEM if role in ("developer", "system") else Sent.OTHER)
    if kind in CALLS:
        return Sent.TOOL_CALL
    if kind in OUTPUTS:
        return Sent.TOOL_RESULT
    if kind == "reasoning":
        return Sent.REASONING
    return Sent.SUMMARY if kind in ("compaction", "compaction_summary") else Sent.OTHER


@pytest.mark.parametrize("name", list(SOURCES))
def test_context_counts_what_codex_sends(
    name: str,
    versions: dict[str, Versions],
    loads: dict[tuple[Path, bool], CodexLoad],
    tmp_path: Path,
) -> None:
    """`sessionfix context` counts one message per item of the history Codex sends on
    resume, of the kinds Codex sent, and none where Codex refuses the rollout (a thread
    id that is no UUID counted on the copy with one standing in, as Codex loaded it):
    for the original, its intended records and its repairs."""
    found = versions[name]
    files = (found.original, found.ideal, *found.repaired.values())
    for path, stand_in in [(p, s) for p in files for s in _ways(found.original)]:
        load = loads[path, stand_in]
        measured = path
        if stand_in:
            measured = tmp_path / path.name
            measured.write_bytes(_private_copy(path.read_bytes(), True, {}))
        context = context_of(measured, _case_settings(name)[0])
        if load.error is not None:
            assert context.messages == 0, (stand_in, load.error)
            assert context.refused is not None, (stand_in, load.error)
            continue
        assert context.refused is None, stand_in
        summaries = _summaries(path.read_bytes())
        kinds = [_sent_kind(item, summaries) for item in load.history]
        kinds[0] = Sent.SYSTEM
        expected = {kind: kinds.count(kind) for kind in Sent if kind in kinds}
        assert context.messages == len(load.history), stand_in
        assert context.by_sent == expected, stand_in


def test_codex_resumes_the_slimmed_rollout_as_context_predicts(
    slim_case: SlimCase, loads: dict[tuple[Path, bool], CodexLoad]
) -> None:
    """`slim` brings the rollout under its budget: Codex resumes it with every item of
    the history it had, which `context` counts, and the mock provider takes the probe
    turn after it; the old outputs keep their head and tail around the placeholder, the
    last two turns are as they were."""
    before, after = loads[slim_case.original, False], loads[slim_case.slimmed, False]
    assert after.error is None
    assert PROBE in json.dumps(after.request[len(after.history) :])
    context = context_of(slim_case.slimmed)
    assert context.tokens <= slim_case.budget < context_of(slim_case.original).tokens
    assert context.messages == len(after.history) == len(before.history)
    written = iter(
        record["payload"]["output"]
        for record in map(json.loads, slim_case.original.read_text().splitlines())
        if record["payload"].get("type") == "function_call_output"
    )
    cut = 0
    unnamed = [
        (_without(old, "id"), _without(new, "id"))
        for old, new in zip(before.history, after.history, strict=True)
    ]
    for old, new in unnamed:
        if old.get("type") == "function_call_output":
            output = next(written)
        if old == new:
            continue
        assert _without(old, "output") == _without(new, "output")
        # Codex sends a long output cut in its own way; the slim's, shorter, whole.
        assert_cut(output, new["output"])
        cut += 1
    assert cut == 8
    assert [old for old, _ in unnamed[-8:]] == [new for _, new in unnamed[-8:]]


def test_codex_resumes_a_rollout_slimmed_to_a_size_with_the_history_it_had(
    history_case: SlimCase, loads: dict[tuple[Path, bool], CodexLoad]
) -> None:
    """`slim --max-size` drops the replacement history the newer compaction supersedes:
    Codex resumes the rollout with every item of the history it had, as `context` counts
    it, and the mock provider takes the probe turn; every other line is as it was."""
    before, after = loads[history_case.original, False], loads[history_case.slimmed, False]
    assert after.error is None
    assert PROBE in json.dumps(after.request[len(after.history) :])
    assert history_case.max_size is not None
    size = history_case.slimmed.stat().st_size
    assert size <= history_case.max_size < history_case.original.stat().st_size
    context = context_of(history_case.slimmed)
    assert context.tokens == context_of(history_case.original).tokens
    assert context.messages == len(after.history)
    assert [_without(item, "id") for item in before.history] == [
        _without(item, "id") for item in after.history
    ]
    old = history_case.original.read_text().splitlines()
    new = history_case.slimmed.read_text().splitlines()
    changed = [(was, now) for was, now in zip(old, new, strict=True) if was != now]
    assert len(changed) == 1
    was, now = (json.loads(line) for line in changed[0])
    assert "replacement_history" not in now["payload"]
    assert now["payload"] == _without(was["payload"], "replacement_history")


def _without(item: dict[str, Any], key: str) -> dict[str, Any]:
    """An item without `key` (the ids Codex gives messages differ from load to load)."""
    return {k: v for k, v in item.items() if k != key}
