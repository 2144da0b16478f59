"""Files of no known format.

Records are validated as JSON objects and indexed by position and size only, so
the line-level and size rules apply to every format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from sessionfix.errors import SessionfixError
from sessionfix.formats import Format
from sessionfix.formats.capabilities import Capability
from sessionfix.formats.headerless import (  # noqa: F401 (what the package declares)
    HEADER_START,
    header_problems,
    rebuilt_header,
    writer_lock,
)
from sessionfix.model.loaded import Loaded
from sessionfix.model.tracking import PathTracker
from sessionfix.model.view import Kind, RefRole, SessionView
from sessionfix.read.reader import LineReport, RecordSource
from sessionfix.registry import JsonlFiles


class _AnyObject(msgspec.Struct, gc=False):
    """Accepts any JSON object and decodes none of its fields."""


_DECODER: Final = msgspec.json.Decoder(_AnyObject)


FORMATS: Final = (Format.UNKNOWN,)
AGENTS: Final[dict[Format, str]] = {}
"""No agent is known to load the file."""
SUFFIXES: Final[tuple[str, ...]] = ()
"""A walk takes no file for being of no known format."""
CONTAINERS: Final = (JsonlFiles(),)
"""A file no other package reads is read as lines."""


def detect(first_record: dict[str, Any]) -> Format | None:
    """Never claims a file: it reads what no other package recognised."""
    return None


def has_record_shape(value: dict[str, Any]) -> bool:
    return False


def make_adapter(fmt: Format, path: Path, context: object, named_as: Path) -> OpaqueAdapter:
    return OpaqueAdapter(path, fmt)


def is_sibling(path: Path) -> bool:
    return False


def loaded_messages(view: SessionView, source: RecordSource, lines: LineReport) -> Iterator[Loaded]:
    """No agent is known to load the file: nothing."""
    return iter(())


def session_roots(env: Mapping[str, str], home: Path) -> list[Path]:
    """No agent keeps sessions of no known format."""
    return []


def capabilities(fmt: Format, tree: bool = False) -> frozenset[Capability]:
    """Lines only; a file of no known format may also be a session whose header was
    lost, which the header rule rebuilds."""
    return frozenset({Capability.LINES, Capability.HEADER, Capability.HEADER_REBUILD})


class _NoEditor:
    """Rewrites are not defined for formats sessionfix does not interpret."""

    def __init__(self, fmt: Format) -> None:
        self._format = fmt

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise SessionfixError(f"records of format {self._format.value} cannot be rewritten")

    def references(self, record: Any) -> list[tuple[str, RefRole]]:
        return []

    parent_link = "parent link"

    def unlinked(self, role: RefRole) -> object:
        return None

    set_field = set_parent = set_first_kept = replace_result_text = _refuse
    drop_leaked_partial_json = drop_result_blocks = holds_more_blocks_than = _refuse
    drop_carried_history = drop_content_blocks = _refuse
    new_record_id = _refuse

    def identity(self, record: Any) -> str | None:
        return None

    def get_field(self, record: Any, name: str) -> object:
        return None

    synthetic_tool_result = _refuse


class OpaqueAdapter:
    def __init__(self, path: Path, fmt: Format) -> None:
        self.view = SessionView(path=path, format=fmt.value, tree=False)
        self.editor = _NoEditor(fmt)
        self.tracker = PathTracker()

    decode = staticmethod(_DECODER.decode)
    decode_lines = staticmethod(_DECODER.decode_lines)

    def ingest_batch(
        self,
        records: list[Any],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
    ) -> None:
        for row, offset, size in zip(
            range(first_row, first_row + len(records)), offsets, sizes, strict=True
        ):
            self.view.add(row, 1, offset, size, Kind.OTHER)

    def ingest(
        self, record: Any, data: bytes, row: int, column: int, offset: int, size: int
    ) -> None:
        self.view.add(row, column, offset, size, Kind.OTHER)

    def add_object(
        self, value: dict[str, Any], data: bytes, row: int, column: int, offset: int
    ) -> None:
        self.view.add(row, column, offset, len(data), Kind.OTHER)

    @property
    def context(self) -> object:
        return None

    @property
    def named(self) -> object:
        return None

    def replay(self, index: int, data: bytes) -> None:
        """No conversation events: records of this format are not interpreted."""

    def finish(self, lines: LineReport) -> None:
        self.view.finish()
