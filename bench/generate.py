"""Generate a large, realistic pi v3 session with a known number of each defect.

Entry shapes follow pi's writer (key order, compact JSON, UTF-8); sizes follow the
distributions of the real pi-mono sample sessions (assistant p50 ~0.8 KiB, tool
results p50 ~1 KiB with a long tail, user messages ~0.3 KiB). The output is
deterministic for a given seed and size.

    python bench/generate.py OUT.jsonl --size-mb 1100
"""

from __future__ import annotations

import argparse
import base64
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

WORDS = [
    "the",
    "a",
    "parser",
    "token",
    "stream",
    "buffer",
    "index",
    "entry",
    "session",
    "compaction",
    "summary",
    "file",
    "path",
    "read",
    "write",
    "edit",
    "bash",
    "test",
    "fails",
    "passes",
    "returns",
    "value",
    "error",
    "module",
    "function",
    "class",
    "import",
    "config",
    "option",
    "flag",
    "line",
    "byte",
    "offset",
    "record",
    "json",
    "object",
    "array",
    "string",
    "number",
    "async",
    "await",
    "promise",
    "resolve",
    "reject",
    "callback",
    "handler",
    "event",
    "emit",
    "listener",
    "queue",
    "cache",
    "hit",
    "miss",
    "evict",
    "lock",
    "mutex",
    "thread",
    "worker",
    "pool",
    "task",
    "schedule",
    "retry",
    "timeout",
    "because",
    "therefore",
    "however",
    "then",
    "now",
    "later",
    "first",
    "next",
    "finally",
    "check",
    "verify",
    "update",
]
CWD = "/home/dev/projects/engine"
HEADER_ID = "019f92c8-d694-7ac3-9144-e3b22add01f3"
BASE_MS = 1784874063000


@dataclass
class Expected:
    """How many of each defect the generator planted; `bench/run.py` checks scan finds them."""

    SF001: int = 0
    SF002: int = 0
    SF201: int = 0
    SF202: int = 0
    SF301: int = 0
    SF401: int = 0
    SF402_error: int = 0
    SF402_info: int = 0
    SF403: int = 0
    SF601: int = 0
    notes: list[str] = field(default_factory=list)


class Text:
    """Random prose taken from a pre-built pool: fast, varied and deterministic."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        words = [rng.choice(WORDS) for _ in range(600_000)]
        for i in range(0, len(words), 17):
            words[i] += "."
        for i in range(0, len(words), 61):
            words[i] += "\n"
        self.pool = " ".join(words)

    def take(self, length: int) -> str:
        start = self.rng.randrange(0, len(self.pool) - length - 1)
        return self.pool[start : start + length]

    def size(self, median: float, sigma: float = 1.0, cap: int = 200_000, floor: int = 8) -> int:
        return max(floor, min(cap, int(self.rng.lognormvariate(0, sigma) * median)))


def _signature(seed: str) -> str:
    """A thinking signature as Anthropic's look (padded base64, 320 characters), made
    from text the generator took anyway: its stream stays as it was."""
    return base64.b64encode(seed.replace(" ", "").encode()[:40].ljust(40, b"=") * 6).decode()


class Writer:
    def __init__(self, out: Path, seed: int) -> None:
        self.handle = open(out, "wb")  # noqa: SIM115 - closed by close()
        self.rng = random.Random(seed)
        self.text = Text(self.rng)
        self.count = 0
        self.leaf: str | None = None
        self.bytes = 0
        self.ms = BASE_MS
        self.pending_glue: bytes | None = None
        self.taken: set[str] = set()

    def new_id(self) -> str:
        """8 hex digits like pi's ids, never repeating (pi checks for collisions too)."""
        self.count += 1
        while True:
            candidate = f"{self.rng.getrandbits(32):08x}"
            if candidate not in self.taken:
                self.taken.add(candidate)
                return candidate

    def stamp(self) -> str:
        self.ms += self.rng.randrange(50, 4000)
        seconds, millis = divmod(self.ms, 1000)
        from datetime import UTC, datetime

        return (
            datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}Z"
        )

    def emit(self, record: dict[str, object], *, glue_next: bool = False) -> str | None:
        line = orjson.dumps(record)
        if self.pending_glue is not None:
            line = self.pending_glue + line
            self.pending_glue = None
        if glue_next:
            self.pending_glue = line
            return record.get("id")  # type: ignore[return-value]
        self.handle.write(line + b"\n")
        self.bytes += len(line) + 1
        return record.get("id")  # type: ignore[return-value]

    def entry(
        self,
        kind: str,
        fields: dict[str, object],
        *,
        parent: str | bool | None = True,
        glue_next: bool = False,
    ) -> str:
        entry_id = self.new_id()
        record: dict[str, object] = {
            "type": kind,
            "id": entry_id,
            "parentId": self.leaf if parent is True else parent,
            "timestamp": self.stamp(),
        }
        record.update(fields)
        self.emit(record, glue_next=glue_next)
        self.leaf = entry_id
        return entry_id

    def user(self, text: str, *, ts: int | None = None) -> str:
        message = {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": ts if ts is not None else self.ms,
        }
        return self.entry("message", {"message": message})

    def assistant(
        self,
        calls: list[tuple[str, str, dict[str, object]]],
        *,
        stop: str | None = None,
        partial: bool = False,
        glue_next: bool = False,
    ) -> str:
        content: list[dict[str, object]] = []
        if self.rng.random() < 0.6:
            content.append(
                {
                    "type": "thinking",
                    "thinking": self.text.take(self.text.size(500)),
                    "thinkingSignature": _signature(self.text.take(40)),
                }
            )
        if not calls or self.rng.random() < 0.4:
            content.append({"type": "text", "text": self.text.take(self.text.size(350))})
        for call_id, name, arguments in calls:
            block: dict[str, object] = {
                "type": "toolCall",
                "id": call_id,
                "name": name,
                "arguments": arguments,
            }
            if partial:
                block["partialJson"] = json.dumps(arguments)[:40]
            content.append(block)
        message = {
            "role": "assistant",
            "content": content,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-5",
            "usage": {
                "input": self.rng.randrange(100, 90000),
                "output": self.rng.randrange(10, 4000),
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 0,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": stop or ("toolUse" if calls else "stop"),
            "timestamp": self.ms,
        }
        return self.entry("message", {"message": message}, glue_next=glue_next)

    def result(self, call_id: str, name: str, text: str, *, is_error: bool = False) -> str:
        message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
            "timestamp": self.ms,
        }
        return self.entry("message", {"message": message})

    def close(self) -> None:
        self.handle.close()


def generate(out: Path, size_mb: int, seed: int = 7) -> Expected:
    w = Writer(out, seed)
    rng = w.rng
    expected = Expected()
    header = {"type": "session", "version": 3, "id": HEADER_ID, "timestamp": w.stamp(), "cwd": CWD}
    w.emit(header)
    w.entry("model_change", {"provider": "anthropic", "modelId": "claude-sonnet-5"}, parent=None)
    w.entry("thinking_level_change", {"thinkingLevel": "medium"})
    target = size_mb * 1024 * 1024
    turn = 0
    file_serial = 0
    call_serial = 0
    unanswered_turns: list[int] = []
    last_compaction_turn = 0

    def call_id() -> str:
        nonlocal call_serial
        call_serial += 1
        return f"toolu_{call_serial:012d}"

    while w.bytes < target:
        turn += 1
        prompt = w.text.take(w.text.size(220, 0.6, 2400))
        ts = w.ms
        first = w.user(prompt, ts=ts)
        del first
        if turn % 997 == 0:
            # Overflow recovery re-appended the same prompt (SF201, safe shape).
            w.user(prompt, ts=ts)
            expected.SF201 += 1
        for _step in range(rng.randrange(2, 9)):
            kind = rng.random()
            if kind < 0.04:
                # read a file, later rewrite it fully: the read becomes stale (SF301).
                file_serial += 1
                path = f"src/module_{file_serial}.py"
                rid = call_id()
                w.assistant([(rid, "read", {"path": path})])
                # Longer than the placeholder that would replace it, so it counts as stale.
                w.result(rid, "read", w.text.take(w.text.size(1400, 1.1, 120_000, floor=400)))
                wid = call_id()
                w.assistant(
                    [(wid, "write", {"path": path, "content": w.text.take(w.text.size(900))})]
                )
                w.result(wid, "write", f"Successfully wrote 900 bytes to {path}")
                expected.SF301 += 1
            elif kind < 0.4:
                file_serial += 1
                path = f"src/edited_{file_serial}.py"
                rid, eid = call_id(), call_id()
                w.assistant([(rid, "read", {"path": path})])
                w.result(rid, "read", w.text.take(w.text.size(1400, 1.1, 120_000)))
                w.assistant(
                    [
                        (
                            eid,
                            "edit",
                            {"path": path, "oldText": w.text.take(60), "newText": w.text.take(70)},
                        )
                    ]
                )
                w.result(eid, "edit", f"Successfully replaced text in {path}.")
            else:
                bid = call_id()
                w.assistant([(bid, "bash", {"command": "pytest -q " + w.text.take(20)})])
                w.result(bid, "bash", w.text.take(w.text.size(900, 1.2, 150_000)))
        if turn % 1499 == 0:
            # An aborted turn with a leaked partialJson (SF601) and an unanswered call (SF402 info).
            w.assistant(
                [(call_id(), "edit", {"path": "x.py", "oldText": "a", "newText": "b"})],
                stop="aborted",
                partial=True,
            )
            expected.SF601 += 1
            expected.SF402_info += 1
        elif turn % 1709 == 0:
            # A call whose result went missing before the next prompt (SF402 error).
            w.assistant([(call_id(), "bash", {"command": "make"})])
            unanswered_turns.append(turn)
        elif turn % 1801 == 0:
            # A result for a call nobody made (SF401) and a duplicated result (SF403).
            cid = call_id()
            w.assistant([(cid, "bash", {"command": "ls"})])
            w.result(cid, "bash", "a\nb\n")
            w.result(cid, "bash", "a\nb\n")
            w.result("toolu_gone_" + str(turn), "bash", "stale")
            expected.SF403 += 1
            expected.SF401 += 1
        if turn % 2003 == 0:
            # Two records glued onto one line (SF001).
            w.assistant([], glue_next=True)
            w.user(w.text.take(120))
            expected.SF001 += 1
        w.assistant([])
        if turn % 400 == 0:
            kept = w.leaf
            summary = w.text.take(w.text.size(4000, 0.3))
            tokens = rng.randrange(60000, 180000)
            last_compaction_turn = turn
            compaction = {
                "summary": summary,
                "firstKeptEntryId": kept,
                "tokensBefore": tokens,
                "details": {"readFiles": [], "modifiedFiles": []},
            }
            w.entry("compaction", compaction)
            if turn % 1200 == 0:
                w.entry("compaction", compaction)  # a clone: only the id differs (SF202)
                expected.SF202 += 1
    # A call whose result went missing in the current context window (SF402 error).
    w.assistant([(call_id(), "bash", {"command": "make check"})])
    w.user(w.text.take(80))
    w.assistant([])
    unanswered_turns.append(turn + 1)
    # Unanswered calls before the last compaction's kept entry never reach the provider.
    expected.SF402_error = sum(1 for t in unanswered_turns if t > last_compaction_turn)
    expected.SF402_info += len(unanswered_turns) - expected.SF402_error
    # A crash tore the last line (SF002).
    tail = orjson.dumps(
        {
            "type": "message",
            "id": w.new_id(),
            "parentId": w.leaf,
            "timestamp": w.stamp(),
            "message": {"role": "user", "content": "cut"},
        }
    )
    w.handle.write(tail[: len(tail) // 2])
    expected.SF002 += 1
    w.close()
    expected.notes.append(f"{turn} user turns, {w.count} entries")
    return expected


TINY_HEADER = orjson.dumps(
    {"type": "session", "version": 3, "id": HEADER_ID, "timestamp": "2026-07-24T06:21:03.000Z"}
)


def generate_tiny(out: Path, entries: int) -> None:
    """A header and `entries` of pi's smallest entries, one chain (57 bytes a line):
    the file where the per-entry index dominates memory."""
    with open(out, "wb") as handle:
        handle.write(TINY_HEADER + b"\n")
        handle.write(b'{"type":"message","id":"00000000","parentId":null}\n')
        batch = 100_000
        for first in range(1, entries, batch):
            handle.write(
                b"".join(
                    b'{"type":"message","id":"%08x","parentId":"%08x"}\n' % (n, n - 1)
                    for n in range(first, min(first + batch, entries))
                )
            )


HUGE_RECORD_HEAD = (
    b'{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-07-24T06:21:04.000Z",'
    b'"message":{"role":"user","content":[{"type":"text","text":"'
)
HUGE_RECORD_TAIL = b'"}],"timestamp":1784874064000}}\n'


def generate_huge_line(out: Path, line_bytes: int, *, record: bool, ending: bytes = b"\n") -> None:
    """A header, then one line of `line_bytes` ended by `ending`: a valid user message,
    or garbage (text that is not JSON, some of it not ASCII)."""
    head, fill, tail = (
        (HUGE_RECORD_HEAD, b"0123456789abcdef", HUGE_RECORD_TAIL[:-1] + ending)
        if record
        else (b"", b"not json, \xc3\xa9t\xc3\xa9 ", ending)
    )
    piece = fill * ((1 << 20) // len(fill))
    remaining = line_bytes - len(head) - len(tail)
    with open(out, "wb") as handle:
        handle.write(TINY_HEADER + b"\n" + head)
        while remaining > 0:
            handle.write(piece[:remaining])
            remaining -= len(piece)
        handle.write(tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size-mb", type=int, default=1100, help="size of the session (MiB)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    expected = generate(args.out, args.size_mb, args.seed)
    print(json.dumps(asdict(expected), indent=2))


if __name__ == "__main__":
    main()
