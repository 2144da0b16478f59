"""Session formats: detection, and the adapters that stream records into a `SessionView`.

Each format module knows its own field names and semantics and nothing else does:
rules see only the format-neutral view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, cast

from sessionfix import registry
from sessionfix.model.loaded import Loaded
from sessionfix.model.tracking import PathTracker
from sessionfix.model.view import HeaderFacts, InlineMedia, RefRole, SessionView, ToolCall
from sessionfix.read.reader import LineReport, RecordSource
from sessionfix.registry import ContainerDeclaration

if TYPE_CHECKING:
    from sessionfix.formats.capabilities import Capability

Transform = Callable[[Any], Any]
"""Changes a parsed record (key order kept) and returns it."""


class RecordEditor(Protocol):
    """Format-specific record changes, so rules never name a format's fields."""

    parent_link: str
    """How the format spells the parent link (for messages)."""

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        """The fields of `record` that name another record, with how each is remapped."""
        ...

    def set_field(self, name: str, value: object) -> Transform: ...

    def get_field(self, record: Any, name: str) -> object:
        """The value of a field `references` named."""
        ...

    def set_parent(self, parent_id: str | None) -> Transform: ...

    def unlinked(self, role: RefRole) -> object:
        """What a reference of `role` becomes when its target goes with no survivor
        or surviving ancestor."""
        ...

    def set_first_kept(self, entry_id: str | None, index: int | None) -> Transform: ...

    def replace_result_text(self, text: str) -> Transform: ...

    def drop_leaked_partial_json(self, blocks: tuple[int, ...]) -> Transform: ...

    def drop_content_blocks(self, blocks: tuple[int, ...]) -> Transform:
        """Remove these blocks (by their place) from a message's content; the rest stay."""
        ...

    def holds_more_blocks_than(self, record: Any, going: int) -> bool:
        """Whether a tool result record holds more than the `going` result blocks fixes
        drop from it (a record that is one result holds nothing beside it)."""
        ...

    def drop_result_blocks(self, call_ids: frozenset[str]) -> Transform:
        """Remove the last result block answering each of these calls (a repeat goes,
        the first result stays)."""
        ...

    def drop_carried_history(self) -> Transform:
        """Remove the history a superseded compaction carries (the newest one's never)."""
        ...

    def identity(self, record: Any) -> str | None:
        """The id other records name this one by."""
        ...

    def new_record_id(self, view: SessionView, anchor_id: str, salt: str) -> str:
        """A deterministic id for a record inserted after `anchor_id` (rules.md §9.3)."""
        ...

    def synthetic_tool_result(
        self, assistant: Any, call: ToolCall, entry_id: str | None, parent_id: str | None, text: str
    ) -> dict[str, Any]: ...


class ResultMarks(Protocol):
    """The editor of a format whose tool results carry their own state (opencode): what
    a format providing `PRUNE_MARKS` or `RESULTS_IN_CALLS` changes instead of a result's
    text or a missing result."""

    def pruned_at(self, superseding: Any) -> object | None:
        """The mark's value for a result the parsed call `superseding` supersedes; None
        when that call tells none (the result is then left unmarked)."""
        ...

    def mark_pruned(self, at: object) -> Transform:
        """Mark a result pruned: its agent sends its own placeholder for it."""
        ...

    def interrupted_call(self) -> Transform:
        """Settle a call left without a result as interrupted."""
        ...


class ContentBlocks(Protocol):
    """The editor of a format whose messages hold content blocks the provider checks
    (`Capability.INLINE_MEDIA`, `Capability.BLANK_TEXT`)."""

    def replace_media(self, media: tuple[InlineMedia, ...], texts: tuple[str, ...]) -> Transform:
        """Put a text block holding each of `texts` where each of `media` is, found by its
        data (other fixes may have moved it), and replace its copies with the text."""
        ...

    def drop_blank_texts(self) -> Transform:
        """Remove the text blocks of the record's content that are empty or whitespace
        only."""
        ...


class ResultText(Protocol):
    """The editor of a format whose tool results' text can be shortened in place
    (`Capability.SHORTENED_RESULTS`)."""

    def shorten_result_text(self, head: int, tail: int, note: str) -> Transform:
        """Keep the first `head` and last `tail` characters of the record's tool result
        text (the first line whole: a mutation's outcome) with `note` between them, its
        `{cut}` the number of characters cut; a text no longer than that stays. What the
        agent keeps beside the message for its UI is left as it was."""
        ...

    def shorten_kept_copy(self, head: int, tail: int, note: str) -> Transform | None:
        """The same cut of the copy of a tool's output the agent keeps beside the
        message for its UI and never sends (Claude Code's `toolUseResult`); None where
        the format keeps none."""
        ...


class TimedRecords(Protocol):
    """The editor of a format whose agent orders messages by a time stamped on them
    (`Capability.TIME_ORDER`)."""

    def set_sort_time(self, ms: int | float) -> Transform:
        """Stamp a message with the time it is ordered by."""
        ...


class KeptLinkEdits(Protocol):
    """The editor of a format that stores links its agent recomputes on read
    (`SessionView.kept_links`), and a summary that covers messages by number
    (`SessionView.covered_count`)."""

    def set_children(self, children: tuple[str, ...]) -> Transform:
        """Store a record's list of its children."""
        ...

    def set_leaf_pointer(self, entry_id: str) -> Transform:
        """Store the pointer to the leaf the session continues from."""
        ...

    def drop_covered_count(self) -> Transform:
        """Remove the summary that covers messages by number (its owner starts anew)."""
        ...


class IndexEntries(Protocol):
    """The editor of an agent's index of sessions (`Capability.SESSION_INDEX`)."""

    def rebuilt_entry(self) -> Transform:
        """Make a session's missing entry, or mend the one that disagrees with its
        file, from that file, as the agent's own indexing makes entries."""
        ...


class Format:
    """A session format, by the name `--format` takes: its package makes it
    (`Format("pi")`), and one name is always the same object, so formats compare with
    `is` as enum members do."""

    __slots__ = ("value",)
    _named: ClassVar[dict[str, Format]] = {}
    AUTO: ClassVar[Format]
    """Detected per file."""
    UNKNOWN: ClassVar[Format]
    """Read by no format package: line level only."""
    value: str

    def __new__(cls, value: str) -> Format:
        named = cls._named.get(value)
        if named is None:
            named = super().__new__(cls)
            named.value = value
            named = cls._named.setdefault(value, named)
        return named

    def __reduce__(self) -> tuple[type[Format], tuple[str]]:
        return Format, (self.value,)

    def __repr__(self) -> str:
        return f"Format({self.value!r})"


Format.AUTO = Format("auto")
Format.UNKNOWN = Format("unknown")


class FormatAdapter(Protocol):
    """Streams one file's records into its view.

    `decode` receives a raw line (terminator included) and raises a ValueError when
    it cannot decode it; the line then goes through the reader's slow path and
    comes back, record by record, through `add_object`. Decoded lines go to `ingest`.
    """

    @property
    def view(self) -> SessionView: ...

    @property
    def editor(self) -> RecordEditor: ...

    @property
    def context(self) -> object:
        """What a reader of a later byte range of the same file needs to know."""

    @property
    def named(self) -> object:
        """What the reader takes from the file's name (not its bytes): what it decoded
        of bytes under one name stands for them under another only when this is equal."""

    tracker: PathTracker
    """Receives the conversation events of the records this adapter decodes."""

    def replay(self, index: int, data: bytes) -> None:
        """Feed the tracker one record again, in path order, without touching the view."""

    @property
    def decode(self) -> Callable[[bytes], Any]: ...

    def ingest(
        self, record: Any, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None: ...

    @property
    def decode_lines(self) -> Callable[[memoryview], list[Any]]:
        """Decode newline-separated records (raises ValueError like `decode`)."""

    def ingest_batch(
        self,
        records: list[Any],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
    ) -> None:
        """Index records decoded from consecutive clean lines; `line(k)` returns the
        bytes of the k-th (read only when a record needs more than its decode)."""

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None: ...

    def finish(self, lines: LineReport) -> None: ...


class WriterLock(NamedTuple):
    """A lock file an agent takes beside a session while it writes it: a live one leaves
    the session untouched, and sessionfix takes it too while it rewrites the session."""

    path: Path
    always: bool
    """The agent takes it on every write here: taken even when no lock file exists (else
    only when one does, as another agent of the format left it)."""


class FormatPackage(Protocol):
    """What a format package provides (each module under `formats/` that reads one)."""

    FORMATS: tuple[Format, ...]
    """The formats it reads; `detect` names the first, and the reader tells the others
    apart by a file's content and folder."""

    AGENTS: Mapping[Format, str]
    """Who loads a session of each of its formats, as users call them (none: no agent)."""

    SUFFIXES: tuple[str, ...]
    """How the names of its session files end: a directory walk takes such files."""

    CONTAINERS: tuple[ContainerDeclaration, ...]
    """How its sessions are held (`JsonlFiles`, an `SqliteStore`)."""

    HEADER_START: bytes | None
    """How its session header line starts, where the format has one: a damaged line that
    starts so is the header, torn."""

    def header_problems(self, fmt: Format, header: HeaderFacts, name: str) -> list[str]:
        """What is wrong with the session header of a file named `name`, one message each
        (a missing header is the caller's to say)."""
        ...

    def rebuilt_header(
        self, fmt: Format, view: SessionView, first: object, name: str, cwd: str
    ) -> dict[str, Any]:
        """A new session header for a file named `name` that lost its own, whose first
        record is `first`, for an agent run in `cwd` (asked only of the formats that
        provide a header rebuild)."""
        ...

    def writer_lock(self, fmt: Format, session: Path) -> WriterLock | None:
        """The lock its agent takes on `session` while it writes it (`fmt`: the format
        asked for, `AUTO` when none); None: its agent takes none there."""
        ...

    def detect(self, first_record: dict[str, Any]) -> Format | None:
        """The format of a file whose first record is this, if it is this package's."""
        ...

    def has_record_shape(self, value: dict[str, Any]) -> bool:
        """Whether an object recovered from damaged bytes looks like one of its records."""
        ...

    def make_adapter(
        self, fmt: Format, path: Path, context: object, named_as: Path
    ) -> FormatAdapter:
        """A reader of `path` for `fmt`; what the file's name and folder tell it comes
        from `named_as` (a repair's result is read under the name of its session)."""
        ...

    def capabilities(self, fmt: Format, tree: bool) -> frozenset[Capability]: ...

    def is_sibling(self, path: Path) -> bool:
        """A file the agent keeps beside its sessions that is not one."""
        ...

    def session_roots(self, env: Mapping[str, str], home: Path) -> list[Path]:
        """The folders its agents keep sessions in for this user (`env`: the environment,
        whose variables may move them), whether or not they exist."""
        ...

    def loaded_messages(
        self, view: SessionView, source: RecordSource, lines: LineReport
    ) -> Iterator[Loaded]:
        """The messages its agent's loader sends the model when it resumes the session,
        in order, from the view's active path and window and the lines the agent cannot
        read; raises `LoadRefused` where the agent does not load it at all."""
        ...


def _packages() -> Iterator[FormatPackage]:
    """The format packages of the registry, in order."""
    for module in registry.packages("FORMATS"):
        yield cast(FormatPackage, module)


def package_of(fmt: Format) -> FormatPackage:
    """The package that reads `fmt` (formats without one are read at line level, as
    files of no known format are)."""
    for package in _packages():
        if fmt in package.FORMATS:
            return package
    return next(package for package in _packages() if Format.UNKNOWN in package.FORMATS)


def reads_in_ranges(fmt: Format) -> bool:
    """Whether a large file of the format may be read as byte ranges in parallel (a
    package declares `READ_IN_RANGES = False` when what a record is depends on records
    far from it)."""
    return bool(getattr(package_of(fmt), "READ_IN_RANGES", True))


def all_formats() -> list[Format]:
    """Every format a registered package reads, in registry order (`UNKNOWN` last)."""
    return [fmt for package in _packages() for fmt in package.FORMATS]


def session_formats() -> list[Format]:
    """The formats `--format` may name: those of a package that reads session files (a
    format whose sessions are only ever rows of a database is never forced on a file)."""
    return [fmt for fmt in all_formats() if fmt is not Format.UNKNOWN and package_of(fmt).SUFFIXES]


def format_named(name: str) -> Format:
    """The format `name` names (`auto` included); `ValueError` if no package reads it."""
    if name == Format.AUTO.value:
        return Format.AUTO
    for fmt in all_formats():
        if fmt.value == name:
            return fmt
    raise ValueError(f"no format package reads {name!r}")


def agent_of(fmt: Format) -> str | None:
    """Who loads a session of `fmt`, as users call them; None when no agent does."""
    return package_of(fmt).AGENTS.get(fmt)


def known_agents() -> list[str]:
    """The agents whose session files the registered packages read, in registry order
    (an agent that keeps its sessions in a database alone keeps no file)."""
    return list(
        dict.fromkeys(
            agent
            for package in _packages()
            if package.SUFFIXES
            for agent in package.AGENTS.values()
        )
    )


def read_as(fmt: Format) -> Format:
    """The format a session of `fmt` is read as when none is asked for: what detection
    names, the reader telling the package's formats apart."""
    return package_of(fmt).FORMATS[0]


def same_package(first: Format, second: Format) -> bool:
    """Whether one package reads both (its reader tells them apart, not detection)."""
    return package_of(first) is package_of(second)


def session_suffixes() -> tuple[str, ...]:
    """How the names of session files end, for every format."""
    return tuple(dict.fromkeys(suffix for package in _packages() for suffix in package.SUFFIXES))


def header_start(fmt: Format) -> bytes | None:
    """How a session header line of `fmt` starts, if the format has one."""
    return package_of(fmt).HEADER_START


def header_problems(fmt: Format, header: HeaderFacts, name: str) -> list[str]:
    """What is wrong with a session header of `fmt` in a file named `name`."""
    return package_of(fmt).header_problems(fmt, header, name)


def rebuilt_header(
    fmt: Format, view: SessionView, first: object, name: str, cwd: str
) -> dict[str, Any]:
    """A new session header of `fmt` for the file named `name` (see `FormatPackage`)."""
    return package_of(fmt).rebuilt_header(fmt, view, first, name, cwd)


def writer_locks(fmt: Format, session: Path) -> list[WriterLock]:
    """The locks the agents take on `session` while they write it (see `WriterLock`)."""
    locks: list[WriterLock] = []
    for package in _packages():
        lock = package.writer_lock(fmt, session)
        if lock is not None and lock not in locks:
            locks.append(lock)
    return locks


def detect(first_record: dict[str, Any]) -> Format:
    """Decide the format from the first record that parses (rules.md §1)."""
    for package in _packages():
        found = package.detect(first_record)
        if found is not None:
            return found
    return Format.UNKNOWN


def is_sibling_file(path: Path) -> bool:
    """A file an agent keeps beside its sessions that is not a session."""
    return any(package.is_sibling(path) for package in _packages())


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """Every agent's session folders for this user, existing or not, in package order."""
    roots: list[Path] = []
    for package in _packages():
        roots.extend(root for root in package.session_roots(env, home) if root not in roots)
    return roots


def configured_folder(env: Mapping[str, str], variable: str, home: Path, default: Path) -> Path:
    """The folder `variable` names (a leading `~/` meaning `home`), or `default` when it
    is unset or empty: how the agents read their folder overrides."""
    value = env.get(variable, "").strip()
    if not value:
        return default
    if value == "~" or value.startswith("~/"):
        return home / value[2:]
    return Path(value)


def make_adapter(
    fmt: Format, path: Path, context: object = None, named_as: Path | None = None
) -> FormatAdapter:
    """A reader for `fmt`; `context` comes from the start of the file when reading a later
    part; what the file's name tells comes from `named_as`, default `path`."""
    return package_of(fmt).make_adapter(fmt, path, context, named_as or path)


def has_record_shape(fmt: Format, value: Any) -> bool:
    """Whether an object recovered from damaged bytes looks like a record of `fmt`."""
    return isinstance(value, dict) and package_of(fmt).has_record_shape(value)
