"""What opencode 1.18.33 sends the model from a stored session, as a function of its rows
(spec formats/opencode.md §4): its compaction window (`filterCompacted`) and the model
messages of it (`toModelMessages`, then the chat messages of an OpenAI-compatible
request: one assistant message per model step, one tool message per result).

`tests/test_opencode_context.py` holds this to what the real client sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

import orjson

from sessionfix.formats.opencode.decode import (
    ABORTED,
    ASSISTANT,
    COMPACTION,
    COMPLETED,
    ERROR,
    FILE,
    PENDING,
    REASONING,
    RUNNING,
    STEP_START,
    SUBTASK,
    TEXT,
    TOOL,
    USER,
    Message,
    Part,
    Unreadable,
)
from sessionfix.model.loaded import LoadRefused, Sent

COMPACTION_PROMPT: Final = "What did we do so far?"
"""The text a compaction's user message is sent as."""
SUBTASK_PROMPT: Final = "The following tool was executed by the user"
CLEARED: Final = "[Old tool result content cleared]"
"""What a result marked `time.compacted` is sent as (opencode's own prune placeholder)."""
INTERRUPTED: Final = "[Tool execution was interrupted]"
"""What a call left `pending` or `running` is sent as its result."""
PLAIN_TEXT: Final = "text/plain"
DIRECTORY: Final = "application/x-directory"


class ToolUse(NamedTuple):
    call_id: str
    tool: str
    input: object
    """The input as stored (`{}` for a pending call that has none)."""


class SentMessage(NamedTuple):
    """One chat message of the request opencode makes."""

    sent: Sent
    """USER, ASSISTANT (SUMMARY for a summary's) or TOOL_RESULT."""
    record: str
    """Record key of the row it comes from: a message's id, or the tool part's."""
    texts: tuple[str, ...] = ()
    """Its text contents, in order (a tool result: its one text)."""
    tool_calls: tuple[ToolUse, ...] = ()
    call_id: str | None = None
    """The call a tool result answers."""
    files: int = 0
    """File parts it carries (not plain text, not a folder): how they are sent depends
    on the model prompted (an attachment, or opencode's note that the model cannot read
    it), so `chat_message` leaves them out."""
    reasoning: tuple[str, ...] = ()
    """An assistant step's reasoning texts: sent while the model that is prompted is the
    one that wrote them (the sessions' own model, as a resume has it)."""


class Window(NamedTuple):
    """What opencode keeps of a session."""

    messages: list[Message]
    """The kept messages in the order they are sent."""
    boundary: Message | None
    """The compaction prompt the window starts at (its summary is sound, its kept tail
    found), or None when the whole session is sent."""


def window(messages: Sequence[Message]) -> Window:
    """The messages opencode keeps of a session in load order: newest back to the
    compaction prompt of the newest sound summary (or to the first message its
    compaction keeps), with a kept tail moved after the summary (spec §4.2)."""
    kept: list[Message] = []
    summarised: set[str] = set()
    tail: str | None = None
    boundary: Message | None = None
    for message in reversed(messages):
        kept.append(message)
        if tail is not None:
            if message.key == tail:
                break
            continue
        compaction = message.compaction
        if message.role == USER and message.key in summarised and compaction is not None:
            boundary = message
            tail = compaction.tail_start
            if tail is None:
                break
            continue
        if message.is_summary and message.parent is not None:
            summarised.add(message.parent)
    else:
        boundary = None
    kept.reverse()
    return Window(_tail_after_summary(kept), boundary)


def _tail_after_summary(kept: list[Message]) -> list[Message]:
    """`[W..J] + [V..W) + [J+1..]`: the compaction prompt W with a kept tail and its
    summary J first, then the tail from V, then what came after the summary."""
    prompt = next(
        (
            index
            for index in range(len(kept) - 1, -1, -1)
            if kept[index].role == USER
            and (compaction := kept[index].compaction) is not None
            and compaction.tail_start is not None
        ),
        None,
    )
    if prompt is None:
        return kept
    compaction = kept[prompt].compaction
    assert compaction is not None
    summary = next(
        (
            index
            for index in range(prompt + 1, len(kept))
            if kept[index].is_summary and kept[index].parent == kept[prompt].key
        ),
        None,
    )
    start = next(
        (index for index in range(prompt) if kept[index].key == compaction.tail_start), None
    )
    if summary is None or start is None:
        return kept
    return kept[prompt : summary + 1] + kept[start:prompt] + kept[summary + 1 :]


def _user_texts(parts: Iterable[Part]) -> tuple[tuple[str, ...], int]:
    texts: list[str] = []
    files = 0
    for part in parts:
        data = part.data
        if data.type == TEXT:
            if isinstance(data.text, str) and data.text and not data.ignored:
                texts.append(data.text)
        elif data.type == FILE:
            if data.mime not in (PLAIN_TEXT, DIRECTORY):
                files += 1
        elif data.type == COMPACTION:
            texts.append(COMPACTION_PROMPT)
        elif data.type == SUBTASK:
            texts.append(SUBTASK_PROMPT)
    return tuple(texts), files


def _result(part: Part) -> str | None:
    """What a tool part sends as its result; None for a part that sends no call."""
    state = part.state
    assert state is not None
    status = state.status
    if status == COMPLETED:
        if state.compacted:
            return CLEARED
        return state.output if isinstance(state.output, str) else ""
    if status == ERROR:
        metadata = state.metadata
        if metadata is not None and metadata.interrupted and isinstance(metadata.output, str):
            return metadata.output
        return state.error if isinstance(state.error, str) else ""
    if status in (PENDING, RUNNING):
        return INTERRUPTED
    return None


def sends_call(part: Part) -> bool:
    """Whether opencode sends a part as a tool call with its result: a tool part in one
    of its states (a status it does not know sends nothing)."""
    return part.data.type == TOOL and part.state is not None and _result(part) is not None


def _assistant_steps(message: Message) -> list[SentMessage]:
    """An assistant message as chat messages: each model step (parts up to the next
    `step-start`) one assistant message with its texts and calls, then one tool message
    per call's result."""
    sent: list[SentMessage] = []
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[tuple[ToolUse, str, str]] = []
    has_content = False

    def flush() -> None:
        nonlocal has_content
        if not has_content:
            return
        sent.append(
            SentMessage(
                Sent.SUMMARY if message.is_summary else Sent.ASSISTANT,
                message.key,
                tuple(texts),
                tuple(call for call, _, _ in calls),
                reasoning=tuple(reasoning),
            )
        )
        sent.extend(
            SentMessage(Sent.TOOL_RESULT, key, (result,), call_id=call.call_id)
            for call, key, result in calls
        )
        texts.clear()
        reasoning.clear()
        calls.clear()
        has_content = False

    for part in message.parts:
        data = part.data
        if data.type == STEP_START:
            flush()
        elif data.type == TEXT and isinstance(data.text, str):
            texts.append(data.text)
            has_content = True
        elif data.type == REASONING:
            if isinstance(data.text, str) and data.text:
                reasoning.append(data.text)
            has_content = True
        elif data.type == TOOL:
            result = _result(part)
            state = part.state
            if result is None or state is None:
                continue
            call = ToolUse(
                data.callID if isinstance(data.callID, str) else "",
                data.tool if isinstance(data.tool, str) else "",
                {} if state.input is None or not isinstance(state.input, dict) else state.input,
            )
            calls.append((call, part.key, result))
            has_content = True
    flush()
    return sent


def sends(message: Message) -> bool:
    """Whether opencode makes a model message of a message at all (spec §4.3)."""
    if not message.parts:
        return False
    if all(part.data.type == STEP_START for part in message.parts):
        return False
    if message.role == ASSISTANT and message.error_name is not None:
        return message.error_name == ABORTED and any(
            part.data.type not in (STEP_START, REASONING) for part in message.parts
        )
    return message.role in (USER, ASSISTANT)


def model_messages(messages: Iterable[Message]) -> list[SentMessage]:
    """The chat messages opencode sends the model for a session whose messages (decoded,
    in load order) are `messages`; `LoadRefused` where opencode sends nothing."""
    try:
        loaded = list(messages)
    except Unreadable as unreadable:
        raise LoadRefused(
            f"opencode fails the session (HTTP 500) on row {unreadable.key}: {unreadable.reason}"
        ) from None
    sent: list[SentMessage] = []
    for message in window(loaded).messages:
        if not sends(message):
            continue
        if message.role == USER:
            texts, files = _user_texts(message.parts)
            if texts or files:
                sent.append(SentMessage(Sent.USER, message.key, texts, files=files))
        else:
            sent.extend(_assistant_steps(message))
    return sent


def chat_message(message: SentMessage) -> dict[str, object]:
    """`message` as the chat message of opencode's request to an OpenAI-compatible
    provider: one text is a string, several are text parts; an assistant's texts are
    joined, its reasoning is `reasoning_content`, its calls `tool_calls` with their
    input as compact JSON text; text as the request carries it (`_as_sent`)."""
    chat: dict[str, object] = _as_sent(_chat_message(message))
    return chat


def _chat_message(message: SentMessage) -> dict[str, object]:
    if message.sent is Sent.TOOL_RESULT:
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.texts[0]}
    if message.sent is Sent.USER:
        if len(message.texts) == 1 and not message.files:
            return {"role": "user", "content": message.texts[0]}
        return {
            "role": "user",
            "content": [{"type": "text", "text": text} for text in message.texts],
        }
    chat: dict[str, object] = {"role": "assistant", "content": "".join(message.texts)}
    if message.reasoning:
        chat["reasoning_content"] = "".join(message.reasoning)
    if message.tool_calls:
        chat["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.tool, "arguments": _arguments(call.input)},
            }
            for call in message.tool_calls
        ]
    return chat


def sent_size(message: SentMessage) -> int:
    """The bytes of `message` in opencode's request (its chat message as JSON)."""
    return len(orjson.dumps(chat_message(message)))


def _arguments(value: object) -> str:
    """A call's input as `JSON.stringify` writes it (keys in stored order, compact)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _as_sent(value: Any) -> Any:
    """`value` as opencode's request carries it: a lone surrogate in a string (half a
    character, where opencode cut a text) becomes U+FFFD, as it encodes the request."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {name: _as_sent(field) for name, field in value.items()}
    if isinstance(value, list):
        return [_as_sent(item) for item in value]
    return value
