"""Sessions over a token budget for `slim`, in pi's and Claude Code's shapes, small
enough to slim and load fast: old tool outputs long enough to cut, an old prompt with
an image, and last turns the slim must leave whole. `slimmed` writes each with its
slim, for the agents' loaders to load beside the original in their batches."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from sessionfix import Settings
from sessionfix.repair.targets import repair_to
from sessionfix.settings import SLIM_PROTECTED_TURNS

from .sessions import Session
from .test_inline_content import claude_session, image, png

TURNS = 10
OUTPUT_LINES = 160
CUT_MARK = "[sessionfix: "
BUDGET = 14_500
"""Tokens allowed: the sessions load about 48,000 (ten outputs of 18 KB and an image),
so every old output is cut, and the image goes too."""
IMAGE = png(640, 480, 30_000)


def output(turn: int) -> str:
    """A command's output: its outcome line, then many lines."""
    lines = [f"exit 0: turn {turn} built"]
    lines += [f"{turn:02d}:{line:04d} " + "compiling module " * 6 for line in range(OUTPUT_LINES)]
    return "\n".join(lines)


def pi_session(path: Path) -> Path:
    """A pi session of `TURNS` turns, each a bash call with a long output."""
    session = Session()
    for turn in range(TURNS):
        content: list[dict[str, Any]] = [{"type": "text", "text": f"build step {turn}"}]
        if turn == 1:
            content.append({"type": "image", "data": IMAGE, "mimeType": "image/png"})
        message = {"role": "user", "content": content, "timestamp": 1_784_874_063_000 + turn}
        session._entry("message", {"message": message})
        call = f"toolu_{turn:02d}"
        session.assistant([(call, "bash", {"command": f"make step{turn}"})])
        session.result(call, "bash", output(turn))
        session.assistant([])
    path.write_text(session.text())
    return path


PASTE = "".join(f"pasted line {line:03d}: " + "lorem ipsum dolor " * 4 + "\n" for line in range(64))
"""A prompt's pasted text (5.8 KB): nothing slim may cut."""
COMPACTED_BUDGET = 20_000
"""Tokens allowed the compacted session: it loads about 50,000 (eight turns of a pasted
prompt and a long output after the summary); cutting every old output leaves about
25,000, so the oldest turns the compaction keeps must go too."""


def pi_compacted_session(path: Path) -> Path:
    """A pi session of `TURNS` turns, each a pasted prompt and a bash call with a long
    output, compacted after the sixth turn keeping from the third."""
    session = Session()
    prompts: list[str] = []
    for turn in range(TURNS):
        if turn == 6:
            session.compaction(prompts[2], 50_000)
        prompts.append(session.user(f"build step {turn}\n{PASTE}"))
        call = f"toolu_{turn:02d}"
        session.assistant([(call, "bash", {"command": f"make step{turn}"})])
        session.result(call, "bash", output(turn))
        session.assistant([])
    path.write_text(session.text())
    return path


def progress_output(turn: int) -> str:
    """What a `bash_progress` record shows of a running command (3.6 KB)."""
    return "".join(f"{turn:02d}:{line:04d} still compiling\n" for line in range(160))


def claude_lines(path: Path) -> Path:
    """The same conversation as Claude Code writes it: a tool_use, a `progress` record
    of the running command (which the result of every other turn is parented to, as
    Claude Code before 2.1.30 wrote it), its tool_result with the `toolUseResult` copy
    Claude Code keeps for its UI."""
    prompts: list[list[dict[str, Any]]] = []
    for turn in range(TURNS):
        prompt: list[dict[str, Any]] = [{"type": "text", "text": f"build step {turn}"}]
        if turn == 1:
            prompt.append(image(IMAGE))
        prompts.append(prompt)
    claude_session(path, prompts)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    lines: list[dict[str, Any]] = []
    for record in records:
        lines.append(record)
        if record["type"] != "assistant":
            continue
        turn = len([r for r in lines if r["type"] == "assistant"]) - 1
        call = f"toolu_01Build{turn:014d}"
        record["message"]["content"] = [
            {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": f"make {turn}"}}
        ]
        record["message"]["stop_reason"] = "tool_use"
        progress = {
            key: record[key]
            for key in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch")
            if key in record
        }
        progress.update(
            parentUuid=record["uuid"],
            type="progress",
            data={"type": "bash_progress", "output": progress_output(turn), "totalLines": 160},
            toolUseID=call,
            parentToolUseID=call,
            timestamp=record["timestamp"],
            uuid=record["uuid"][:-6] + f"{800 + turn:06d}",
        )
        result = dict(record)
        result.update(
            parentUuid=progress["uuid"] if turn % 2 == 0 else record["uuid"],
            type="user",
            message={
                "role": "user",
                "content": [{"tool_use_id": call, "type": "tool_result", "content": output(turn)}],
            },
            uuid=record["uuid"][:-6] + f"{900 + turn:06d}",
            toolUseResult={"stdout": output(turn), "stderr": "", "interrupted": False},
            sourceToolAssistantUUID=record["uuid"],
        )
        answer = dict(record)
        answer.update(
            parentUuid=result["uuid"],
            message={
                **record["message"],
                "id": record["message"]["id"][:-3] + "ans",
                "content": [{"type": "text", "text": f"Step {turn} built."}],
                "stop_reason": "end_turn",
            },
            uuid=record["uuid"][:-6] + f"{950 + turn:06d}",
        )
        lines += [progress, result, answer]
    for earlier, later in itertools.pairwise(lines):
        if later["type"] == "user" and "toolUseResult" not in later:
            later["parentUuid"] = earlier["uuid"]
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


_CUT = re.compile(r"(.*)\n\[sessionfix: (\d+) characters of this tool output cut .*?\]\n(.*)", re.S)


def assert_cut(was: str, now: str) -> None:
    """`now` is `was` cut: its head (the outcome line whole) and its tail around the
    placeholder, which counts the characters cut."""
    match = _CUT.fullmatch(now)
    assert match is not None, now[:200]
    head, cut, tail = match.group(1), int(match.group(2)), match.group(3)
    assert len(head) + cut + len(tail) == len(was)
    assert was.startswith(head)
    assert was.endswith(tail)
    assert len(now) < len(was)
    assert head.startswith(was.partition("\n")[0] + "\n")


def _codex_line(second: int, line_type: str, payload: dict[str, Any]) -> str:
    stamp = f"2026-10-01T09:{second // 60:02d}:{second % 60:02d}.000Z"
    return json.dumps({"timestamp": stamp, "type": line_type, "payload": payload})


def codex_rollout(path: Path, compacted_after: tuple[int, ...] = ()) -> Path:
    """The same conversation as a Codex rollout (no image: Codex's decoder measures no
    inline media), each turn its context, prompt, call, output and answer; after each
    turn of `compacted_after`, a compaction carrying every item so far as its
    replacement history (the last one's supersedes the others')."""
    meta = {
        "id": "019f8e4a-1c2d-7e3f-8a4b-5c6d7e8f9a0c",
        "timestamp": "2026-10-01T09:00:00.000Z",
        "cwd": "/home/me/app",
        "originator": "codex_cli_rs",
        "cli_version": "0.169.0",
        "source": "cli",
        "model_provider": "openai",
    }
    lines = [_codex_line(0, "session_meta", meta)]
    for turn in range(TURNS):
        at, call = 1 + 5 * turn, f"call_build{turn:02d}"
        prompt = {"type": "input_text", "text": f"build step {turn}"}
        answer = {"type": "output_text", "text": f"Step {turn} built."}
        command = json.dumps({"cmd": f"make step{turn}"})
        lines += [
            _codex_line(at, "turn_context", {"turn_id": f"turn-{turn}", "cwd": "/home/me/app"}),
            _codex_line(
                at + 1, "response_item", {"type": "message", "role": "user", "content": [prompt]}
            ),
            _codex_line(
                at + 2,
                "response_item",
                {
                    "type": "function_call",
                    "name": "exec_command",
                    "arguments": command,
                    "call_id": call,
                },
            ),
            _codex_line(
                at + 3,
                "response_item",
                {"type": "function_call_output", "call_id": call, "output": output(turn)},
            ),
            _codex_line(
                at + 4,
                "response_item",
                {"type": "message", "role": "assistant", "content": [answer]},
            ),
        ]
        if turn in compacted_after:
            carried = [
                record["payload"]
                for record in map(json.loads, lines)
                if record["type"] == "response_item"
            ]
            summary = {"message": f"turns 0 to {turn}", "replacement_history": carried}
            lines.append(_codex_line(at + 4, "compacted", summary))
    path.write_text("".join(line + "\n" for line in lines))
    return path


OPENCODE_SESSION = "ses_19b7a5000000SlimLongOutputs"
_OPENCODE_START = 1767229200000


def _opencode_id(kind: str, number: int) -> str:
    """An id of opencode's shape: its time in 12 hex digits, then a name."""
    return f"{kind}_{(_OPENCODE_START + number) << 12:012x}SlimCase{number:06d}"


def _opencode_part(message: str, number: int, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        **fields,
        "id": _opencode_id("prt", number),
        "sessionID": OPENCODE_SESSION,
        "messageID": message,
    }


def opencode_description(path: Path) -> Path:
    """The same conversation in opencode's export format (no image), for `opencode
    import`: each turn a prompt, an assistant step with a completed bash call, and one
    with the answer."""
    tokens = {"input": 10, "output": 5, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    messages: list[dict[str, Any]] = []
    number = 0

    def message(role: str, parts: list[dict[str, Any]], **info: Any) -> None:
        nonlocal number
        number += 1
        ident = _opencode_id("msg", number)
        at = _OPENCODE_START + number * 1000
        base: dict[str, Any] = {"id": ident, "sessionID": OPENCODE_SESSION, "role": role}
        if role == "user":
            base |= {"time": {"created": at}, "agent": "build"}
            base["model"] = {"providerID": "mock", "modelID": "m1"}
        else:
            base |= {"time": {"created": at, "completed": at + 500}, **info}
            base |= {"modelID": "m1", "providerID": "mock", "mode": "build", "agent": "build"}
            base |= {"path": {"cwd": "/work/project", "root": "/work/project"}}
            base |= {"cost": 0, "tokens": tokens}
        made = []
        for offset, part in enumerate(parts):
            made.append(_opencode_part(ident, number * 10 + offset, part))
        messages.append({"info": base, "parts": made})

    for turn in range(TURNS):
        message("user", [{"type": "text", "text": f"build step {turn}"}])
        prompt = _opencode_id("msg", number)
        start = _OPENCODE_START + number * 1000 + 1100
        call = {
            "type": "tool",
            "callID": f"call_build_{turn}",
            "tool": "bash",
            "state": {
                "status": "completed",
                "input": {"command": f"make step{turn}", "description": f"Build step {turn}"},
                "output": output(turn),
                "title": f"make step{turn}",
                "metadata": {"exit": 0, "truncated": False},
                "time": {"start": start, "end": start + 100},
            },
        }
        step_end = {"type": "step-finish", "reason": "tool-calls", "cost": 0, "tokens": tokens}
        steps = [{"type": "step-start"}, call, step_end]
        message("assistant", steps, parentID=prompt, finish="tool-calls")
        answer = [
            {"type": "step-start"},
            {"type": "text", "text": f"Step {turn} built."},
            {"type": "step-finish", "reason": "stop", "cost": 0, "tokens": tokens},
        ]
        message("assistant", answer, parentID=prompt, finish="stop")
    info = {
        "id": OPENCODE_SESSION,
        "slug": "slim-case",
        "projectID": "global",
        "directory": "/work/project",
        "title": "long outputs",
        "version": "1.18.33",
        "time": {"created": _OPENCODE_START, "updated": _OPENCODE_START + number * 1000},
    }
    path.write_text(json.dumps({"info": info, "messages": messages}, indent=1))
    return path


CODEX_BUDGET = 18_000
"""The rollout loads about 50,000 tokens: every old output is cut."""


CLAUDE_MAX_SIZE = 130_000
"""Bytes allowed the Claude Code session: with its old outputs and their copies cut
(about 162,000 bytes left), its eight old `progress` records (4,400 bytes each) must go."""
CLAUDE_SIZE_ONLY = 300_000
"""Bytes allowed the Claude Code session with no budget (it takes 461,575): its eight old
`progress` records go (35,000 bytes), then the `toolUseResult` copies of its eight old
outputs are cut (127,000 bytes)."""
CODEX_HISTORIES = (3, 6)
"""The turns the history rollout is compacted after: the first compaction's replacement
history (73 KB) is superseded by the second's."""
CODEX_MAX_SIZE = 350_000
"""Bytes allowed the history rollout (390,000): the superseded history must go."""


@dataclass(frozen=True)
class SlimCase:
    original: Path
    slimmed: Path
    budget: int | None
    max_size: int | None = None


SETTINGS = Settings(quiescence=0.0, budget=BUDGET, protect_last_turns=SLIM_PROTECTED_TURNS)


def slimmed(folder: Path, agent: str) -> SlimCase:
    """The agent's session over `BUDGET`, written beside its slim."""
    folder.mkdir(parents=True, exist_ok=True)
    budget: int | None = BUDGET
    max_size = None
    if agent == "pi":
        original = pi_session(folder / "session.jsonl")
    elif agent == "pi-compacted":
        original = pi_compacted_session(folder / "session.jsonl")
        budget = COMPACTED_BUDGET
    elif agent == "codex":
        original = codex_rollout(folder / "rollout.jsonl")
        budget = CODEX_BUDGET
    elif agent == "codex-histories":
        original = codex_rollout(folder / "rollout.jsonl", CODEX_HISTORIES)
        budget, max_size = None, CODEX_MAX_SIZE
    elif agent == "claude-size":
        original = claude_lines(folder / "3f6a9c2e-1b4d-4e7f-8a0c-5d2e7f9b1c3a.jsonl")
        budget, max_size = None, CLAUDE_SIZE_ONLY
    else:
        original = claude_lines(folder / "3f6a9c2e-1b4d-4e7f-8a0c-5d2e7f9b1c3a.jsonl")
        max_size = CLAUDE_MAX_SIZE
    target = folder / "slimmed" / original.name
    target.parent.mkdir()
    repair_to(original, target, msgspec.structs.replace(SETTINGS, budget=budget, max_size=max_size))
    return SlimCase(original, target, budget, max_size)
