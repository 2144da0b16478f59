"""What an agent's loader gives the model when it resumes a session, one message at a time.

A format walks its view's active path and window and says, per message its agent would
send, where it comes from, what it is and how many bytes it carries; `sessionfix.context`
adds these up. Nothing here knows a format's fields.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

if TYPE_CHECKING:
    from sessionfix.model.view import SessionView
    from sessionfix.read.reader import LineReport, RecordSource


class Sent(enum.Enum):
    """What a loaded message is, in words common to every agent."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL_CALL = "tool call"
    """A call the format sends as a message of its own (Codex); pi and Claude put
    calls inside assistant messages."""
    TOOL_RESULT = "tool result"
    REASONING = "reasoning"
    SUMMARY = "summary"
    """A compaction's or a branch's summary."""
    SYSTEM = "system"
    """Instructions and notices the agent sends as messages (Codex's developer message,
    Claude `system` records)."""
    OTHER = "other"


MADE_BY_LOADER: Final = -1
"""`Loaded.record` of a message the loader makes up (Codex's "aborted" output)."""


class Loaded(NamedTuple):
    """One message the model receives."""

    record: int
    """View index of the record it comes from (`MADE_BY_LOADER`: none)."""
    sent: Sent
    size: int
    """UTF-8 bytes of the message as JSON (a format's envelope fields excluded)."""
    images: int = 0
    """Inline images it carries."""
    image_bytes: int = 0
    """Of `size`, the bytes of those images' encoded data."""


class LoadRefused(Exception):
    """The agent does not load the session at all (it throws, hangs or refuses it); the
    message says why, as a sentence about the agent (`pi hangs on ...`)."""


class Loader(Protocol):
    """What an agent's loader sends the model from a session: the messages, in order, of
    its view, its records (`source`) and the lines the agent cannot read; `LoadRefused`
    where it loads nothing."""

    def __call__(
        self, view: SessionView, source: RecordSource, lines: LineReport
    ) -> Iterator[Loaded]: ...
