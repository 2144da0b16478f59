"""Build a large Codex rollout from the sample rollouts in the corpus, shaped like the
ones that grow to 0.7-2 GB in the field: most of the bytes are `compacted` records
whose `replacement_history` repeats the same inline images again and again.

The record shapes are the samples' (`../shared/corpus/codex/`, read in place): the
real `codex_exec` rollout gives `session_meta`, `turn_context`, the turn's `event_msg`
records (`task_started`, `user_message`, `agent_message`, `token_count`,
`task_complete`) and its messages; the current tool shapes give `function_call`
(`exec_command`, `write_stdin`) with their `function_call_output`, `custom_tool_call`
with its output, and `reasoning`. Each turn is a copy with ids of its own (turn ids,
call ids), timestamps moving forward, its outputs and reasoning filled to realistic
sizes, and now and then a user message with an inline PNG (`input_image`, base64
`image_url`) from a small fixed set of images.

After every few turns comes a `compacted` record whose `replacement_history` holds
the conversation so far (user and assistant messages, calls and their outputs, images
inline), its oldest items dropped to keep it under a cap: 20 MiB for a file of 300 MiB
or more, less for a smaller file. So the histories grow from one compaction to the
next up to the cap, each one repeating the images of the one before.

Planted, in known numbers (printed, and returned): two records glued on one line
(SF001), a torn last line (SF002), outputs of calls never made (SF401), calls whose
turn ends without their output (SF402, as info: a later compaction summarises the
turn away), tool names with a NUL at the end (SF602), records over the default
size limit (SF603: the compactions and the large outputs) and superseded
replacement histories (SF504: every compaction but the newest). Nothing else is
reported. The output is written record by record, holds at most one history in
memory, and is the same for the same size.

    python bench/generate_codex.py OUT.jsonl --size-mb 300
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
from collections import deque
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "codex"
REAL = "kvsankar-agent-history__real_sessions_codex_session-01.jsonl"
TOOLS = "session-doctor__current-response-items.jsonl"
BASIC = "session-doctor__basic-session.jsonl"
SAMPLES = (REAL, TOOLS, BASIC)
MAX_RECORD_SIZE = 256 * 1024
"""sessionfix's default `--max-record-size` (SF603)."""
HISTORY_CAP = 20 << 20
"""The largest replacement history, for a file of `FULL_SIZE` or more."""
FULL_SIZE = 300 << 20
START_MS = 1780635500000  # 2026-06-05T04:58:20Z
SESSION_ID = "019e9625-802f-7e91-840a-cfe88d14117a"
IMAGES = 6
WORDS = [
    "src",
    "tests",
    "build",
    "cargo",
    "pytest",
    "ok",
    "passed",
    "failed",
    "error",
    "warning",
    "module",
    "function",
    "return",
    "import",
    "from",
    "def",
    "class",
    "self",
    "value",
    "result",
    "index",
    "line",
    "file",
    "path",
    "json",
    "record",
    "session",
    "compile",
    "target",
    "debug",
    "release",
    "lint",
    "format",
    "check",
    "diff",
    "patch",
    "apply",
    "commit",
    "branch",
]


@dataclass
class Stats:
    """What the generated file holds, and what `sessionfix scan` must find in it."""

    bytes: int = 0
    records: int = 0
    turns: int = 0
    compactions: int = 0
    compacted_bytes: int = 0
    largest_history: int = 0
    images: int = 0
    tool_calls: int = 0
    planted: dict[str, int] = field(default_factory=dict)
    samples: list[str] = field(default_factory=list)


def read_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_bytes().splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def _first(
    records: list[dict[str, Any]], line_type: str, inner: str | None = None, **match: Any
) -> dict[str, Any]:
    for record in records:
        payload = record.get("payload") or {}
        if record.get("type") != line_type:
            continue
        if inner is not None and payload.get("type") != inner:
            continue
        if all(payload.get(key) == value for key, value in match.items()):
            return json.loads(json.dumps(record))
    raise ValueError(f"no {line_type} {inner} {match} in the samples")


class Shapes:
    """One template record of each kind, from the samples."""

    def __init__(self, corpus: Path) -> None:
        real = read_records(corpus / REAL)
        tools = read_records(corpus / TOOLS)
        basic = read_records(corpus / BASIC)
        self.meta = _first(real, "session_meta")
        self.task_started = _first(real, "event_msg", "task_started")
        self.turn_context = _first(real, "turn_context")
        self.user = _first(real, "response_item", "message", role="user")
        self.user_event = _first(real, "event_msg", "user_message")
        self.agent_event = _first(real, "event_msg", "agent_message")
        self.assistant = _first(real, "response_item", "message", role="assistant")
        self.token_count = _first(real, "event_msg", "token_count")
        self.task_complete = _first(real, "event_msg", "task_complete")
        self.exec_call = _first(tools, "response_item", "function_call", name="exec_command")
        self.stdin_call = _first(tools, "response_item", "function_call", name="write_stdin")
        self.call_output = _first(tools, "response_item", "function_call_output")
        self.custom_call = _first(tools, "response_item", "custom_tool_call")
        self.custom_output = _first(tools, "response_item", "custom_tool_call_output")
        self.reasoning = _first(basic, "response_item", "reasoning")


def stamp(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{millis:03d}Z"


def uuid7ish(*parts: object) -> str:
    h = hashlib.blake2b("\0".join(map(str, parts)).encode(), digest_size=16).hexdigest()
    return f"019e{h[4:8]}-{h[8:12]}-7{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


def make_image(number: int, size: int) -> str:
    """A PNG-like blob of about `size` base64 characters, as a data URL."""
    raw = b"\x89PNG\r\n\x1a\n" + random.Random(f"image{number}").randbytes(size * 3 // 4)
    return "data:image/png;base64," + base64.b64encode(raw).decode()


class Generator:
    def __init__(self, out: Path, size_mb: int, corpus: Path) -> None:
        self.out = out
        self.target = size_mb << 20
        self.shapes = Shapes(corpus)
        scale = min(1.0, self.target / FULL_SIZE)
        self.cap = max(64 << 10, int(HISTORY_CAP * scale))
        self.turns_per_compaction = max(2, round(12 * scale))
        self.images = [make_image(n, int(self.cap * (0.02 + 0.01 * n))) for n in range(IMAGES)]
        self.random = random.Random(size_mb)
        text = " ".join(self.random.choice(WORDS) for _ in range(60_000))
        self.text = text
        self.clock = START_MS
        self.stats = Stats(samples=list(SAMPLES))
        self.planted = dict.fromkeys(
            ("SF001", "SF002", "SF401", "SF402", "SF504", "SF602", "SF603"), 0
        )
        self.history: deque[bytes] = deque()
        self.history_bytes = 0
        self.handle: Any = None
        self.glue_next = False

    # -- writing ------------------------------------------------------------------------

    def _tick(self) -> str:
        self.clock += self.random.randrange(5, 4000)
        return stamp(self.clock)

    def write(self, record: dict[str, Any] | list[bytes], *, glue: bool = False) -> int:
        """One record (a dict, or its bytes in pieces); `glue`: no newline after it."""
        pieces = [orjson.dumps(record)] if isinstance(record, dict) else record
        size = sum(map(len, pieces))
        if size > MAX_RECORD_SIZE:
            self.planted["SF603"] += 1
        if glue:
            self.planted["SF001"] += 1
        else:
            pieces.append(b"\n")
        self.handle.writelines(pieces)
        self.stats.bytes += size + (0 if glue else 1)
        self.stats.records += 1
        return size

    def record(self, shape: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": self._tick(), "type": shape["type"], "payload": payload}

    def remember(self, item: dict[str, Any]) -> None:
        data = orjson.dumps(item)
        self.history.append(data)
        self.history_bytes += len(data) + 1
        while self.history_bytes > self.cap and len(self.history) > 1:
            self.history_bytes -= len(self.history.popleft()) + 1

    def filler(self, size: int) -> str:
        start = self.random.randrange(0, len(self.text) - size - 1) if size < len(self.text) else 0
        return self.text[start : start + size]

    # -- records ------------------------------------------------------------------------

    def call_pair(
        self,
        turn: int,
        number: int,
        *,
        name_suffix: str = "",
        answered: bool = True,
        remember: bool = True,
    ) -> None:
        shapes = self.shapes
        call_id = "call_" + hashlib.blake2b(f"{turn}.{number}".encode(), digest_size=12).hexdigest()
        kind = number % 3
        if kind == 2:
            call = dict(shapes.custom_call["payload"], call_id=call_id)
            call["input"] = (
                "*** Begin Patch\n*** Update File: src/app.py\n@@\n-"
                + self.filler(200)
                + "\n+"
                + self.filler(240)
                + "\n*** End Patch"
            )
            output = dict(shapes.custom_output["payload"], call_id=call_id)
            output["output"] = json.dumps(
                {
                    "output": "Success. Updated the following files:\nM src/app.py\n",
                    "metadata": {"exit_code": 0, "duration_seconds": 0.1},
                }
            )
        else:
            template = shapes.exec_call if kind == 0 else shapes.stdin_call
            call = dict(template["payload"], call_id=call_id)
            args = json.loads(call["arguments"])
            if "cmd" in args:
                args["cmd"] = self.filler(self.random.randrange(20, 120))
            call["arguments"] = json.dumps(args)
            output = dict(shapes.call_output["payload"], call_id=call_id)
            # Mostly a few KiB; one in a hundred a large build log.
            size = self.random.randrange(400, 6000)
            if self.random.randrange(100) == 0:
                size = self.random.randrange(300_000, 600_000)
            body = self.filler(min(size, len(self.text) - 2))
            while len(body) < size:
                body += "\n" + self.filler(min(size - len(body), len(self.text) - 2))
            output["output"] = (
                f"Chunk ID: {call_id[5:11]}\nWall time: {self.random.random():.4f} seconds\n"
                f"Process exited with code {self.random.choice((0, 0, 0, 1))}\nOutput:\n{body}"
            )
        if name_suffix:
            call["name"] += name_suffix
        self.write(self.record(shapes.custom_call, call))
        self.stats.tool_calls += 1
        if answered:
            self.write(self.record(shapes.call_output, output))
        if remember and answered:
            self.remember(call)
            self.remember(output)

    def turn(self, turn: int, defects: set[str]) -> None:
        shapes = self.shapes
        turn_id = uuid7ish("turn", turn)
        context = dict(shapes.turn_context["payload"], turn_id=turn_id)
        context["current_date"] = stamp(self.clock)[:10]
        self.write(self.record(shapes.turn_context, context), glue="SF001" in defects)
        self.write(
            self.record(
                shapes.task_started,
                dict(
                    shapes.task_started["payload"], turn_id=turn_id, started_at=self.clock // 1000
                ),
            )
        )
        prompt = self.filler(self.random.randrange(80, 1200))
        content: list[dict[str, Any]] = [{"type": "input_text", "text": prompt}]
        if turn % self.turns_per_compaction == 0:
            content.append(
                {
                    "type": "input_image",
                    "image_url": self.images[(turn // self.turns_per_compaction) % IMAGES],
                }
            )
            self.stats.images += 1
        user = dict(shapes.user["payload"], content=content)
        self.write(self.record(shapes.user, user))
        self.remember(user)
        images = [part["image_url"] for part in content if part["type"] == "input_image"]
        self.write(
            self.record(
                shapes.user_event, dict(shapes.user_event["payload"], message=prompt, images=images)
            )
        )
        if "SF401" in defects:
            orphan = dict(
                shapes.call_output["payload"],
                call_id=f"call_orphan_{turn}",
                output="Process exited with code 0\n",
            )
            self.write(self.record(shapes.call_output, orphan))
        for number in range(self.random.randrange(2, 7)):
            reasoning = dict(shapes.reasoning["payload"])
            reasoning["summary"] = [
                {"type": "summary_text", "text": self.filler(self.random.randrange(60, 400))}
            ]
            reasoning["encrypted_content"] = (
                "gAAAAA"
                + base64.b64encode(self.random.randbytes(self.random.randrange(600, 3000))).decode()
            )
            self.write(self.record(shapes.reasoning, reasoning))
            self.call_pair(turn, number)
        if "SF602" in defects:
            self.call_pair(turn, 99, name_suffix="\x00", remember=False)
        if "SF402" in defects:
            self.call_pair(turn, 98, answered=False, remember=False)
        answer = self.filler(self.random.randrange(100, 2000))
        assistant = dict(
            shapes.assistant["payload"], content=[{"type": "output_text", "text": answer}]
        )
        self.write(
            self.record(shapes.agent_event, dict(shapes.agent_event["payload"], message=answer))
        )
        self.write(self.record(shapes.assistant, assistant))
        self.remember(assistant)
        self.write(self.record(shapes.token_count, shapes.token_count["payload"]))
        self.write(
            self.record(
                shapes.task_complete,
                dict(
                    shapes.task_complete["payload"],
                    turn_id=turn_id,
                    last_agent_message=answer[:200],
                    completed_at=self.clock // 1000,
                ),
            )
        )
        self.stats.turns += 1

    def compaction(self) -> None:
        summary = orjson.dumps("Summary of the conversation so far: " + self.filler(1500))
        head = (
            b'{"timestamp":"%s","type":"compacted","payload":{"message":%s,"replacement_history":['
            % (
                self._tick().encode(),
                summary,
            )
        )
        pieces = [head]
        for number, item in enumerate(self.history):
            if number:
                pieces.append(b",")
            pieces.append(item)
        pieces.append(b"]}}")
        size = self.write(pieces)
        self.stats.compactions += 1
        self.stats.compacted_bytes += size + 1
        self.stats.largest_history = max(self.stats.largest_history, size)

    def defects_of(self, turn: int) -> set[str]:
        """Which defects turn number `turn` carries: one in a few turns has one."""
        cycle = {3: "SF001", 5: "SF401", 8: "SF402", 11: "SF602"}
        found = cycle.get(turn % 13)
        return {found} if found else set()

    def run(self) -> Stats:
        shapes = self.shapes
        with open(self.out, "wb") as self.handle:
            meta = dict(shapes.meta["payload"], id=SESSION_ID, timestamp=stamp(START_MS))
            self.write({"timestamp": stamp(START_MS), "type": "session_meta", "payload": meta})
            turn = 0
            while self.stats.bytes < self.target:
                defects = self.defects_of(turn)
                self.turn(turn, defects)
                for code in defects:
                    if code != "SF001":
                        self.planted[code] += 1
                turn += 1
                if turn % self.turns_per_compaction == 0:
                    self.compaction()
            # A last turn cut off in the middle of writing a record.
            torn = orjson.dumps(self.record(shapes.token_count, shapes.token_count["payload"]))
            self.handle.write(torn[: len(torn) // 2])
            self.stats.bytes += len(torn) // 2
            self.stats.records += 1
            self.planted["SF002"] = 1
        self.planted["SF504"] = max(0, self.stats.compactions - 1)
        self.stats.planted = dict(sorted(self.planted.items()))
        return self.stats


def generate_codex(out: Path, size_mb: int, corpus: Path = CORPUS) -> Stats:
    """Turns and compactions until the file holds at least `size_mb` MiB."""
    return Generator(out, size_mb, corpus).run()


def fingerprint(corpus: Path = CORPUS) -> str:
    """Names and sizes of the samples, for telling whether a cached file is current."""
    return ",".join(f"{name}:{(corpus / name).stat().st_size}" for name in SAMPLES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size-mb", type=int, default=300, help="size of the rollout (MiB)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    print(json.dumps(asdict(generate_codex(args.out, args.size_mb, args.corpus)), indent=2))


if __name__ == "__main__":
    main()
