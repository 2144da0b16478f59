"""What open-webui sends the model from a chat's transcript, as `sessionfix context`
counts it: the chat messages of `payload` for the branch it walks, each from the line
of the stored message it comes from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import orjson

from sessionfix.formats.openwebui.adapter import chat_of, chat_payload, chat_reading
from sessionfix.formats.openwebui.transcript import ENVELOPE, Envelope
from sessionfix.model.loaded import MADE_BY_LOADER, Loaded, Sent
from sessionfix.model.view import SessionView
from sessionfix.read.reader import LineReport, RecordSource

SENT_AS = {
    "user": Sent.USER,
    "assistant": Sent.ASSISTANT,
    "system": Sent.SYSTEM,
    "tool": Sent.TOOL_RESULT,
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
    for key, message in chat_payload(chat_reading(chat)):
        role = message.get("role")
        kind = SENT_AS.get(role, Sent.OTHER) if isinstance(role, str) else Sent.OTHER
        if kind is Sent.ASSISTANT and message.get("tool_calls"):
            kind = Sent.TOOL_CALL
        yield Loaded(chat.index.get(key, MADE_BY_LOADER), kind, _size(message))
