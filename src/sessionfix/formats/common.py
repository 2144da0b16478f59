"""Reading helpers every record format shares; each names its own fields."""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Callable
from typing import Any, Final, Generic, TypeVar

import msgspec
import xxhash
from msgspec import UNSET, Raw
from msgspec import inspect as types

from sessionfix import jsonutil
from sessionfix.model.view import MISSING, SessionView, SignatureFault
from sessionfix.read.reader import RecordSource

IdsReader = Callable[[RecordSource, SessionView, int], tuple[str | None, object]]
T = TypeVar("T")


class ParsingDecoder(Generic[T]):
    """msgspec's typed JSON decoder for the records of agents that read them with
    `JSON.parse` (pi, OpenClaw, Claude Code; not Codex, whose serde_json refuses what
    msgspec refuses). Where msgspec refuses text `JSON.parse` reads (a lone surrogate
    escape such as `"\\ud800"` anywhere in the record, invalid UTF-8, nesting past its
    depth), the value `JSON.parse` gives is taken into the type instead, each `Raw`
    holding its member's exact bytes. A value of another type than the field's is
    refused as msgspec refuses it (ValidationError); text `JSON.parse` refuses too
    raises ValueError."""

    def __init__(self, kind: type[T]) -> None:
        self.kind = kind
        self.typed = msgspec.json.Decoder(kind)
        self._info: types.Type | None = None

    def decode(self, data: bytes | memoryview) -> T:
        try:
            return self.typed.decode(data)
        except msgspec.ValidationError:
            raise
        except (ValueError, RecursionError):
            pass
        data = bytes(data)
        return self.convert(jsonutil.loads(data), data)

    def convert(self, value: object, data: bytes) -> T:
        """`value`, the record `JSON.parse` reads from `data`, in the type."""
        if self._info is None:
            self._info = types.type_info(self.kind)
        return msgspec.convert(_with_raw(value, data, self._info), self.kind)


def _with_raw(value: object, data: bytes | None, info: types.Type) -> object:
    """`value` as msgspec can convert it into the type: each member the type takes as
    `Raw` replaced by its bytes in `data` (None: not needed), and each key that no field
    can have (a lone surrogate or a byte that is not UTF-8 in it, which msgspec cannot
    look a field up by: UnicodeEncodeError) left out of an object taken as a struct,
    which passes over keys it does not know."""
    if isinstance(info, types.RawType):
        return value if data is None else Raw(data)
    if isinstance(info, types.UnionType):
        for member in info.types:
            if isinstance(member, types.RawType) or _takes(member, value):
                return _with_raw(value, data, member)
        return value
    if not _holds(info, types.StructType):
        return value
    raw = data is not None and _holds(info, types.RawType)
    if isinstance(info, types.StructType) and type(value) is dict:
        fields = {field.encode_name: field.type for field in info.fields}
        members = jsonutil.member_bytes(data) if raw and data is not None else {}
        return {
            key: _with_raw(item, members.get(key), fields[key]) if key in fields else item
            for key, item in value.items()
            if key in fields or _encodable(key)
        }
    if isinstance(info, types.ListType) and type(value) is list:
        elements: list[bytes | None] = (
            list(jsonutil.element_bytes(data)) if raw and data is not None else [None] * len(value)
        )
        return [
            _with_raw(item, element, info.item_type)
            for item, element in zip(value, elements, strict=True)
        ]
    if isinstance(info, types.DictType) and type(value) is dict:
        return {key: _with_raw(item, None, info.value_type) for key, item in value.items()}
    return value


def _encodable(key: str) -> bool:
    try:
        key.encode()
    except UnicodeEncodeError:
        return False
    return True


def _takes(info: types.Type, value: object) -> bool:
    """Whether a union's member `info` is the one a container `value` decodes as."""
    if type(value) is dict:
        return isinstance(info, types.StructType | types.DictType)
    return type(value) is list and isinstance(info, types.ListType)


def _holds(info: types.Type, kind: type[types.Type], seen: frozenset[int] = frozenset()) -> bool:
    """Whether a value of the type can hold a value of type `kind` anywhere (itself too)."""
    if isinstance(info, kind):
        return True
    if id(info) in seen:
        return False
    seen = seen | {id(info)}
    if isinstance(info, types.UnionType):
        return any(_holds(member, kind, seen) for member in info.types)
    if isinstance(info, types.StructType):
        return any(_holds(field.type, kind, seen) for field in info.fields)
    if isinstance(info, types.ListType):
        return _holds(info.item_type, kind, seen)
    if isinstance(info, types.DictType):
        return _holds(info.value_type, kind, seen)
    return False


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


SHORTEST_SIGNATURE: Final = 100
"""Characters below which a thinking signature cannot be one Anthropic issued: the
shortest in the sample sessions has 268, and the cut ones users report have 24
(anthropics/claude-code#21726)."""


def signature_fault(signature: object) -> SignatureFault | None:
    """What makes a thinking block's signature one Anthropic's API refuses ("Invalid
    `signature` in `thinking` block"), as far as it shows without the key: none, empty,
    or not a whole signature. Anthropic's are padded base64 (ASCII, a length that is a
    multiple of 4), and a signature cut short in the stream mostly breaks that
    (openclaw/openclaw#92201, #97019); a valid one is never found at fault."""
    if type(signature) is not str:
        return SignatureFault.MISSING
    if not signature.strip():
        return SignatureFault.EMPTY
    if len(signature) < SHORTEST_SIGNATURE or len(signature) % 4 or not signature.isascii():
        return SignatureFault.MALFORMED
    return None


def writes_anthropic_signatures(model: object) -> bool:
    """Whether a model's thinking carries Anthropic's signatures (a Claude model, on
    Anthropic's API or a cloud's: `claude-opus-4-5`, `us.anthropic.claude-…`); other
    models' signatures have shapes of their own."""
    return type(model) is str and "claude" in model.lower()


def without_message_blocks(blocks: tuple[int, ...]) -> Callable[[Any], Any]:
    """A record of a format that holds its message's content in `message.content` (pi,
    Claude Code), without the content blocks at these places."""
    dropped = frozenset(blocks)

    def transform(record: Any) -> Any:
        message = record["message"]
        message["content"] = [
            block for place, block in enumerate(message["content"]) if place not in dropped
        ]
        return record

    return transform


def without_repeated_results(content: list[Any], call_ids: frozenset[str]) -> list[Any]:
    """Message content in the Anthropic block shape (Claude Code, CodeWhale) without the
    last `tool_result` block answering each of these calls: a repeat goes and the first
    result stays, in the same message too."""
    kept = list(content)
    for call_id in call_ids:
        answers = [
            place
            for place, block in enumerate(kept)
            if isinstance(block, dict)
            and block.get("type") == "tool_result"
            and block.get("tool_use_id") == call_id
        ]
        if answers:
            del kept[answers[-1]]
    return kept


def uuid_of(material: str) -> str:
    """A UUID from `xxh3_128` of `material`, version nibble 8, RFC 4122 variant
    (rules.md §9.3): the id of a record a repair writes, the same every run."""
    digest = bytearray(xxhash.xxh3_128_digest(material.encode("utf-8", "surrogatepass")))
    digest[6] = (digest[6] & 0x0F) | 0x80
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid_module.UUID(bytes=bytes(digest)))


def generate_uuid(
    session_id: str, anchor_id: str, rule_code: str, taken: Callable[[str], bool]
) -> str:
    """The first `uuid_of` a record inserted after `anchor_id` by `rule_code` that no
    record of the session holds (`taken`)."""
    n = 0
    while True:
        candidate = uuid_of(f"{session_id}\0{anchor_id}\0{rule_code}\0{n}")
        if not taken(candidate):
            return candidate
        n += 1


class TranscriptLines(Generic[T]):
    """What the adapters of a store's private transcript share: one record to a line,
    decoded whole, with no session context or names carried from line to line."""

    @property
    def context(self) -> object:
        return None

    @property
    def named(self) -> object:
        return None

    def ingest_batch(
        self,
        records: list[Any],
        first_row: int,
        offsets: list[int],
        sizes: list[int],
        line: Callable[[int], bytes],
    ) -> None:
        for number, (record, offset, size) in enumerate(zip(records, offsets, sizes, strict=True)):
            self.ingest(record, b"", first_row + number, 1, offset, size)

    def ingest(self, record: T, data: bytes, row: int, column: int, offset: int, size: int) -> None:
        raise NotImplementedError
