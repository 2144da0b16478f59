"""Building pi sessions in tests: records in the writer's key order, plus corruptions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

BASE_MS = 1_784_874_063_000
HEADER_ID = "019f92c8-d694-7ac3-9144-e3b22add01f3"


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def stamp(n: int) -> str:
    seconds = 3 + n
    return f"2026-07-24T06:{21 + seconds // 60 % 38:02d}:{seconds % 60:02d}.000Z"


def iso_stamp(ms: int) -> str:
    """The entry timestamp pi writes (`toISOString()`) for `ms` after the epoch."""
    moment = datetime.fromtimestamp(ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


@dataclass
class Session:
    """Appends pi v3 records; `lines` are JSON texts without terminators."""

    lines: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    leaf: str | None = None
    serial: int = 0
    clock: int | None = None
    """Milliseconds after `BASE_MS` that entries are stamped with; None: one second
    apart, by their serial number."""

    def __post_init__(self) -> None:
        header = {
            "type": "session",
            "version": 3,
            "id": HEADER_ID,
            "timestamp": stamp(0),
            "cwd": "/home/user/proj",
        }
        self.lines.append(dumps(header))

    def _entry(
        self,
        kind: str,
        fields: dict[str, Any],
        parent: str | bool | None = True,
        leading: dict[str, Any] | None = None,
    ) -> str:
        """Append an entry: `leading` fields before its id (where pi writes them), the
        others after its timestamp."""
        self.serial += 1
        entry_id = f"{0xA0000000 + self.serial:08x}"
        record = {
            "type": kind,
            **(leading or {}),
            "id": entry_id,
            "parentId": self.leaf if parent is True else parent,
            "timestamp": stamp(self.serial)
            if self.clock is None
            else iso_stamp(BASE_MS + self.clock),
        }
        record.update(fields)
        self.lines.append(dumps(record))
        self.ids.append(entry_id)
        self.leaf = entry_id
        return entry_id

    def user(self, text: str, ts: int | None = None, parent: str | bool | None = True) -> str:
        message = {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": BASE_MS + self.serial * 1000 if ts is None else ts,
        }
        return self._entry("message", {"message": message}, parent)

    def assistant(
        self,
        calls: list[tuple[str, str, dict[str, Any]]],
        stop: str | None = None,
        partial: bool = False,
        signature: str | None = None,
    ) -> str:
        """An assistant message; with a `signature`, its thinking is signed and the
        message a Claude model's on Anthropic's API."""
        thinking: dict[str, Any] = {"type": "thinking", "thinking": "hmm"}
        if signature is not None:
            thinking["thinkingSignature"] = signature
        content: list[dict[str, Any]] = [thinking]
        for call_id, name, arguments in calls:
            block: dict[str, Any] = {
                "type": "toolCall",
                "id": call_id,
                "name": name,
                "arguments": arguments,
            }
            if partial:
                block["partialJson"] = '{"pa'
            content.append(block)
        if not calls:
            content.append({"type": "text", "text": "done"})
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if signature is not None:
            message |= {"api": "anthropic-messages", "provider": "anthropic"}
            message["model"] = "claude-opus-4-5"
        message["stopReason"] = stop or ("toolUse" if calls else "stop")
        message["timestamp"] = BASE_MS + self.serial * 1000
        return self._entry("message", {"message": message})

    def result(
        self,
        call_id: str,
        name: str,
        text: str,
        is_error: bool = False,
        parent: str | bool | None = True,
    ) -> str:
        message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
            "timestamp": BASE_MS + self.serial * 1000,
        }
        return self._entry("message", {"message": message}, parent)

    def compaction(
        self, kept: str | None, tokens: int, summary: str = "Summary of the work so far."
    ) -> str:
        fields: dict[str, Any] = {"summary": summary}
        if kept is not None:
            fields["firstKeptEntryId"] = kept
        fields["tokensBefore"] = tokens
        return self._entry("compaction", fields)

    def label(self, target: str) -> str:
        return self._entry("label", {"targetId": target, "label": "mark"})

    def custom(self, custom_type: str) -> str:
        """Extension data that never reaches the model."""
        return self._entry("custom", {}, leading={"customType": custom_type, "data": {}})

    def session_info(self, name: str) -> str:
        return self._entry("session_info", {"name": name})

    def setting(self, kind: str) -> str:
        """A model or thinking-level change: an entry on the chain that pairs nothing."""
        if kind == "model_change":
            return self._entry(kind, {"provider": "anthropic", "modelId": "claude-sonnet-4-5"})
        return self._entry(kind, {"thinkingLevel": "high"})

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


FILES = ["src/a.py", "src/b.py", "/home/user/proj/src/a.py", "docs/c.md"]
TOOLS = ["bash", "read", "write", "edit"]
DAMAGE = [
    *("glue", "blank", "empty", "indent", "crlf", "bom", "nul", "undefined", "garbage"),
    *("same-id", "header", "split"),
]
ODD_ARGUMENTS: list[Any] = [{}, {"path": ""}, {"path": 7}, {"path": None}, "a.txt", None]
"""Arguments a file tool call can carry that name no usable path."""
SETTINGS = ["thinking_level_change", "model_change"]
WHOLE_SIGNATURE = "EqQB" * 86
"""A thinking signature as Anthropic's look (ASCII, 344 characters)."""
CUT_SIGNATURE = WHOLE_SIGNATURE[:201]
"""One cut short in the stream (SF606)."""
TEXTS = ["continue", "fix the bug", "Read HEARTBEAT.md", "ok", "x" * 300]


def _signatures(corrupt: bool) -> st.SearchStrategy[str | None]:
    """No signature, a whole one, or (`corrupt`) one cut short."""
    return st.sampled_from([None, WHOLE_SIGNATURE, *([CUT_SIGNATURE] if corrupt else [])])


@st.composite
def sessions(draw: st.DrawFn, corrupt: bool = True) -> bytes:
    """A pi v3 session with tool calls, compactions, branches and (optionally) damage."""
    session = Session()
    calls_made = 0
    users: list[str] = []
    previous = ""
    steps = draw(st.integers(1, 25))
    for step in range(steps):
        action = draw(
            st.sampled_from(
                ["turn", "turn", "turn", "clone", "compaction", "branch", "label", "orphan"]
                if corrupt
                else ["turn", "turn", "turn", "compaction", "label"]
            )
        )
        if not corrupt and action == "compaction" and previous != "turn":
            action = "turn"
        previous = action
        if action == "turn":
            users.append(session.user(draw(st.sampled_from(TEXTS))))
            for _ in range(draw(st.integers(0, 3))):
                count = draw(st.integers(0, 3))
                calls = []
                for _ in range(count):
                    calls_made += 1
                    name = draw(st.sampled_from(TOOLS))
                    path = draw(st.sampled_from(FILES))
                    arguments: dict[str, Any] = (
                        {"command": "ls"} if name == "bash" else {"path": path}
                    )
                    if name == "write":
                        arguments["content"] = "new"
                    if corrupt and draw(st.integers(0, 9)) == 0:
                        arguments = draw(st.sampled_from(ODD_ARGUMENTS))
                    calls.append((f"toolu_{calls_made}", name, arguments))
                stop = draw(st.sampled_from(["toolUse", "toolUse", "aborted"])) if corrupt else None
                session.assistant(
                    calls,
                    stop=stop if calls else None,
                    partial=corrupt and draw(st.booleans()) and stop == "aborted",
                    signature=draw(_signatures(corrupt)),
                )
                order = list(calls)
                if corrupt and draw(st.booleans()):
                    order = order[::-1]
                for call_id, name, _ in order:
                    if corrupt and draw(st.integers(0, 9)) == 0:
                        continue
                    text = draw(
                        st.sampled_from(["ok", "file contents " * 20, "Successfully wrote"])
                    )
                    session.result(
                        call_id, name, text, is_error=corrupt and draw(st.integers(0, 9)) == 0
                    )
                    if corrupt and draw(st.integers(0, 14)) == 0:
                        session.result(call_id, name, text)
                    if draw(st.integers(0, 7)) == 0:
                        session.setting(draw(st.sampled_from(SETTINGS)))
            ended = draw(st.sampled_from(["stop", "stop", "aborted", "error"])) if corrupt else None
            session.assistant([], stop=ended, signature=draw(_signatures(corrupt)))
            if draw(st.integers(0, 3)) == 0:
                session.setting(draw(st.sampled_from(SETTINGS)))
        elif action == "clone" and session.lines:
            ts = BASE_MS + 999
            session.user("Read HEARTBEAT.md", ts=ts)
            session.user("Read HEARTBEAT.md", ts=ts)
        elif action == "compaction" and session.ids:
            if corrupt:
                kept = draw(st.sampled_from([*session.ids[-5:], None]))
                session.compaction(kept, draw(st.sampled_from([1000, 2000])))
            else:
                session.compaction(users[-1], 1000 + step)
        elif action == "branch" and session.ids:
            session.leaf = draw(st.sampled_from(session.ids))
            session.user("another way")
        elif action == "label" and session.ids:
            session.label(draw(st.sampled_from(session.ids)))
        elif action == "orphan":
            session.result("toolu_gone", "bash", "stale")
    data = session.text().encode()
    if not corrupt:
        return data
    return draw(damaged(data))


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """Line-level damage: glued, blank, indented and split lines, CRLF, BOM, NUL runs, a
    torn tail."""
    lines = data.split(b"\n")[:-1]
    for _ in range(draw(st.integers(0, 3))):
        if len(lines) < 3:
            break
        at = draw(st.integers(1, len(lines) - 1))
        kind = draw(st.sampled_from(DAMAGE))
        if kind == "glue" and at + 1 < len(lines):
            lines[at : at + 2] = [lines[at] + lines[at + 1]]
        elif kind == "blank":
            lines.insert(at, b"  ")
        elif kind == "empty":
            lines.insert(at, b"")
        elif kind == "indent":
            lines[at] = b" " + lines[at]
        elif kind == "same-id":
            # An earlier entry's id, with the next entry's parent following it along, so
            # that the file still looks like one chain.
            reused = re.search(rb'"id":"([^"]*)"', lines[draw(st.integers(1, at))])
            own = re.search(rb'"id":"([^"]*)"', lines[at])
            if reused is not None and own is not None:
                lines[at] = lines[at].replace(own.group(0), reused.group(0), 1)
                if at + 1 < len(lines):
                    lines[at + 1] = lines[at + 1].replace(
                        b'"parentId":"' + own.group(1) + b'"',
                        b'"parentId":"' + reused.group(1) + b'"',
                        1,
                    )
        elif kind == "header":
            lines.insert(at, lines[0])
        elif kind == "crlf":
            lines[at] += b"\r"
        elif kind == "bom":
            lines[at] = b"\xef\xbb\xbf" + lines[at]
        elif kind == "nul":
            lines[at] = lines[at] + b"\x00\x00"
        elif kind == "undefined":
            lines.insert(at, b"undefined")
        elif kind == "garbage":
            lines.insert(at, b"{not json}")
        elif kind == "split":
            # One record across two lines, broken where JSON allows whitespace.
            cut = lines[at].find(b'"message":')
            if cut > 0:
                cut += len(b'"message":')
                lines[at : at + 1] = [lines[at][:cut], lines[at][cut:]]
    text = b"".join(line + b"\n" for line in lines)
    if draw(st.booleans()):
        text += b'{"type":"message","id":"ffffffff","parentId":"a00'
    return text


# ---- compactions: copies, near-copies, heartbeats ----------------------------------------

HEARTBEAT = "Read HEARTBEAT.md if it exists. If nothing needs attention, reply HEARTBEAT_OK."
EMPTY_SUMMARY = "Since there is no conversation provided, there is nothing to summarize yet."
SUMMARIES = [EMPTY_SUMMARY, "Parser built."]
COMPACTION_GAPS_MS = [0, 50, 134, 1_600, 2_600, 29_999, 30_000, 30_001, 240_000, 1_800_000]
"""Delays before a compaction: at once (50 to 134 ms in #3645, 1.6 s in #7594, #71691's
loop every 2.6 s), around the 30 s bound, minutes later, a heartbeat's half hour."""
METADATA = ["label", "session_info", "custom", "model_change", "thinking_level_change"]


@dataclass
class CompactionSequence:
    data: bytes
    clones: set[str]
    """Ids of the compactions that copy the compaction just before them: the same
    summary, tokensBefore and kept entry (a copied user message counting as its
    original), nothing but metadata between, written at most `moment_ms` after it."""


@st.composite
def compaction_sequences(draw: st.DrawFn, moment_ms: int) -> CompactionSequence:
    """A pi v3 session of turns (some with an overflow copy of their prompt), heartbeats
    that compact an empty conversation into the same summary every half hour, compactions
    drawn from few payloads at various delays, copies of the last compaction, and metadata
    rows, with the clones among its compactions worked out as they are written."""
    session = Session(clock=0)
    clones: set[str] = set()
    kept_choices: list[str] = []
    copied: dict[str, str] = {}
    last: tuple[tuple[str, int, str | None], str | None, int] | None = None
    only_metadata_since_last = False

    def turn(text: str, delay: int) -> None:
        assert session.clock is not None
        session.clock += delay
        user = session.user(text, ts=BASE_MS + session.clock)
        kept_choices.append(user)
        if draw(st.integers(0, 3)) == 0:
            copy = session.user(text, ts=BASE_MS + session.clock)
            copied[copy] = user
            kept_choices.append(copy)
        session.clock += 1_000
        session.assistant([])

    def compact(summary: str, tokens: int, kept: str | None, delay: int) -> None:
        nonlocal last, only_metadata_since_last
        assert session.clock is not None
        session.clock += delay
        entry = session.compaction(kept, tokens, summary)
        payload = (summary, tokens, copied.get(kept, kept) if kept is not None else None)
        if (
            only_metadata_since_last
            and last is not None
            and last[0] == payload
            and session.clock - last[2] <= moment_ms
        ):
            clones.add(entry)
        last = (payload, kept, session.clock)
        only_metadata_since_last = True

    turn("Build the parser.", 0)
    for _ in range(draw(st.integers(1, 30))):
        action = draw(
            st.sampled_from(["turn", "heartbeat", "compaction", "copy", "copy", "metadata"])
        )
        if action == "turn":
            turn(draw(st.sampled_from(TEXTS)), draw(st.sampled_from([1_000, 60_000])))
            only_metadata_since_last = False
        elif action == "heartbeat":
            turn(HEARTBEAT, 1_800_000)
            only_metadata_since_last = False
            compact(EMPTY_SUMMARY, 12_873, kept_choices[0], 9_000)
        elif action == "compaction" or last is None:
            compact(
                draw(st.sampled_from(SUMMARIES)),
                draw(st.sampled_from([12_873, 12_874])),
                draw(st.sampled_from([kept_choices[0], kept_choices[-1], None])),
                draw(st.sampled_from(COMPACTION_GAPS_MS)),
            )
        elif action == "copy":
            (summary, tokens, original), kept, _ = last
            compact(
                summary,
                tokens,
                draw(st.sampled_from([kept, original])),
                draw(st.sampled_from(COMPACTION_GAPS_MS)),
            )
        else:
            assert session.clock is not None
            session.clock += draw(st.integers(0, 5))
            kind = draw(st.sampled_from(METADATA))
            if kind == "label":
                session.label(draw(st.sampled_from(session.ids)))
            elif kind == "session_info":
                session.session_info("heartbeat")
            elif kind == "custom":
                session.custom("openclaw:bootstrap-context:full")
            else:
                session.setting(kind)
    return CompactionSequence(session.text().encode(), clones)


# ---- Codex rollouts --------------------------------------------------------------------


def _rollout_line(step: int, line_type: str, payload: dict[str, Any], ordinal: int | None) -> str:
    record: dict[str, Any] = {"timestamp": f"2026-09-14T08:{step // 60:02d}:{step % 60:02d}.000Z"}
    if ordinal is not None:
        record["ordinal"] = ordinal
    record["type"] = line_type
    record["payload"] = payload
    return dumps(record)


IMAGE_URL = "data:image/png;base64," + "iVBORw0KGgo" * 40


@st.composite
def rollouts(draw: st.DrawFn, corrupt: bool = True) -> bytes:
    """A Codex rollout: turns of messages, reasoning and tool calls with their outputs,
    compactions carrying their history, and (optionally) missing, repeated and orphan
    outputs, repeated call ids, bad tool names, gaps in the ordinals and line damage."""
    numbered = draw(st.booleans())
    lines: list[str] = []
    items: list[dict[str, Any]] = []
    calls = 0

    def emit(line_type: str, payload: dict[str, Any]) -> None:
        ordinal = len(lines) if numbered else None
        if corrupt and numbered and draw(st.integers(0, 30)) == 0:
            ordinal = draw(st.sampled_from([None, max(len(lines) - 1, 0)]))
        lines.append(_rollout_line(len(lines), line_type, payload, ordinal))
        if line_type == "response_item":
            items.append(payload)

    emit(
        "session_meta",
        {
            "id": "019f3a1c-5e2b-7d40-9c11-6a0b2f1e8d37",
            "timestamp": "2026-09-14T08:00:00.000Z",
            "cwd": "/home/me/app",
            "originator": "codex_cli_rs",
            "cli_version": "0.160.0",
            "source": "cli",
            "model_provider": "openai",
        },
    )
    for _ in range(draw(st.integers(0, 12))):
        action = draw(st.sampled_from(["turn", "turn", "turn", "compaction", "event", "orphan"]))
        if action == "turn":
            emit("turn_context", {"turn_id": f"t{len(lines)}", "cwd": "/home/me/app"})
            text = draw(st.sampled_from(TEXTS))
            content: list[dict[str, Any]] = [{"type": "input_text", "text": text}]
            if draw(st.integers(0, 4)) == 0:
                content.append({"type": "input_image", "image_url": IMAGE_URL})
            emit("response_item", {"type": "message", "role": "user", "content": content})
            emit("event_msg", {"type": "user_message", "message": text})
            pending = []
            for _ in range(draw(st.integers(0, 3))):
                calls += 1
                call_id = f"call_{calls}"
                if corrupt and calls > 1 and draw(st.integers(0, 12)) == 0:
                    call_id = f"call_{calls - 1}"
                kind = draw(st.sampled_from(["function_call", "custom_tool_call"]))
                name = draw(st.sampled_from(["exec_command", "apply_patch", "shell"]))
                if corrupt and draw(st.integers(0, 15)) == 0:
                    name = "exec\x00command"
                payload: dict[str, Any] = {"type": kind, "name": name}
                if kind == "function_call":
                    payload["arguments"] = dumps({"cmd": "ls -la }{"})
                else:
                    payload["input"] = "*** Begin Patch\n*** End Patch"
                payload["call_id"] = call_id
                emit(
                    "response_item",
                    {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"},
                )
                emit("response_item", payload)
                pending.append((call_id, kind))
            for call_id, kind in pending:
                if corrupt and draw(st.integers(0, 7)) == 0:
                    continue
                output = {
                    "type": f"{kind}_output",
                    "call_id": call_id,
                    "output": "Process exited with code 0",
                }
                emit("response_item", output)
                if corrupt and draw(st.integers(0, 10)) == 0:
                    emit("response_item", output)
            emit(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "done"}],
                },
            )
        elif action == "compaction":
            history = [item for item in items[-8:] if item.get("type") != "reasoning"]
            emit("compacted", {"message": "", "replacement_history": history})
            emit("event_msg", {"type": "context_compacted"})
        elif action == "event":
            emit(
                "event_msg",
                draw(
                    st.sampled_from(
                        [
                            {"type": "token_count", "info": None},
                            {"type": "thread_rolled_back", "num_turns": 1},
                            {"type": "exec_command_end", "call_id": f"call_{calls}"},
                        ]
                    )
                ),
            )
        elif action == "orphan" and corrupt:
            emit(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": draw(st.sampled_from(["", "call_gone"])),
                    "output": "stale",
                },
            )
    data = ("\n".join(lines) + "\n").encode()
    if not corrupt:
        return data
    return draw(damaged(data))
