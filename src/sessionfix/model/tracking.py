"""Streaming analyses of the conversation, fed entry by entry in path order.

`PathTracker` pairs tool calls with their results group by group (rules.md §6),
pairs file reads and writes for stale-read detection (§5) and records user
messages for clone detection (§4.1). It is format-neutral: format adapters feed it
events while they decode. It runs during the single reading pass (over file order,
which is the active path in a linear session) and, for branched sessions, again
over the path entries only.

When a file is read in parallel byte ranges, each range gets its own tracker; a
range cannot know the groups still open before it, so results it cannot place are
kept aside and `absorb` settles them when the ranges are joined in order. Events
are kept column-wise so that they travel between processes cheaply.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import add
from typing import Any, ClassVar, NamedTuple

from msgspec import Struct, field

from sessionfix.model.view import FileAction, ToolCall
from sessionfix.structs import PartlyCompared

SUCCEEDED = 1  # mirrors view.Bit.SUCCEEDED


class Group(Struct):
    """One assistant turn's tool calls and the results that answer them."""

    assistant: int
    calls: tuple[ToolCall, ...]
    incomplete: bool
    stop_reason: str | None
    answers: list[int] = field(default_factory=list)
    """Per call: index of its first result, -1 while unanswered, -2 when answered late."""
    ended_by: int | None = None
    """Index of the entry that closed the group; None while open or when the path ended."""
    turn: object = None
    """The format's key of the API message the calls belong to (Claude: `message.id`),
    when one message spans several records; None when the assistant record is the turn."""
    owners: list[int] | None = None
    """Per call, the record holding it, when that is not always `assistant`."""
    carried: bool = False
    """The newest boundary's carried history holds the calls: they stay in context though
    their records lie before the boundary."""

    def owner(self, position: int) -> int:
        """The record that holds the call at `position`."""
        return self.assistant if self.owners is None else self.owners[position]

    def unanswered(self) -> bool:
        return -1 in self.answers


class ResultEvent(Struct):
    index: int
    call_id: str | None
    bits: int


class FileEvent(NamedTuple):
    """A file tool call paired with its result."""

    record: int
    """Reads: the result's record. Writes: the assistant's record."""
    path: str
    base: str | None
    call_id: str
    """Empty for a read (see `Tracking.reads`)."""
    bits: int


class FileEvents(PartlyCompared, Struct):
    """File reads or writes, column-wise.

    A session reads the same few files again and again: each path is held once, however
    many events name it. Call ids are kept only where a finding names the call
    (`names_calls`; else every event's is empty)."""

    uncompared: ClassVar[frozenset[str]] = frozenset({"_held"})

    names_calls: bool = True
    index: array[int] = field(default_factory=lambda: array("q"))
    paths: list[str] = field(default_factory=list)
    bases: list[str | None] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    bits: bytearray = field(default_factory=bytearray)
    _held: dict[str, str] = field(default_factory=dict)
    """Each distinct path, the one object `paths` holds for it."""

    def add(self, index: int, call: ToolCall, bits: int) -> None:
        path = call.path or ""
        self.index.append(index)
        self.paths.append(self._held.setdefault(path, path))
        self.bases.append(call.base)
        self.call_ids.append(call.id if self.names_calls else "")
        self.bits.append(bits)

    def add_many(
        self,
        index: Iterable[int],
        paths: list[str],
        base: str | None,
        call_ids: Iterable[str],
        bits: Iterable[int],
    ) -> None:
        """Events of several calls that share the directory their paths resolve against."""
        self.index.extend(index)
        self.paths.extend(map(self._held.setdefault, paths, paths))
        self.bases.extend(repeat(base, len(paths)))
        self.call_ids.extend(call_ids if self.names_calls else repeat("", len(paths)))
        self.bits.extend(bits)

    def extend(self, other: FileEvents, base: int) -> None:
        self.index.extend(array("q", map(add, other.index, repeat(base))))
        self.paths.extend(map(self._held.setdefault, other.paths, other.paths))
        self.bases.extend(other.bases)
        self.call_ids.extend(other.call_ids)
        self.bits.extend(other.bits)

    def __len__(self) -> int:
        return len(self.index)

    def __iter__(self) -> Iterator[FileEvent]:
        return map(
            FileEvent._make,
            zip(
                self.index,
                self.paths,
                self.bases,
                self.call_ids,
                self.bits,
                strict=True,
            ),
        )


class UserEvent(NamedTuple):
    record: int
    key: object
    """A cheap necessary condition for two user messages to be equal: both keys are
    equal (pi: the `message.timestamp`, which a replayed copy keeps)."""
    assistants_before: int
    boundaries_before: int


class UserEvents(Struct):
    index: array[int] = field(default_factory=lambda: array("q"))
    keys: list[object] = field(default_factory=list)
    assistants_before: array[int] = field(default_factory=lambda: array("q"))
    boundaries_before: array[int] = field(default_factory=lambda: array("q"))

    def add(self, index: int, key: object, assistants: int, boundaries: int) -> None:
        self.index.append(index)
        self.keys.append(key)
        self.assistants_before.append(assistants)
        self.boundaries_before.append(boundaries)

    def extend(self, other: UserEvents, base: int, assistants: int, boundaries: int) -> None:
        self.index.extend(array("q", map(add, other.index, repeat(base))))
        self.keys.extend(other.keys)
        self.assistants_before.extend(
            array("q", map(add, other.assistants_before, repeat(assistants)))
        )
        self.boundaries_before.extend(
            array("q", map(add, other.boundaries_before, repeat(boundaries)))
        )

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, position: int) -> UserEvent:
        return UserEvent(
            self.index[position],
            self.keys[position],
            self.assistants_before[position],
            self.boundaries_before[position],
        )

    def __iter__(self) -> Iterator[UserEvent]:
        return map(
            UserEvent._make,
            zip(
                self.index,
                self.keys,
                self.assistants_before,
                self.boundaries_before,
                strict=True,
            ),
        )


class Tracking(Struct):
    """What the trackers found, in path order."""

    unanswered: list[Group] = field(default_factory=list)
    """Groups left with at least one unanswered call."""
    orphans: list[ResultEvent] = field(default_factory=list)
    duplicates: list[tuple[ResultEvent, int]] = field(default_factory=list)
    """A repeated result and the index of the first result for the same call."""
    displaced: list[tuple[ResultEvent, Group, int]] = field(default_factory=list)
    """A result answering an unanswered call of an earlier group: (result, group, call)."""
    reads: FileEvents = field(default_factory=lambda: FileEvents(names_calls=False))
    """The read's call id is not kept: a stale read's finding names the write."""
    writes: FileEvents = field(default_factory=FileEvents)
    users: UserEvents = field(default_factory=UserEvents)
    repeated_calls: list[tuple[int, str, int]] = field(default_factory=list)
    """A call whose id an earlier call of its turn already uses: (its record, the id,
    the earlier call's record)."""


class CleanBlock(Struct):
    """A block of consecutive messages, described column-wise for `clean_block`.

    Positions are relative to the block; `base` is the index of its first record.
    `codes` has one character per record: `a` assistant, `r` tool result, `u` user,
    `c` other message that reaches the model, `s` an entry with no event (a setting
    change), `x` anything else.
    """

    base: int
    codes: str
    assistant_positions: list[int]
    call_counts: list[int]
    """Per assistant, its number of tool calls."""
    call_ids: list[str]
    result_ids: list[str | None]
    result_positions: list[int]
    read_calls: list[int]
    """Numbers of the calls that read a file (with a usable path), ascending."""
    read_paths: list[str]
    write_calls: list[int]
    """Numbers of the calls that fully write a file (with a usable path), ascending."""
    write_paths: list[str]
    write_owners: list[int]
    """Per write call, the position of its assistant."""
    path_base: str | None
    """The directory relative paths of this block's calls are resolved against."""
    users: list[tuple[int, object]]
    last_stop: str | None
    result_bits: Callable[[Sequence[int]], list[int]]
    """`Bit` flags of the results with these numbers (0 is the block's first result)."""
    last_calls: Callable[[], tuple[ToolCall, ...]]
    """The calls of the block's last assistant."""


class PathTracker:
    """Pairs calls and results and collects file and user events, entry by entry."""

    def __init__(self, *, head: bool = False, late_results: bool = True) -> None:
        self.found = Tracking()
        self.late_results = late_results
        """A result after its call's group ended still answers the call, displaced; else
        (CodeWhale) it answers nothing: an orphan, and the call is left unanswered."""
        self.current: Group | None = None
        self.segment: list[Group] = []
        """Earlier groups of the current compaction window with unanswered calls."""
        self.assistants = 0
        self.boundaries = 0
        self.last_turn: object = None
        """The turn key of the last assistant record (None after anything else)."""
        # Only for a tracker that starts inside a file (a byte range read in parallel):
        self.ranged = head
        self.head = head
        """No assistant, context message or boundary seen yet: results cannot be placed."""
        self.head_results: list[ResultEvent] = []
        self.saw_boundary = False
        self.first_closer: int | None = None
        self.tentative: list[ResultEvent] = []
        """Results matching nothing here, before this range's first boundary."""

    # ---- events -------------------------------------------------------------------

    def assistant(
        self,
        index: int,
        calls: tuple[ToolCall, ...],
        incomplete: bool,
        stop_reason: str | None,
        turn: object = None,
    ) -> None:
        current = self.current
        if turn is not None and self.last_turn == turn:
            # Another record of the same API message: its calls join the open group.
            if not calls:
                return
            if current is not None and current.turn == turn:
                if current.owners is None:
                    current.owners = [current.assistant] * len(current.calls)
                self._note_repeats(current, calls, index)
                current.calls = (*current.calls, *calls)
                current.answers.extend([-1] * len(calls))
                current.owners.extend([index] * len(calls))
                current.incomplete = current.incomplete or incomplete
                return
        else:
            self._close(index)
            self.assistants += 1
        self.last_turn = turn
        if calls:
            group = Group(index, (), incomplete, stop_reason, [], turn=turn)
            if turn is not None:
                self._note_repeats(group, calls, index)
            group.calls = calls
            group.answers = [-1] * len(calls)
            self.current = group

    def _note_repeats(self, group: Group, calls: tuple[ToolCall, ...], index: int) -> None:
        earlier = {call.id: group.owner(p) for p, call in enumerate(group.calls)}
        for call in calls:
            if call.id in earlier:
                self.found.repeated_calls.append((index, call.id, earlier[call.id]))
            else:
                earlier[call.id] = index

    def context(self, index: int) -> None:
        """A user, bash, custom or summary message: it ends the current group."""
        self._close(index)

    def user(self, index: int, key: object) -> None:
        self._close(index)
        self.found.users.add(index, key, self.assistants, self.boundaries)

    def boundary(self, index: int) -> None:
        """A compaction or reset: it ends the group and the window."""
        self._close(index)
        self.boundaries += 1
        self.saw_boundary = True
        self._flush_segment()

    def result(self, index: int, call_id: str | None, bits: int) -> None:
        current = self.current
        if current is not None:
            # The common case, inline: the result answers an open call of the group.
            answers = current.answers
            for position, call in enumerate(current.calls):
                if call.id == call_id and answers[position] == -1:
                    answers[position] = index
                    if call.action:
                        self._pair(current, position, index, bits)
                    return
        event = ResultEvent(index, call_id, bits)
        if self.head:
            self.head_results.append(event)
            return
        self._place(event)

    def clean_block(self, block: CleanBlock) -> bool:
        """Take a whole block of messages at once when its tool calls pair up trivially.

        A block is clean when, after any results that continue the open group, every
        assistant is followed directly by the results of its calls, in call order, with
        no other message in between (the last group may continue in the next block).
        Clean blocks need no per-entry work; anything else returns False untouched and
        goes through the per-entry events.
        """
        codes = block.codes.replace("s", "")  # entries with no event pair nothing
        lead = len(codes) - len(codes.lstrip("r"))
        rest = codes[lead:]
        pieces = rest.split("a")
        if "r" in pieces[0] or "x" in rest:
            return False
        counts = block.call_counts
        results_per_group = list(map(str.count, pieces[1:], repeat("r")))
        if "r" in "".join(map(str.lstrip, pieces[1:], repeat("r"))):
            return False
        if results_per_group[:-1] != counts[:-1]:
            return False
        if results_per_group and (
            results_per_group[-1] > counts[-1]
            or (results_per_group[-1] < counts[-1] and pieces[-1].strip("r"))
        ):
            return False
        if block.result_ids[lead:] != block.call_ids[: len(block.result_ids) - lead]:
            return False
        base = block.base
        if lead:
            lead_bits = block.result_bits(range(lead))
            for number in range(lead):
                self.result(
                    base + block.result_positions[number],
                    block.result_ids[number],
                    lead_bits[number],
                )
        if not rest:
            return True
        self._close(base + len(block.codes) - len(block.codes.lstrip("rs")))
        self._take_clean(block, lead, pieces, counts)
        return True

    def _take_clean(
        self, block: CleanBlock, lead: int, pieces: list[str], counts: list[int]
    ) -> None:
        base = block.base
        assistants_before = self.assistants
        users = self.found.users
        for position, key in block.users:
            seen = block.codes.count("a", 0, position)
            users.add(base + position, key, assistants_before + seen, self.boundaries)
        answered = len(block.result_ids) - lead
        reads = bisect_left(block.read_calls, answered)
        if reads:
            numbers = block.read_calls[:reads]
            results = list(map(add, numbers, repeat(lead)))
            self.found.reads.add_many(
                map(add, map(block.result_positions.__getitem__, results), repeat(base)),
                block.read_paths[:reads],
                block.path_base,
                map(block.call_ids.__getitem__, numbers),
                block.result_bits(results),
            )
        writes = bisect_left(block.write_calls, answered)
        if writes:
            numbers = block.write_calls[:writes]
            self.found.writes.add_many(
                map(add, block.write_owners[:writes], repeat(base)),
                block.write_paths[:writes],
                block.path_base,
                map(block.call_ids.__getitem__, numbers),
                block.result_bits(list(map(add, numbers, repeat(lead)))),
            )
        self.assistants += len(counts)
        if not counts or not counts[-1] or pieces[-1].strip("r"):
            return
        last = block.assistant_positions[-1]
        calls = block.last_calls()
        done = pieces[-1].count("r")
        first_result = lead + answered - done
        answers = [base + block.result_positions[first_result + k] for k in range(done)]
        answers.extend([-1] * (len(calls) - done))
        self.current = Group(base + last, calls, False, block.last_stop, answers)

    # ---- placement ----------------------------------------------------------------

    def _close(self, index: int) -> None:
        self.last_turn = None
        if self.head:
            self.head = False
            self.first_closer = index
        current = self.current
        if current is not None:
            current.ended_by = index
            if -1 in current.answers:
                self.segment.append(current)
            self.current = None

    def _place(self, event: ResultEvent) -> None:
        current = self.current
        call_id = event.call_id
        if current is not None and call_id is not None:
            position = _call_position(current, call_id)
            if position is not None:
                first = current.answers[position]
                if first < 0:
                    current.answers[position] = event.index
                    self._pair(current, position, event.index, event.bits)
                else:
                    self.found.duplicates.append((event, first))
                return
        if call_id is not None and self._answer_late(event):
            return
        if self.saw_boundary or not self.ranged:
            self.found.orphans.append(event)
        else:
            # An unanswered call of an earlier range may still claim it (see `absorb`).
            self.tentative.append(event)

    def again(self) -> PathTracker:
        """A new path tracker that takes late results as this one does, to walk a path
        again."""
        return PathTracker(late_results=self.late_results)

    def _answer_late(self, event: ResultEvent) -> bool:
        if not self.late_results:
            return False
        for group in reversed(self.segment):
            for position, call in enumerate(group.calls):
                if call.id == event.call_id and group.answers[position] == -1:
                    group.answers[position] = -2
                    self.found.displaced.append((event, group, position))
                    return True
        return False

    def _pair(self, group: Group, position: int, result: int, bits: int) -> None:
        call = group.calls[position]
        if call.action is FileAction.READ:
            self.found.reads.add(result, call, bits)
        elif call.action is FileAction.FULL_WRITE:
            self.found.writes.add(group.owner(position), call, bits)

    def _flush_segment(self) -> None:
        self.found.unanswered.extend(g for g in self.segment if g.unanswered())
        self.segment = []

    # ---- ends -----------------------------------------------------------------------

    def finish(self) -> Tracking:
        """Close the walk: the group still open is unanswered at the end of the path."""
        current = self.current
        if current is not None and current.unanswered():
            self.segment.append(current)
        self.current = None
        self.found.orphans.extend(self.tentative)
        self.tentative = []
        self.found.orphans.extend(self.head_results)
        self.head_results = []
        self._flush_segment()
        self.found.unanswered.sort(key=lambda g: g.assistant)
        self.found.orphans.sort(key=lambda e: e.index)
        return self.found

    def absorb(self, part: PathTracker, base: int) -> None:
        """Continue this walk with a tracker that read the next byte range on its own.

        `base` is the index of the range's first record in the whole file.
        """
        part.shift_groups(base)
        for event in part.head_results:
            self.result(event.index, event.call_id, event.bits)
        if part.first_closer is not None:
            self._close(part.first_closer)
            for event in part.tentative:
                if event.call_id is None or not self._answer_late(event):
                    self.found.orphans.append(event)
            if part.saw_boundary:
                self._flush_segment()
                self.segment = part.segment
            else:
                self.segment.extend(part.segment)
            self.current = part.current
        found, theirs = self.found, part.found
        found.unanswered.extend(theirs.unanswered)
        found.orphans.extend(theirs.orphans)
        found.duplicates.extend(theirs.duplicates)
        found.displaced.extend(theirs.displaced)
        found.repeated_calls.extend(
            (record + base, call_id, first + base)
            for record, call_id, first in theirs.repeated_calls
        )
        found.reads.extend(theirs.reads, base)
        found.writes.extend(theirs.writes, base)
        found.users.extend(theirs.users, base, self.assistants, self.boundaries)
        self.assistants += part.assistants
        self.boundaries += part.boundaries

    def shift_groups(self, base: int) -> None:
        """Turn the range-local record indexes of groups and results into file indexes
        (file and user events are shifted column-wise by `absorb`)."""
        if not base:
            return
        groups = {id(g): g for g in self.found.unanswered}
        for group in self.segment:
            groups[id(group)] = group
        if self.current is not None:
            groups[id(self.current)] = self.current
        for _, group, _ in self.found.displaced:
            groups[id(group)] = group
        for group in groups.values():
            group.assistant += base
            if group.owners is not None:
                group.owners = [owner + base for owner in group.owners]
            group.answers = [a + base if a >= 0 else a for a in group.answers]
            if group.ended_by is not None:
                group.ended_by += base
        for event in (*self.head_results, *self.tentative, *self.found.orphans):
            event.index += base
        for event, _ in self.found.duplicates:
            event.index += base
        self.found.duplicates = [(e, first + base) for e, first in self.found.duplicates]
        for event, _, _ in self.found.displaced:
            event.index += base
        if self.first_closer is not None:
            self.first_closer += base


def _call_position(group: Group, call_id: str) -> int | None:
    """The first unanswered call with this id, else the first call with it."""
    fallback = None
    for position, call in enumerate(group.calls):
        if call.id == call_id:
            if group.answers[position] == -1:
                return position
            if fallback is None:
                fallback = position
    return fallback


_CALL, _RESULT, _CONTEXT, _CARRIED = range(4)


class CallIdTracker(PathTracker):
    """Pairs each result with the earlier call of the same id anywhere before it, in
    file order: for formats that write every call and every result as a record of its
    own and whose call ids are unique in a session (Codex), where results of parallel
    calls follow in any order and nothing closes a turn's group.

    A call is unanswered when no result for its id follows it; it counts as cut off
    (`Group.ended_by`) once a later context record shows the conversation went on.
    Calls a boundary carries in its history may be answered after it. A tracker that
    reads a later byte range on its own only logs its events, and `absorb` replays them
    in order, so parallel reading finds exactly what one pass finds.
    """

    def __init__(self, *, head: bool = False) -> None:
        super().__init__(head=head)
        self.calls: dict[str, int] = {}
        """Call id → the record of its first call."""
        self.open: dict[str, Group] = {}
        """Call id → the group of its call, while unanswered."""
        self.answered: dict[str, int] = {}
        """Call id → its first result's record (or the boundary holding it)."""
        self.carried: set[str] = set()
        """Ids of calls the newest boundary's history holds, without their result and
        without a record of their own in the file."""
        self.dropped: list[Group] = []
        """Unanswered groups a boundary's history left out: no later result answers them."""
        self.uncut: list[Group] = []
        """Open groups no context record has followed yet."""
        self.log: list[tuple[int, int, object]] | None = [] if head else None

    def assistant(
        self,
        index: int,
        calls: tuple[ToolCall, ...],
        incomplete: bool,
        stop_reason: str | None,
        turn: object = None,
    ) -> None:
        if self.log is not None:
            self.log.append((_CALL, index, calls))
            return
        for call in calls:
            first = self.calls.get(call.id)
            if first is not None:
                self.found.repeated_calls.append((index, call.id, first))
                continue
            self.calls[call.id] = index
            group = Group(index, (call,), incomplete, stop_reason, [-1])
            self.open[call.id] = group
            self.uncut.append(group)

    def result(self, index: int, call_id: str | None, bits: int) -> None:
        if self.log is not None:
            self.log.append((_RESULT, index, (call_id, bits)))
            return
        event = ResultEvent(index, call_id, bits)
        if call_id is None:
            self.found.orphans.append(event)
            return
        group = self.open.pop(call_id, None)
        if group is not None:
            group.answers[0] = index
            self.answered[call_id] = index
            self._pair(group, 0, index, bits)
            return
        first = self.answered.get(call_id)
        if first is not None:
            self.found.duplicates.append((event, first))
        elif call_id in self.carried:
            self.carried.discard(call_id)
            self.answered[call_id] = index
        else:
            self.found.orphans.append(event)

    def context(self, index: int) -> None:
        if self.log is not None:
            self.log.append((_CONTEXT, index, None))
            return
        for group in self.uncut:
            if group.ended_by is None:
                group.ended_by = index
        self.uncut = []

    def user(self, index: int, key: object) -> None:
        self.context(index)

    def boundary(self, index: int) -> None:
        self.context(index)
        if self.log is None:
            self.boundaries += 1

    def carry(self, index: int, calls: Iterable[str], results: Iterable[str]) -> None:
        """A boundary at `index` holds a history with these calls and these results, and
        the context is that history from here on: its results answer earlier calls, a later
        result may answer only its calls, and open calls it leaves out are summarised away."""
        if self.log is not None:
            self.log.append((_CARRIED, index, (tuple(calls), tuple(results))))
            return
        answered: dict[str, int] = {}
        for call_id in results:
            group = self.open.pop(call_id, None)
            if group is not None:
                group.answers[0] = index
            answered[call_id] = self.answered.get(call_id, index)
        still_open: dict[str, Group] = {}
        carried: set[str] = set()
        for call_id in calls:
            if call_id in answered:
                continue
            group = self.open.pop(call_id, None)
            if group is not None:
                group.carried = True
                group.ended_by = None
                still_open[call_id] = group
                self.uncut.append(group)
            elif call_id not in self.answered:
                carried.add(call_id)
        for group in self.open.values():
            group.carried = False
            self.dropped.append(group)
        self.open = still_open
        self.answered = answered
        self.carried = carried

    def finish(self) -> Tracking:
        if self.log is not None:
            raise RuntimeError("a ranged tracker is finished by the one that absorbs it")
        found = self.found
        found.unanswered.extend(self.open.values())
        found.unanswered.extend(self.dropped)
        self.open = {}
        self.dropped = []
        found.unanswered.sort(key=lambda g: g.assistant)
        found.orphans.sort(key=lambda e: e.index)
        return found

    def absorb(self, part: PathTracker, base: int) -> None:
        assert isinstance(part, CallIdTracker)
        assert part.log is not None
        handlers: dict[int, Callable[[int, Any], None]] = {
            _CALL: lambda index, calls: self.assistant(index, calls, False, None),
            _RESULT: lambda index, data: self.result(index, *data),
            _CONTEXT: lambda index, _: self.context(index),
            _CARRIED: lambda index, data: self.carry(index, *data),
        }
        for event, index, data in part.log:
            handlers[event](index + base, data)

    def shift_groups(self, base: int) -> None:
        """Nothing to shift: a ranged tracker keeps its events, not groups."""
