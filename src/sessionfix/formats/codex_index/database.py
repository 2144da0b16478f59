"""Reading Codex's thread index, `state_5.sqlite`: its
`threads` rows, through a read-only connection (never a write, never a lock a reader
of Codex waits on; in WAL mode, as Codex keeps it, a reader blocks no writer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import apsw

from sessionfix.errors import InputError
from sessionfix.read.sqlite import (
    connect_read_only,
    error_reason,
    holds_schema,
    is_hot_journal,
    quoted,
)

DATABASE: Final = "state_5.sqlite"
KIND: Final = "Codex thread index"
TABLE: Final = "threads"
KEY: Final = "id"
CARRIED: Final = (
    "rollout_path",
    "archived",
    "archived_at",
    "preview",
    "first_user_message",
    "title",
    "created_at",
    "updated_at",
    "source",
    "model_provider",
    "cwd",
)
"""The columns of a row a transcript line carries (those of them the index has: older
Codex builds lack the later ones): those the index's lists filter and show by, and
those a repair may change."""
MENDED: Final = (
    "rollout_path",
    "archived",
    "archived_at",
    "preview",
    "first_user_message",
    "title",
)
"""The columns a repair changes in a row that exists (a missing row is inserted whole)."""
REQUIRED: Final = frozenset({KEY, "rollout_path", "archived", "created_at", "updated_at"})
"""What every Codex build's `threads` table has (its first migration)."""


def carried(present: list[str]) -> list[str]:
    """Those of the carried columns a `threads` table of these columns has."""
    return [name for name in CARRIED if name in present]


def columns(db: apsw.Connection, schema: str = "main") -> list[str]:
    """The columns of `threads` in `schema`, in their order (empty: no such table)."""
    return [str(row[1]) for row in db.execute(f"PRAGMA {schema}.table_info({TABLE})")]


def is_thread_index(path: Path) -> bool | None:
    """Whether an SQLite file holds Codex's `threads` table; None when it cannot be read
    to tell."""
    return holds_schema(path, lambda db: set(columns(db)) >= REQUIRED)


def _value(value: Any) -> Any:
    """A column's value as a line carries it: text that is not UTF-8 as its reading."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


class ThreadIndex:
    """The `threads` rows of a thread index, read through one read-only connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = connect_read_only(path)
        except apsw.Error as exc:
            raise InputError(f"{path}: cannot read the {KIND} ({error_reason(exc)})") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ThreadIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every row's carried columns, by thread id."""
        try:
            found = columns(self._db)
            if not set(found) >= REQUIRED:
                raise InputError(
                    f"{self.path}: not a {KIND} sessionfix reads (its {TABLE} table lacks "
                    f"{', '.join(sorted(REQUIRED - set(found)))})"
                )
            read = carried(found)
            names = ", ".join(quoted(name) for name in (KEY, *read))
            rows = self._db.execute(f"SELECT {names} FROM {TABLE} ORDER BY {KEY}").fetchall()
        except apsw.Error as exc:
            if is_hot_journal(exc):
                raise InputError(
                    f"{self.path}: a write to the {KIND} was cut short (a hot journal is "
                    "left); start Codex once to roll it back, then run again"
                ) from None
            raise InputError(f"{self.path}: cannot read the {KIND} ({error_reason(exc)})") from None
        return {
            str(_value(row[0])): {
                name: _value(value) for name, value in zip(read, row[1:], strict=True)
            }
            for row in rows
        }
