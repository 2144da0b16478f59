"""Reading helpers every record format shares; each names its own fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET

from sessionfix import jsonutil
from sessionfix.model.view import MISSING, SessionView
from sessionfix.read.reader import RecordSource

IdsReader = Callable[[RecordSource, SessionView, int], tuple[str | None, object]]


def ids_reader(id_field: str, parent_field: str) -> IdsReader:
    """Reads a record's id and parent link back from the file (`MISSING` for an absent
    parent field), decoding those two fields only."""
    ids = msgspec.defstruct(
        "Ids",
        [("id", Any, None), ("parent", Any, UNSET)],
        rename={"id": id_field, "parent": parent_field},
        gc=False,
    )
    decoder = msgspec.json.Decoder(ids)

    def read(source: RecordSource, view: SessionView, index: int) -> tuple[str | None, object]:
        data = source.read(*view.span(index))
        try:
            found: Any = decoder.decode(data)
            entry_id, parent = found.id, found.parent
        except (ValueError, RecursionError):
            try:
                value = jsonutil.loads(data)
            except ValueError:
                return None, MISSING
            if not isinstance(value, dict):
                return None, MISSING
            entry_id, parent = value.get(id_field), value.get(parent_field, UNSET)
        valid = entry_id if type(entry_id) is str and entry_id else None
        return valid, MISSING if parent is UNSET else parent

    return read


def text_exceeds(text: str | None, limit: int, prefix: str) -> bool:
    """Whether `text` does not start with `prefix` and is longer than `limit` UTF-8 bytes."""
    if text is None or text.startswith(prefix):
        return False
    return (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))) > limit
