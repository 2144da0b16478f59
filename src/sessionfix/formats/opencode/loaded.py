"""What opencode sends the model from a session's transcript, as `sessionfix context`
counts it: the chat messages of `context.model_messages`, each from the record of the
row it comes from."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from sessionfix.formats.opencode.context import sent_size
from sessionfix.formats.opencode.decode import Message, Unreadable, decode_message
from sessionfix.formats.opencode.transcript import (
    SESSION,
    Envelope,
    envelope_of_line,
    load_order,
    stored_messages,
)
from sessionfix.formats.opencode.view import sent_messages
from sessionfix.model.loaded import Loaded, LoadRefused
from sessionfix.model.view import SessionView
from sessionfix.read.reader import LineReport, RecordSource


def _envelopes(view: SessionView, source: RecordSource) -> Iterator[tuple[int, Envelope]]:
    for index in range(len(view)):
        try:
            found = envelope_of_line(source.read(view.offsets[index], view.sizes[index]))
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if found.opencode != SESSION:
            yield index, found


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """The messages opencode sends, in order; `LoadRefused` where it fails the session."""
    groups = load_order(stored_messages(_envelopes(view, source)))
    decoded: list[Message | Unreadable] = []
    for _, stored in groups:
        try:
            decoded.append(decode_message(stored))
        except Unreadable as unreadable:
            decoded.append(unreadable)
    sent, refused = sent_messages(decoded)
    if refused is not None:
        raise LoadRefused(refused)
    index = {
        stored.row.id if k == 0 else stored.parts[k - 1].id: position
        for positions, stored in groups
        for k, position in enumerate(positions)
    }
    for message in sent:
        yield Loaded(index[message.record], message.sent, sent_size(message))
