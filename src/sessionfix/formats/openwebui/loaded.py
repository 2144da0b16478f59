"""What open-webui sends the model from a chat's transcript, as `sessionfix context`
counts it: the messages of the branch it walks that it keeps (`history.sent`), each
from the line of its message. An assistant message's stored `output` (native tool
calling) is sent as one assistant message with the calls and a `tool` message per
result; it is counted as its stored items."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import orjson

from sessionfix.formats.openwebui.adapter import chat_of, chat_reading
from sessionfix.formats.openwebui.history import plain_payload, sent
from sessionfix.formats.openwebui.transcript import ENVELOPE, Envelope
from sessionfix.model.loaded import Loaded, Sent
from sessionfix.model.view import SessionView
from sessionfix.read.reader import LineReport, RecordSource

SENT_AS = {"user": Sent.USER, "assistant": Sent.ASSISTANT, "system": Sent.SYSTEM}
OUTPUT_AS = {
    "function_call": Sent.TOOL_CALL,
    "function_call_output": Sent.TOOL_RESULT,
    "message": Sent.ASSISTANT,
}


def _envelopes(view: SessionView, source: RecordSource) -> list[tuple[int, Envelope]]:
    found = []
    for index in range(len(view)):
        try:
            found.append(
                (index, ENVELOPE.decode(source.read(view.offsets[index], view.sizes[index])))
            )
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
    return found


def _size(value: Any) -> int:
    return len(orjson.dumps(value, default=str))


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The messages open-webui sends, in order."""
    chat = chat_of(_envelopes(view, source))
    read = chat_reading(chat)
    kept = sent([read.messages[key] for key in read.branch])
    for message in kept:
        record = chat.index.get(str(message.get("id")), -1)
        output = message.get("output")
        if message.get("role") == "assistant" and isinstance(output, list) and output:
            for item in output:
                found = OUTPUT_AS.get(str(item.get("type"))) if isinstance(item, dict) else None
                if found is not None:
                    yield Loaded(record, found, _size(item))
            continue
        role = message.get("role")
        kind = SENT_AS.get(role, Sent.OTHER) if isinstance(role, str) else Sent.OTHER
        yield Loaded(record, kind, _size(plain_payload([message])[0]))
