"""The typed decoder of records `JSON.parse` reads: what msgspec refuses and `JSON.parse`
reads (a lone surrogate escape, nesting past msgspec's depth) is decoded into the same
type, `Raw` members as their exact bytes; what msgspec decodes, the fallback decodes the
same way."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET, Raw, Struct, UnsetType

from sessionfix import jsonutil
from sessionfix.formats.common import ParsingDecoder

_NO_RAW = Raw(b"")


class _Block(Struct):
    type: Any = None
    input: Raw = _NO_RAW


class _Message(Struct):
    role: Any = None
    content: str | list[_Block] | None = None


class _Record(Struct, rename={"result": "toolUseResult"}):
    type: Any = None
    parent: Any | UnsetType = UNSET
    message: _Message | None = None
    result: Raw = _NO_RAW
    extra: Raw | UnsetType = UNSET


DECODER = ParsingDecoder(_Record)


def _plain(value: object) -> object:
    """A decoded value with each Raw as its bytes and each Struct as its fields."""
    if isinstance(value, Raw):
        return ("raw", bytes(value))
    if isinstance(value, Struct):
        return (
            type(value).__name__,
            {k: _plain(v) for k, v in msgspec.structs.asdict(value).items()},
        )
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def test_a_lone_surrogate_anywhere_is_read_as_json_parse_reads_it() -> None:
    data = (
        b'{"type":"user","note":"\\ud800","message":{"role":"user","content":'
        b'[{"type":"tool_result","input":{"a": [1, "\\udc9f"]}}]},'
        b'"toolUseResult":{"type":"text","x":"\\ud83d"}}'
    )
    with pytest.raises(msgspec.DecodeError):
        DECODER.typed.decode(data)
    record = DECODER.decode(data)
    assert record.type == "user"
    assert record.parent is UNSET
    assert record.message is not None
    assert isinstance(record.message.content, list)
    assert bytes(record.message.content[0].input) == b'{"a": [1, "\\udc9f"]}'
    assert bytes(record.result) == b'{"type":"text","x":"\\ud83d"}'
    assert record.extra is UNSET


def test_a_value_of_another_type_is_refused_as_msgspec_refuses_it() -> None:
    with pytest.raises(msgspec.ValidationError):
        DECODER.decode(b'{"x":"\\ud800","message":{"content":5}}')
    with pytest.raises(msgspec.ValidationError):
        DECODER.decode(b'{"message":{"content":5}}')


def test_text_json_parse_refuses_is_refused() -> None:
    for data in (b'{"type":"\\ud800"', b'{"type":NaN}', b"[1,2]"):
        with pytest.raises(ValueError):  # noqa: PT011 - each input fails with its own message
            DECODER.decode(data)


def test_nesting_past_msgspec_depth_is_read() -> None:
    deep = b"[" * 5000 + b"]" * 5000
    record = DECODER.decode(b'{"type":"user","extra":' + deep + b',"parent":' + deep + b"}")
    assert record.type == "user"
    assert isinstance(record.extra, Raw)
    assert bytes(record.extra) == deep


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.text(max_size=8),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
_BLOCK = st.fixed_dictionaries({}, optional={"type": _JSON, "input": _JSON, "other": _JSON})
_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "role": _JSON,
        "content": st.one_of(st.none(), st.text(max_size=8), st.lists(_BLOCK, max_size=3)),
    },
)
_RECORD = st.fixed_dictionaries(
    {},
    optional={
        "type": _JSON,
        "parent": _JSON,
        "message": st.one_of(st.none(), _MESSAGE),
        "toolUseResult": _JSON,
        "extra": _JSON,
        "unknown": _JSON,
    },
)


@given(_RECORD, st.sampled_from([None, 0, 2]), st.booleans())
def test_the_fallback_decodes_what_msgspec_decodes_the_same_way(
    record: dict[str, Any], indent: int | None, ascii_only: bool
) -> None:
    data = json.dumps(record, indent=indent, ensure_ascii=ascii_only).encode()
    typed = DECODER.typed.decode(data)
    assert _plain(DECODER.convert(jsonutil.loads(data), data)) == _plain(typed)


class _Inner(Struct):
    type: Any = None


class _Outer(Struct):
    type: Any = None
    inner: _Inner | None = None
    inners: list[_Inner] = []
    mapping: dict[str, Any] = {}
    anything: Any = None
    input: Raw = _NO_RAW


@pytest.mark.parametrize("key", [b"\\ud800", b"\\udc9f", b"\xff"], ids=repr)
def test_a_key_no_field_can_have_is_passed_over_where_a_struct_takes_the_object(
    key: bytes,
) -> None:
    """A key holding a lone surrogate escape or a byte that is not UTF-8 (which
    `JSON.parse` reads, and msgspec cannot look a field up by) in an object taken as a
    struct, at any depth, is passed over as a struct passes over keys it does not know;
    in a member taken as a mapping or as any value it stays."""
    odd = b'"k' + key + b'":1'
    data = (
        b'{"type":"t",ODD,"inner":{ODD,"type":"i"},"inners":[{"type":"j",ODD}],'
        b'"mapping":{ODD},"anything":{ODD},"input":{ODD}}'
    ).replace(b"ODD", odd)
    record = ParsingDecoder(_Outer).decode(data)
    assert record.type == "t"
    assert record.inner == _Inner("i")
    assert record.inners == [_Inner("j")]
    name = jsonutil.loads(b'"k' + key + b'"')
    assert record.mapping == record.anything == {name: 1}
    assert bytes(record.input) == b"{" + odd + b"}"
