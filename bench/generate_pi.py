"""Build a large pi session from the real pi sessions in the corpus, with defects planted
in known numbers.

The samples (`../shared/corpus/openclaw/`, read in place: two real pi-mono sessions,
one with two compactions, and two small fixtures) are written one after another, in a
fixed order, again and again until the file reaches the requested size, under one v3
header. The v1 samples are migrated to v3 as pi does: every entry gets an id and a
`parentId` naming the entry before it, and a compaction's `firstKeptEntryIndex` (a
position counting the header as 0) becomes the `firstKeptEntryId` of the entry there.
Each written sample is a copy with ids of its own: entry ids (8 hex digits, never
repeated in the file) with every `parentId` and `firstKeptEntryId` naming them, and
tool call ids with the `toolCallId` of their results, rewritten consistently within
the copy. Entry timestamps and `message.timestamp` are shifted so the copies follow
each other in time.

The copies make one session: a copy's first entry is the child of the entry written
just before it. Between two copies comes a short planted turn, a user prompt and its
answer, carrying now and then a defect, in a fixed cycle: the prompt appended twice
(SF201, an overflow clone), a compaction written twice with only its id changed
(SF202), the prompt and its answer glued on one line (SF001), a read of a file then fully
rewritten (SF301), a result for a call never made (SF401). The samples bring findings
of their own (stale reads, aborted calls left without results, leaked `partialJson`):
`inherent` counts what sessionfix finds in the copies without the planted turns,
measured once on a small file (the counts grow by the same amount with each round),
and `expected` is that plus `planted`. Only the per-sample templates are held in
memory; the output is written a copy at a time and is the same for the same size.

    python bench/generate_pi.py OUT.jsonl --size-mb 300
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from sessionfix import Settings, check_file

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "openclaw"
SAMPLES = (
    "pi-mono__large-session.v1.jsonl",  # v1, 1018 entries, aborted turns, leaked partialJson
    "letta-trajectory__pi-tool-calls.v3.jsonl",  # v3 tree, 8-hex ids, responseId
    "pi-mono__before-compaction.v1.jsonl",  # v1, two compactions by index, bashExecution
    "earendil-pi__prompt-cache-replay-session.v1.jsonl",  # v1, OpenAI `call_` ids
)
SESSION_ID = "019ac8f2-4d1e-7b53-9a6c-3f0e2b7d5c18"
CWD = "/Users/badlogic/workspaces/pi-mono"
START_MS = 1767603600000  # 2026-01-05T09:00:00Z
GAP_MS = 95_000
"""Between the end of one copy and the start of the next."""
PLANTS = ("SF201", "SF202", "SF001", "SF301", "SF401", "")
"""The defect planted between copy n and copy n + 1 is PLANTS[n % len(PLANTS)]."""
BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
SLOT = re.compile(rb'"@@(\d+)@@"')
ID_MIX = 0x9E3779B1
"""Odd, so multiplying by it modulo 2**32 gives every entry number an id of its own."""


@dataclass
class Stats:
    """What the generated file holds; `bench/run.py` prints some of it."""

    bytes: int = 0
    entries: int = 0
    copies: int = 0
    rounds: int = 0
    compactions: int = 0
    tool_calls: int = 0
    samples: list[str] = field(default_factory=list)
    planted: dict[str, int] = field(default_factory=dict)
    inherent: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    """The copy's entry at this position (0: its first)."""

    index: int


@dataclass(frozen=True)
class Call:
    """A tool call id, rewritten per copy."""

    old: str


@dataclass(frozen=True)
class Prev:
    """The entry written just before the copy (null before the first one)."""


@dataclass(frozen=True)
class Time:
    """An ISO entry timestamp, this long after the copy starts."""

    offset_ms: int


@dataclass(frozen=True)
class Millis:
    """A `message.timestamp` (epoch milliseconds), this long after the copy starts."""

    offset_ms: int


Slot = Entry | Call | Prev | Time | Millis


def entry_id(number: int) -> str:
    """The id of the file's entry number `number`: 8 hex digits, distinct for distinct
    numbers below 2**32."""
    return f"{(number * ID_MIX) & 0xFFFFFFFF:08x}"


def call_id(copy: int, old: str) -> str:
    """`old` in copy number `copy`: each `|`-separated part keeps its prefix up to its
    last `_` and gets a body of its own, at least 12 characters long."""
    parts = []
    for part in old.split("|"):
        prefix, _, body = part.rpartition("_")
        digest = hashlib.blake2b(
            f"{copy}\0{part}".encode(), digest_size=24, person=b"sessionfix-bpi"
        ).digest()
        number, chars = int.from_bytes(digest), []
        for _ in range(max(len(body), 12)):
            number, digit = divmod(number, 62)
            chars.append(BASE62[digit])
        parts.append((prefix + "_" if prefix else "") + "".join(chars))
    return "|".join(parts)


def parse_ms(stamp: str) -> int:
    moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def format_ms(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}Z"


def migrate(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A sample's entries (header left out) in v3 shape, ids being their positions: a
    v1 sample gets ids and a parent chain, and `firstKeptEntryId` for each in-range
    `firstKeptEntryIndex`; a v3 sample's ids become positions too."""
    header, entries = records[0], [dict(record) for record in records[1:]]
    if header.get("version") is None:
        for index, entry in enumerate(entries):
            entry["id"], entry["parentId"] = index, index - 1 if index else None
            if entry.get("type") == "compaction" and "firstKeptEntryIndex" in entry:
                kept = entry.pop("firstKeptEntryIndex") - 1
                if 0 <= kept < len(entries):
                    entry["firstKeptEntryId"] = kept
        return entries
    position = {entry["id"]: index for index, entry in enumerate(entries)}
    for entry in entries:
        for key in ("id", "parentId", "firstKeptEntryId", "targetId"):
            if isinstance(entry.get(key), str):
                entry[key] = position[entry[key]]
    return entries


class Template:
    """One sample, serialized once with a slot wherever a copy writes its own value."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        records = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        entries = migrate(records)
        self.entries = len(entries)
        self.compactions = sum(entry["type"] == "compaction" for entry in entries)
        self.tool_calls = 0
        stamps = [parse_ms(entry["timestamp"]) for entry in entries]
        stamps += [
            entry["message"]["timestamp"]
            for entry in entries
            if isinstance(entry.get("message"), dict)
            and isinstance(entry["message"].get("timestamp"), int)
        ]
        self.start_ms = min(stamps)
        self.duration_ms = max(stamps) - self.start_ms
        self.slots: list[Slot] = []
        self._index: dict[Slot, int] = {}
        lines = [orjson.dumps(self._rewrite(entry)) for entry in entries]
        blob = b"\n".join(lines) + b"\n"
        if blob.count(b'"@@') != len(SLOT.findall(blob)):
            raise ValueError(f"{path}: holds text that looks like a slot")
        pieces = SLOT.split(blob)
        self.static = pieces[0::2]
        self.holes = [int(index) for index in pieces[1::2]]

    def _slot(self, slot: Slot) -> str:
        index = self._index.setdefault(slot, len(self.slots))
        if index == len(self.slots):
            self.slots.append(slot)
        return f"@@{index}@@"

    def _rewrite(self, entry: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in entry.items():
            if key in ("id", "firstKeptEntryId", "targetId") and isinstance(value, int):
                out[key] = self._slot(Entry(value))
            elif key == "parentId":
                out[key] = self._slot(Prev() if value is None else Entry(value))
            elif key == "timestamp" and isinstance(value, str) and ISO.fullmatch(value):
                out[key] = self._slot(Time(parse_ms(value) - self.start_ms))
            elif key == "message" and isinstance(value, dict):
                out[key] = self._message(value)
            else:
                out[key] = value
        return out

    def _message(self, message: dict[str, Any]) -> dict[str, Any]:
        out = dict(message)
        if isinstance(message.get("timestamp"), int):
            out["timestamp"] = self._slot(Millis(message["timestamp"] - self.start_ms))
        if isinstance(message.get("toolCallId"), str):
            out["toolCallId"] = self._slot(Call(message["toolCallId"]))
        content = message.get("content")
        if isinstance(content, list):
            out["content"] = [self._block(block) for block in content]
        return out

    def _block(self, block: Any) -> Any:
        if not isinstance(block, dict) or block.get("type") != "toolCall":
            return block
        self.tool_calls += 1
        return {**block, "id": self._slot(Call(block["id"]))}

    def render(self, copy: int, first: int, base_ms: int, prev: str | None) -> bytes:
        """Copy number `copy`, its entries numbered from `first`, starting at `base_ms`
        as the child of entry `prev`."""
        values: list[bytes] = []
        for slot in self.slots:
            if isinstance(slot, Entry):
                values.append(b'"%s"' % entry_id(first + slot.index).encode())
            elif isinstance(slot, Call):
                values.append(b'"%s"' % call_id(copy, slot.old).encode())
            elif isinstance(slot, Time):
                values.append(b'"%s"' % format_ms(base_ms + slot.offset_ms).encode())
            elif isinstance(slot, Millis):
                values.append(b"%d" % (base_ms + slot.offset_ms))
            else:
                values.append(b"null" if prev is None else b'"%s"' % prev.encode())
        parts = [self.static[0]]
        for hole, static in zip(self.holes, self.static[1:], strict=True):
            parts.append(values[hole])
            parts.append(static)
        return b"".join(parts)


class Planter:
    """The short turns written between copies, each carrying one planted defect."""

    def __init__(self, summary: str) -> None:
        self.summary = summary
        self.compactions = 0
        self.tool_calls = 0

    def turn(
        self, plant: str, serial: int, first: int, ms: int, prev: str
    ) -> tuple[list[bytes], int]:
        """The lines of planted turn number `serial`, its entries numbered from `first`
        and chained from `prev`, and how many entries they hold."""
        entries: list[dict[str, Any]] = []

        def add(kind: str, **fields: Any) -> str:
            new = entry_id(first + len(entries))
            parent = entries[-1]["id"] if entries else prev
            stamp = format_ms(ms + 10 * len(entries))
            entries.append({"type": kind, "id": new, "parentId": parent, "timestamp": stamp})
            entries[-1].update(fields)
            return new

        def message(role: str, **fields: Any) -> dict[str, Any]:
            return {"role": role, **fields, "timestamp": ms + 10 * len(entries)}

        def assistant(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
            usage = {"input": 2310, "output": 184, "cacheRead": 48211, "cacheWrite": 0}
            usage["totalTokens"] = sum(usage.values())
            return message(
                "assistant",
                content=content,
                api="anthropic-messages",
                provider="anthropic",
                model="claude-opus-4-5",
                usage={**usage, "cost": {"input": 0.01155, "output": 0.0046, "total": 0.01615}},
                stopReason=stop,
            )

        def call(name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            tool = call_id(serial, f"toolu_planted{name}")
            self.tool_calls += 1
            return tool, {"type": "toolCall", "id": tool, "name": name, "arguments": arguments}

        def result(tool: str, name: str, text: str) -> dict[str, Any]:
            content = [{"type": "text", "text": text}]
            return message(
                "toolResult", toolCallId=tool, toolName=name, content=content, isError=False
            )

        prompt = message("user", content=[{"type": "text", "text": f"next step ({serial})"}])
        add("message", message=prompt)
        if plant == "SF201":
            add("message", message=prompt)
        if plant == "SF301":
            path = f"packages/coding-agent/src/planted-{serial}.ts"
            read, block = call("read", {"path": path})
            add("message", message=assistant([block], "toolUse"))
            body = "".join(f"export const line{n} = {n};\n" for n in range(80))
            add("message", message=result(read, "read", body))
            write, block = call("write", {"path": path, "content": body.replace("const", "let")})
            add("message", message=assistant([block], "toolUse"))
            add("message", message=result(write, "write", f"Successfully wrote to {path}"))
        if plant == "SF401":
            gone = call_id(serial, "toolu_plantedgone")
            add("message", message=result(gone, "bash", "(no output)"))
        add("message", message=assistant([{"type": "text", "text": "Done."}], "stop"))
        glued = len(entries) - 2 if plant == "SF001" else None
        if plant == "SF202":
            kept = entries[0]["id"]
            compaction = {"summary": self.summary, "firstKeptEntryId": kept, "tokensBefore": 61234}
            add("compaction", **compaction)
            add("compaction", **compaction)
            self.compactions += 2
        lines = [orjson.dumps(entry) for entry in entries]
        if glued is not None:
            lines[glued : glued + 2] = [lines[glued] + lines[glued + 1]]
        return lines, len(entries)


def header() -> bytes:
    record = {
        "type": "session",
        "version": 3,
        "id": SESSION_ID,
        "timestamp": format_ms(START_MS),
        "cwd": CWD,
    }
    return orjson.dumps(record) + b"\n"


def first_summary(corpus: Path) -> str:
    for line in (corpus / SAMPLES[2]).read_bytes().splitlines():
        record = orjson.loads(line)
        if record.get("type") == "compaction":
            return str(record["summary"])
    raise ValueError("no compaction in the samples")


def write_session(
    out: Path, size: int, corpus: Path, *, plant: bool, rounds: int | None = None
) -> Stats:
    """Whole rounds of the samples until the file holds at least `size` bytes (or
    exactly `rounds` rounds), with planted turns between copies if `plant`."""
    templates = [Template(corpus / name) for name in SAMPLES]
    planter = Planter(first_summary(corpus))
    stats = Stats(samples=[template.name for template in templates])
    stats.planted = dict.fromkeys(sorted(code for code in PLANTS if code), 0)
    prev: str | None = None
    clock = START_MS
    number = 0
    with open(out, "wb") as handle:
        data = header()
        handle.write(data)
        stats.bytes += len(data)
        while stats.bytes < size if rounds is None else stats.rounds < rounds:
            stats.rounds += 1
            for template in templates:
                if plant and prev is not None:
                    code = PLANTS[stats.copies % len(PLANTS)]
                    lines, entries = planter.turn(code, stats.copies, number, clock, prev)
                    number += entries
                    prev = entry_id(number - 1)
                    data = b"\n".join(lines) + b"\n"
                    handle.write(data)
                    stats.bytes += len(data)
                    stats.entries += entries
                    clock += 1000
                    if code:
                        stats.planted[code] += 1
                data = template.render(stats.copies, number, clock, prev)
                handle.write(data)
                number += template.entries
                prev = entry_id(number - 1)
                clock += template.duration_ms + GAP_MS
                stats.copies += 1
                stats.bytes += len(data)
                stats.entries += template.entries
                stats.compactions += template.compactions
                stats.tool_calls += template.tool_calls
    stats.compactions += planter.compactions
    stats.tool_calls += planter.tool_calls
    return stats


def inherent_findings(corpus: Path, rounds: int) -> dict[str, int]:
    """What sessionfix finds in `rounds` rounds of the copies alone: the samples' own
    findings."""
    with tempfile.TemporaryDirectory(prefix="generate-pi-") as scratch:
        path = Path(scratch) / "copies.jsonl"
        write_session(path, 0, corpus, plant=False, rounds=rounds)
        found: dict[str, int] = {}
        for diagnostic in check_file(path, Settings(quiescence=0.0)):
            found[diagnostic.code] = found.get(diagnostic.code, 0) + 1
    return found


def generate_pi(out: Path, size_mb: int, corpus: Path = CORPUS) -> Stats:
    """Whole rounds of the samples, with planted turns between copies, until the file
    holds at least `size_mb` MiB."""
    stats = write_session(out, size_mb << 20, corpus, plant=True)
    one, two = inherent_findings(corpus, 1), inherent_findings(corpus, 2)
    stats.inherent = {
        code: one.get(code, 0) + (two.get(code, 0) - one.get(code, 0)) * (stats.rounds - 1)
        for code in sorted({*one, *two})
    }
    expected = dict(stats.inherent)
    for code, planted in stats.planted.items():
        expected[code] = expected.get(code, 0) + planted
    stats.expected = {code: n for code, n in sorted(expected.items()) if n}
    return stats


def fingerprint(corpus: Path = CORPUS) -> str:
    """Names and sizes of the samples, for telling whether a cached file is current."""
    return ",".join(f"{name}:{(corpus / name).stat().st_size}" for name in SAMPLES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size-mb", type=int, default=300, help="size of the session (MiB)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    print(json.dumps(asdict(generate_pi(args.out, args.size_mb, args.corpus)), indent=2))


if __name__ == "__main__":
    main()
