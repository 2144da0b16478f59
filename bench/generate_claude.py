"""Build a large Claude Code session from the sample sessions in the corpus.

The samples (`../shared/corpus/claude/`, read in place: eleven real sessions and a
hand-written compaction that keeps a preserved segment, which no real sample has) are
written one after another, in a fixed order, again and again until the file reaches
the requested size. Each written sample is a copy with ids of its own: every uuid and
every reference to one (`parentUuid`, `logicalParentUuid`, `sourceToolAssistantUUID`,
`leafUuid`, `messageId`, `promptId`, the `preservedSegment` and `preservedMessages`
uuids, ...), every `message.id` and `requestId`, every tool_use id and the
`tool_use_id`, `toolUseID` and `parentToolUseID` naming it, and agent ids, rewritten
consistently within the copy and never repeated across copies. Timestamps are shifted
so the copies follow each other in time; every record carries one `sessionId`.

The copies make one chain: a record that starts a chain (a null or unresolved
`parentUuid`, except on a `compact_boundary`, whose `parentUuid` stays null) is
re-parented to the chain record written just before it, which for a copy's first
record is the previous copy's last one; an unresolved `leafUuid` is pointed there
too. Records stay as the samples have them otherwise: two records glued on one line
are written as two lines, the same record written again after a resume is written
once, and a sample stopped in the middle of a tool call is cut before that call. The
last record is a `last-prompt` naming the last record of the chain, and the file ends
with a newline. Only the per-sample templates are held in memory; the output is
written a copy at a time and is the same for the same size.

    python bench/generate_claude.py OUT.jsonl --size-mb 300
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "claude"
SAMPLES = (
    # Oldest Claude Code version first; the last one ends with a `last-prompt`.
    "entireio-cli/a6-e4c2a0fbd1-0.full.jsonl",  # 2.0.76, a compaction
    "entireio-cli/f4-bd19c39902-0.full.jsonl",  # Read, then a Write of the same file
    "entireio-cli/4c-02af2759b6-0.full.jsonl",  # a `summary` line first
    "entireio-cli/37-995ebed6e4-2.full.jsonl",  # resumed under a newer version; a glued line
    "entireio-cli/5a-c45bc32212-0.full.jsonl",  # the same, bash progress
    "entireio-cli/e5-8c50537669-0.full.jsonl",  # a compaction; Read/Write/Edit results
    "entireio-cli/8c-fa910f8ef9-5.full.jsonl",  # two session ids; a context clear
    "entireio-cli/44-785715c3f5-2.full.jsonl",  # two compactions, queue operations, MCP
    "entireio-cli/71-69f9710768-0.full.jsonl",  # local commands, bash progress
    "entireio-cli/60-fd31fcf44f-0.full.jsonl",  # agent progress
    "misc/daaain-claude-code-log__dag_compact_after_rewind_preserved.jsonl",  # a rewind, then
    # a compaction keeping a preserved segment
    "misc/kvsankar-agent-history__real_sessions_claude_session-01.jsonl",  # 2.1.152 envelope
)
SESSION_ID = "7d3f0c2e-5a61-4b8e-9f14-2c6a8e0b4d71"
START_MS = 1767603600000  # 2026-01-05T09:00:00Z
GAP_MS = 95_000
"""Between the end of one copy and the start of the next."""

CHAIN_TYPES = frozenset({"user", "assistant", "system", "attachment"})
REFERENCE_KEYS = frozenset(
    {
        "uuid",
        "parentUuid",
        "logicalParentUuid",
        "sourceToolAssistantUUID",
        "leafUuid",
        "messageId",
        "promptId",
        "toolUseID",
        "parentToolUseID",
        "sourceToolUseID",
        "tool_use_id",
        "requestId",
        "agentId",
        "headUuid",
        "anchorUuid",
        "tailUuid",
    }
)
REFERENCE_LIST_KEYS = frozenset({"uuids", "allUuids"})
TIME_KEYS = frozenset({"timestamp", "backupTime"})
TOOL_USE_TYPES = frozenset({"tool_use", "server_tool_use"})
PREFIXES = ("srvtoolu_", "toolu_", "msg_", "req_")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HEX = re.compile(r"[0-9a-f]{7,32}")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
SLOT = re.compile(rb'"@@(\d+)@@"')
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclass
class Stats:
    """What the generated file holds; `bench/run.py` prints some of it."""

    bytes: int = 0
    records: int = 0
    copies: int = 0
    rounds: int = 0
    compactions: int = 0
    tool_uses: int = 0
    samples: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ref:
    """An id the copy rewrites, and the shape it is given (`uuid`, `hex7`, `toolu_`, ...)."""

    old: str
    shape: str


@dataclass(frozen=True)
class Prev:
    """The previous copy's last chain record (null before the first copy)."""


@dataclass(frozen=True)
class Time:
    offset_ms: int


Slot = Ref | Prev | Time


def read_records(path: Path) -> list[dict[str, Any]]:
    """A sample's records in order; two records glued on one line come back as two."""
    records: list[dict[str, Any]] = []
    decoder = json.JSONDecoder()
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            records.append(orjson.loads(line))
            continue
        except orjson.JSONDecodeError:
            pass
        text, at = line.decode(), 0
        while at < len(text):
            record, at = decoder.raw_decode(text, at)
            records.append(record)
    return records


def _content(record: dict[str, Any]) -> list[Any]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def drop_replays(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without a record written again with the same uuid (a resume re-appending the
    record it found glued to the next line): the first instance stays."""
    seen: set[str] = set()
    kept = []
    for record in records:
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            if uuid in seen:
                continue
            seen.add(uuid)
        kept.append(record)
    return kept


def cut_unanswered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records before the first tool call that never gets its result (a sample
    captured in the middle of a call), else all of them."""
    answered = {
        block.get("tool_use_id")
        for record in records
        if record.get("type") == "user"
        for block in _content(record)
        if isinstance(block, dict) and block.get("type") == "tool_result"
    }
    for index, record in enumerate(records):
        if record.get("type") != "assistant":
            continue
        for block in _content(record):
            if (
                isinstance(block, dict)
                and block.get("type") in TOOL_USE_TYPES
                and block.get("id") not in answered
            ):
                return records[:index]
    return records


def shape_of(value: str, hint: str) -> str:
    for prefix in PREFIXES:
        if value.startswith(prefix) and value[len(prefix) :].isalnum():
            return prefix
    if UUID.fullmatch(value):
        return "uuid"
    if HEX.fullmatch(value):
        return f"hex{len(value)}"
    return hint


def new_id(copy: int, ref: Ref) -> str:
    """`ref`'s id in copy number `copy`: derived from both, in the same shape."""
    digest = hashlib.blake2b(
        f"{copy}\0{ref.old}".encode(), digest_size=20, person=b"sessionfix-bch"
    ).digest()
    if ref.shape == "uuid":
        h = digest.hex()
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[digest[8] & 3]}{h[17:20]}-{h[20:32]}"
    if ref.shape.startswith("hex"):
        return digest.hex()[: int(ref.shape[3:])]
    number = int.from_bytes(digest)
    body = []
    for _ in range(24):
        number, digit = divmod(number, 62)
        body.append(BASE62[digit])
    lead = "011C" if ref.shape == "req_" else "01"
    return ref.shape + lead + "".join(body)[len(lead) :]


def parse_ms(stamp: str) -> int:
    moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def format_ms(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}Z"


class Template:
    """One sample, serialized once with a slot wherever a copy writes its own value."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        records = cut_unanswered(drop_replays(read_records(path)))
        self.records = len(records)
        self.compactions = sum(record.get("subtype") == "compact_boundary" for record in records)
        self.tool_uses = sum(
            isinstance(block, dict) and block.get("type") in TOOL_USE_TYPES
            for record in records
            if record.get("type") == "assistant"
            for block in _content(record)
        )
        self.uuids = {record["uuid"] for record in records if isinstance(record.get("uuid"), str)}
        stamps = [parse_ms(value) for record in records for value in self._times(record) if value]
        self.start_ms = min(stamps)
        self.duration_ms = max(stamps) - self.start_ms
        self.slots: list[Slot] = []
        self._index: dict[Slot, int] = {}
        self._shapes: dict[str, str] = {}
        last_chain: str | None = None
        lines = []
        for record in records:
            prior = self._id(last_chain, "uuid") if last_chain is not None else Prev()
            rewritten = self._rewrite(record, prior)
            if record.get("type") in CHAIN_TYPES and isinstance(record.get("uuid"), str):
                last_chain = record["uuid"]
            lines.append(orjson.dumps(rewritten))
        if last_chain is None:
            raise ValueError(f"{path}: no conversation record")
        self.last = self._id(last_chain, "uuid")
        blob = b"\n".join(lines) + b"\n"
        if blob.count(b'"@@') != len(SLOT.findall(blob)):
            raise ValueError(f"{path}: holds text that looks like a slot")
        pieces = SLOT.split(blob)
        self.static = pieces[0::2]
        self.holes = [int(index) for index in pieces[1::2]]

    def _times(self, node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in TIME_KEYS and isinstance(value, str) and ISO.fullmatch(value):
                    yield value
                else:
                    yield from self._times(value)
        elif isinstance(node, list):
            for value in node:
                yield from self._times(value)

    def _slot(self, slot: Slot) -> str:
        index = self._index.setdefault(slot, len(self.slots))
        if index == len(self.slots):
            self.slots.append(slot)
        return f"@@{index}@@"

    def _id(self, value: str, hint: str) -> Ref:
        """One shape per id, whichever field it is met in first."""
        return Ref(value, self._shapes.setdefault(value, shape_of(value, hint)))

    def _ref(self, value: Any, hint: str) -> Any:
        return self._slot(self._id(value, hint)) if isinstance(value, str) else value

    def _rewrite(self, record: dict[str, Any], prior: Ref | Prev) -> dict[str, Any]:
        """The record with its slots; a chain start and an unresolved leaf go to `prior`."""
        out: dict[str, Any] = self._walk(record)
        parent = record.get("parentUuid", 0)
        starts_chain = parent is None or (isinstance(parent, str) and parent not in self.uuids)
        if starts_chain and record.get("subtype") != "compact_boundary" and "uuid" in record:
            out["parentUuid"] = self._slot(prior)
        leaf = record.get("leafUuid")
        if isinstance(leaf, str) and leaf not in self.uuids:
            out["leafUuid"] = self._slot(prior)
        return out

    def _walk(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self._walk(value) for value in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        is_tool_use = node.get("type") in TOOL_USE_TYPES
        is_api_message = node.get("role") == "assistant" and node.get("type") == "message"
        for key, value in node.items():
            if key in ("sessionId", "session_id") and isinstance(value, str):
                out[key] = SESSION_ID
            elif key in REFERENCE_KEYS:
                hint = {"requestId": "req_", "tool_use_id": "toolu_"}.get(key, "uuid")
                out[key] = self._ref(value, hint)
            elif key in REFERENCE_LIST_KEYS and isinstance(value, list):
                out[key] = [self._ref(item, "uuid") for item in value]
            elif key == "id" and (is_tool_use or is_api_message):
                out[key] = self._ref(value, "toolu_" if is_tool_use else "msg_")
            elif key in TIME_KEYS and isinstance(value, str) and ISO.fullmatch(value):
                out[key] = self._slot(Time(parse_ms(value) - self.start_ms))
            else:
                out[key] = self._walk(value)
        return out

    def render(self, copy: int, base_ms: int, prev: str | None) -> tuple[bytes, str]:
        """Copy number `copy`, starting at `base_ms` after the record `prev`; and the
        id of its last chain record."""
        values: list[bytes] = []
        for slot in self.slots:
            if isinstance(slot, Ref):
                values.append(b'"%s"' % new_id(copy, slot).encode())
            elif isinstance(slot, Time):
                values.append(b'"%s"' % format_ms(base_ms + slot.offset_ms).encode())
            else:
                values.append(b"null" if prev is None else b'"%s"' % prev.encode())
        parts = [self.static[0]]
        for hole, static in zip(self.holes, self.static[1:], strict=True):
            parts.append(values[hole])
            parts.append(static)
        return b"".join(parts), new_id(copy, self.last)


def fingerprint(corpus: Path = CORPUS) -> str:
    """Names and sizes of the samples, for telling whether a cached file is current."""
    return ",".join(f"{name}:{(corpus / name).stat().st_size}" for name in SAMPLES)


def generate_claude(out: Path, size_mb: int, corpus: Path = CORPUS) -> Stats:
    """Whole rounds of the samples until the file holds at least `size_mb` MiB."""
    templates = [Template(corpus / name) for name in SAMPLES]
    stats = Stats(samples=[template.name for template in templates])
    target = size_mb << 20
    prev: str | None = None
    clock = START_MS
    with open(out, "wb") as handle:
        while stats.bytes < target:
            stats.rounds += 1
            for template in templates:
                data, prev = template.render(stats.copies, clock, prev)
                handle.write(data)
                clock += template.duration_ms + GAP_MS
                stats.copies += 1
                stats.bytes += len(data)
                stats.records += template.records
                stats.compactions += template.compactions
                stats.tool_uses += template.tool_uses
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size-mb", type=int, default=300, help="size of the session (MiB)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    print(json.dumps(asdict(generate_claude(args.out, args.size_mb, args.corpus)), indent=2))


if __name__ == "__main__":
    main()
