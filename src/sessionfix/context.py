"""What an agent loads when it resumes a session, and where the session's bytes go.

Built from the model the rules use: the format reads its view's active path and window
as its agent's loader does (`loaded_messages` of each format package), and every record
of the file is put in one part of the breakdown by where the view places it. Tokens are
estimated, not counted: no tokenizer of these models ships as a package that runs
offline, so text counts `BYTES_PER_TOKEN` UTF-8 bytes of message JSON a token, and an
inline image `IMAGE_TOKENS`.
"""

from __future__ import annotations

import enum
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
from msgspec import Struct, field

from sessionfix import containers
from sessionfix.containers import HeldSession
from sessionfix.escapes import escape_surrogates
from sessionfix.formats import Format, package_of
from sessionfix.model.loaded import Loader, LoadRefused, Sent
from sessionfix.model.view import Flag, Kind, SessionView
from sessionfix.read.compressed import plain_name, session_name, session_text
from sessionfix.read.reader import LineIssue, RecordSource
from sessionfix.rules import RULES
from sessionfix.rules.base import Weight
from sessionfix.scratch import private_folder
from sessionfix.settings import Settings
from sessionfix.units import BYTES_PER_TOKEN, IMAGE_TOKENS, estimated_tokens

TOKEN_METHOD: Final = (
    f"UTF-8 bytes of each message's JSON / {BYTES_PER_TOKEN}, inline images "
    f"{IMAGE_TOKENS:,} tokens each"
)
_SENT_KINDS: Final = frozenset(
    {Kind.MESSAGE, Kind.COMPACTION, Kind.RESET, Kind.BRANCH_SUMMARY, Kind.CUSTOM_MESSAGE}
)


class Part(enum.Enum):
    """Where a record of the file stands for the agent resuming it."""

    SENT = "sent to the model"
    BEFORE_COMPACTION = "before the last compaction"
    OFF_PATH = "abandoned branches and side chains"
    DEAD_HISTORIES = "superseded replacement histories"
    NOT_SENT = "on the path, not sent"
    """Messages the loader walks through without sending (Claude `isMeta` records)."""
    METADATA = "progress, metadata and events"
    UNREAD = "line ends and damaged lines"

    @property
    def key(self) -> str:
        return self.name.lower()


class SessionContext(Struct):
    """What one session's agent loads on resume, and its file's bytes by `Part`."""

    filename: str
    format: str
    messages: int = 0
    by_sent: dict[Sent, int] = field(default_factory=dict)
    message_bytes: int = 0
    """UTF-8 bytes of the messages' JSON."""
    images: int = 0
    image_bytes: int = 0
    file_bytes: int = 0
    parts: dict[Part, int] = field(default_factory=dict)
    stale_reads: int = 0
    stale_read_bytes: int = 0
    """File bytes of the stale reads among the messages sent (part of `Part.SENT`)."""
    damaged_lines: int = 0
    """Lines the agent may not read as sessionfix does (see `sessionfix check`)."""
    refused: str | None = None
    """Why the agent does not load the session at all (it throws, hangs, refuses it)."""
    repaired: bool = False
    """This is what `repair` would write, not the file as it is."""
    budget: int | None = None
    """With `repaired`: the token budget the repair slimmed the session under (`slim`)."""
    max_size: int | None = None
    """With `repaired`: the bytes the repair slimmed the session under (`slim`)."""

    @property
    def tokens(self) -> int:
        """The estimate (`TOKEN_METHOD`)."""
        return estimated_tokens(self.message_bytes - self.image_bytes, self.images)

    def as_json(self) -> dict[str, Any]:
        return {
            "filename": escape_surrogates(self.filename),
            "format": self.format,
            "repaired": self.repaired,
            "budget": self.budget,
            "max_size": self.max_size,
            "refused": None if self.refused is None else escape_surrogates(self.refused),
            "messages": self.messages,
            "by_role": {sent.value: count for sent, count in self.by_sent.items()},
            "tokens": {"estimate": self.tokens, "method": TOKEN_METHOD},
            "message_bytes": self.message_bytes,
            "inline_images": {"count": self.images, "bytes": self.image_bytes},
            "stale_reads": {"count": self.stale_reads, "bytes": self.stale_read_bytes},
            "damaged_lines": self.damaged_lines,
            "file_bytes": self.file_bytes,
            "parts": [
                {"part": part.key, "label": part.value, "bytes": self.parts.get(part, 0)}
                for part in Part
            ],
        }


def context_of(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    named_as: Path | None = None,
    loader: Loader | None = None,
) -> SessionContext:
    """What the agent of the session at `path` loads on resume (`*.zst`: compressed),
    read as named `named_as` when it stands for a file named so, and loaded by `loader`
    where that is not its format's (a store's session). Raises `InputError` when it
    cannot be read."""
    from sessionfix.engine import run_rules
    from sessionfix.scan.scanner import read_session

    path = Path(path)
    settings = settings or Settings()
    name = filename or str(path)
    with session_text(path) as readable:
        scanned = read_session(
            readable, settings.format, None, settings.jobs, named_as=named_as or session_name(path)
        )
        view = scanned.view
        weighed = msgspec.structs.replace(
            settings,
            select=tuple(rule.code for rule in RULES if rule.weighs is Weight.STALE_READS),
            extend_select=(),
            ignore=(),
        )
        found = run_rules(scanned, weighed, name, excerpts=False)
        stale = _records_of(view, (diagnostic.row for diagnostic in found))
        result = SessionContext(name, view.format, file_bytes=scanned.info.size)
        result.damaged_lines = sum(
            {finding.row: finding.rows for finding in scanned.lines.findings}.values()
        )
        sent = bytearray(len(view))
        source = RecordSource(readable)
        load = loader or package_of(Format(view.format)).loaded_messages
        try:
            for message in load(view, source, scanned.lines):
                result.messages += 1
                result.by_sent[message.sent] = result.by_sent.get(message.sent, 0) + 1
                result.message_bytes += message.size
                result.images += message.images
                result.image_bytes += message.image_bytes
                if message.record >= 0 and not sent[message.record]:
                    sent[message.record] = 1
                    if message.record in stale:
                        result.stale_reads += 1
                        result.stale_read_bytes += view.sizes[message.record]
        except LoadRefused as refused:
            result.refused = str(refused)
            result.messages, result.by_sent = 0, {}
            result.message_bytes = result.images = result.image_bytes = 0
            result.stale_reads = result.stale_read_bytes = 0
            sent = bytearray(len(view))
        finally:
            source.close()
        result.by_sent = {kind: result.by_sent[kind] for kind in Sent if kind in result.by_sent}
        damaged = {f.row for f in scanned.lines.findings if f.issue is not LineIssue.BLANK}
        result.parts = _parts(view, sent, scanned.info.size, damaged)
    return result


def _records_of(view: SessionView, rows: Iterator[int]) -> set[int]:
    found: set[int] = set()
    for row in rows:
        found.update(range(bisect_left(view.rows, row), bisect_right(view.rows, row)))
    return found


def _parts(
    view: SessionView, sent: bytearray, file_bytes: int, damaged: set[int]
) -> dict[Part, int]:
    """Every record's bytes in one part; what no record holds, and records on damaged
    lines the agent does not read, are `Part.UNREAD`."""
    parts = dict.fromkeys(Part, 0)
    path = view.active_path
    current = None if view.boundary_position is None else path[view.boundary_position]
    positions = view.path_positions
    window = view.window_start
    kinds, sizes, flags = view.kinds, view.sizes, view.flags
    cut_off = _cut_off(view, current)
    for index in range(len(kinds)):
        size = sizes[index]
        kind = kinds[index]
        if sent[index]:
            part = Part.SENT
        elif view.rows[index] in damaged:
            part = Part.UNREAD
        elif kind not in _SENT_KINDS or (kind == Kind.MESSAGE and flags[index] & Flag.STATE):
            part = Part.METADATA
        elif index != current and _carries_history(view, index):
            part = Part.DEAD_HISTORIES
        elif index < view.first_entry:
            part = Part.METADATA
        elif index in cut_off:
            part = Part.BEFORE_COMPACTION
        elif positions[index] < 0:
            part = Part.OFF_PATH
        elif positions[index] < window:
            part = Part.BEFORE_COMPACTION
        else:
            part = Part.NOT_SENT
        parts[part] += size
    parts[Part.UNREAD] += max(0, file_bytes - sum(parts.values()))
    return parts


def _cut_off(view: SessionView, boundary: int | None) -> set[int]:
    """The history compactions cut off without a link (Claude: a boundary has no parent
    and names the record the conversation stood at, `logicalParentUuid`): that record,
    its ancestors, and on through the earlier boundaries they reach."""
    found: set[int] = set()
    while boundary is not None and boundary not in found:
        facts = view.boundaries.get(boundary)
        cut = facts.logical_parent if facts is not None else None
        start = view.resolve(cut) if isinstance(cut, str) and cut else None
        boundary = None
        if start is None or start in found:
            break
        for index in (start, *view.ancestors(start)):
            found.add(index)
            if index in view.boundaries:
                boundary = index
    return found


def _carries_history(view: SessionView, index: int) -> bool:
    facts = view.boundaries.get(index)
    return facts is not None and facts.carries_history


def context_after_repair(
    path: str | Path,
    settings: Settings | None = None,
    *,
    filename: str | None = None,
    named_as: Path | None = None,
    measured: SessionContext | None = None,
    loader: Loader | None = None,
) -> SessionContext:
    """`context_of` the file `repair` would write for `path` (written to a private
    temporary folder, never beside the session; slimmed when `settings` has a budget or a size);
    `measured`: `context_of(path)`, when
    already known (the copy is read as the same format, which its folder may decide);
    `named_as`, `loader`: as for `context_of`."""
    from sessionfix.repair.targets import repair_to

    path = Path(path)
    settings = settings or Settings()
    if settings.format is Format.AUTO:
        original = measured or context_of(path, settings, named_as=named_as, loader=loader)
        if original.format != Format.UNKNOWN.value:
            settings = msgspec.structs.replace(settings, format=Format(original.format))
    with private_folder(f"{path}: cannot write the repaired copy") as folder:
        target = folder / plain_name(path.name)
        # Read under the session's name and folder: the copy stands for the session.
        named = named_as or session_name(path)
        repair_to(path, target, settings, filename=filename or str(path), named_as=named)
        result = context_of(
            target, settings, filename=filename or str(path), named_as=named, loader=loader
        )
    result.repaired = True
    result.budget = settings.budget
    result.max_size = settings.max_size
    return result


def contexts(
    paths: Sequence[Path],
    settings: Settings | None = None,
    *,
    after_repair: bool = False,
) -> Iterator[tuple[SessionContext, SessionContext | None]]:
    """Each session's context in each container at `paths` (in a store, those named in
    `settings.sessions`, each of which it must hold; else all): as it is, and with
    `after_repair` as `repair` would write it."""
    settings = settings or Settings()
    only = settings.sessions
    for path in paths:
        if after_repair and containers.is_store(path):
            from sessionfix.slim import refuse_size_in_store

            refuse_size_in_store(path, settings)
        container = containers.open_container(path, str(path))
        try:
            for session in container.sessions(only, strict=True):
                with container.hold(session) as held:
                    yield _measured(held, container.loader(held), settings, after_repair)
        finally:
            container.close()


def _measured(
    held: HeldSession, loader: Loader | None, settings: Settings | None, after_repair: bool
) -> tuple[SessionContext, SessionContext | None]:
    name = held.title
    named_as = held.named_as
    now = context_of(held.text, settings, filename=name, named_as=named_as, loader=loader)
    if not after_repair:
        return now, None
    later = context_after_repair(
        held.text, settings, filename=name, named_as=named_as, measured=now, loader=loader
    )
    return now, later
