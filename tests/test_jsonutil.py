"""JSON helpers: JSON.parse acceptance, JSON.stringify fidelity, truncation test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionfix import jsonutil


def test_rewriting_an_untouched_record_reproduces_its_bytes(corpus: Path) -> None:
    """pi wrote every sample line with JSON.stringify: parse + stringify must be identity."""
    checked = 0
    for path in sorted((corpus / "openclaw").glob("*.jsonl")):
        for line in path.read_bytes().split(b"\n"):
            try:
                value = jsonutil.loads_preserving(line)
            except ValueError:
                continue
            assert jsonutil.stringify_bytes(value) == line, f"{path.name}: {line[:80]!r}"
            assert jsonutil.stringify_preserved(value) == line, f"{path.name}: {line[:80]!r}"
            checked += 1
    assert checked > 3000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"a":"\\u0001\\u001f\\b\\t\\n\\f\\r\\"\\\\/"}',
            '{"a":"\\u0001\\u001f\\b\\t\\n\\f\\r\\"\\\\/"}',
        ),
        ('{"a":"\u2028\u2029é€😀"}', '{"a":"\u2028\u2029é€😀"}'),
        ('{"a":"\\ud800"}', '{"a":"\\ud800"}'),
        (
            '{"n":1.0,"m":-0,"e":1E+5,"big":12345678901234567890}',
            '{"n":1.0,"m":-0,"e":1E+5,"big":12345678901234567890}',
        ),
        ('{"b":1,"a":2,"b":3}', '{"b":3,"a":2}'),
        ('{"x":[true,false,null,{}]}', '{"x":[true,false,null,{}]}'),
    ],
)
def test_stringify_matches_json_stringify(text: str, expected: str) -> None:
    assert jsonutil.stringify(jsonutil.loads_preserving(text.encode())) == expected


def test_invalid_utf8_survives_a_rewrite_byte_for_byte() -> None:
    raw = b'{"a":"caf\xe9 \xff","b":1}'
    assert jsonutil.stringify_bytes(jsonutil.loads_preserving(raw)) == raw


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"a":"a\\udc9fb"}', id="escaped-low-surrogate"),
        pytest.param(b'{"a":"a\x9fb"}', id="raw-byte"),
        pytest.param(b'{"a\\udc80":"\x80","a\x80":"\\udc80"}', id="both-in-keys-and-values"),
        pytest.param(b'{"a":"\\udbff\x9f"}', id="escaped-high-surrogate-then-raw-byte"),
        pytest.param(b'{"a":"\xed\xb2\x9f \\ud800 \\udfff"}', id="surrogate-bytes-and-escapes"),
    ],
)
def test_a_rewrite_keeps_escaped_surrogates_and_raw_bytes_apart(raw: bytes) -> None:
    """`\\udc9f` is U+DC9F to `JSON.parse`; a raw 0x9F byte is U+FFFD to pi: a rewrite
    writes each back as it was, and keys holding one or the other stay two keys."""
    assert jsonutil.stringify_bytes(jsonutil.loads_preserving(raw)) == raw


def test_escaped_surrogates_and_raw_bytes_parse_to_different_values() -> None:
    assert jsonutil.loads(b'"\\udc9f"') != jsonutil.loads(b'"\x9f"')
    assert len(jsonutil.loads(b'{"k\\udc9f":1,"k\x9f":2}')) == 2


@given(st.binary(max_size=64))
def test_decoded_text_encodes_back_to_its_bytes(data: bytes) -> None:
    assert jsonutil.encode_text(jsonutil.decode_text(data)) == data


def test_a_lone_surrogate_never_becomes_a_raw_byte() -> None:
    with pytest.raises(UnicodeEncodeError):
        jsonutil.encode_text("\udc9f")


def test_member_bytes_are_the_exact_slices_of_each_value() -> None:
    data = (
        b' { "a" : [1,{"b":"x]}\\""}] , "m\\u0065ssage":{"c":"\x9f\\udc9f"},'
        b'"n":-1.5e3 ,"a":true, "z":{} } '
    )
    assert jsonutil.member_bytes(data) == {
        "a": b"true",
        "message": b'{"c":"\x9f\\udc9f"}',
        "n": b"-1.5e3",
        "z": b"{}",
    }


@pytest.mark.parametrize(
    "raw",
    [b'{"a":NaN}', b'{"a":Infinity}', b"{'a':1}", b'{"a":1,}', b"", b"[1", b'{"a":1}x'],
)
def test_loads_refuses_what_json_parse_refuses(raw: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each input fails with its own message
        jsonutil.loads(raw)


@pytest.mark.parametrize(
    "raw", [b'{"a":"\\ud800"}', b'{"a":"\xff"}', b'  {"a":1}  \r\n', b'{"a":"x\xe2\x80\xa8y"}']
)
def test_loads_accepts_what_json_parse_accepts(raw: bytes) -> None:
    assert isinstance(jsonutil.loads(raw), dict)


DEEP: Final = 20_000


def deep(depth: int = DEEP) -> bytes:
    """A record holding arrays and objects nested `depth` levels deep."""
    return b'{"a":' + b'[{"k":' * depth + b'"x"' + b"}]" * depth + b',"b":-0.0e0}'


def test_any_depth_parses_as_json_parse_reads_it() -> None:
    """V8's `JSON.parse` reads any depth; past the recursive parsers' limits the
    iterative one gives the same values."""
    value = jsonutil.loads(deep())
    assert list(value) == ["a", "b"]
    assert value["b"] == 0.0
    inner = value["a"]
    for _ in range(DEEP - 1):
        inner = inner[0]["k"]
    assert inner == [{"k": "x"}]


def _number(lexeme: str, integer: bool) -> tuple[str, bool]:
    return lexeme, integer


_STDLIB = json.JSONDecoder(
    parse_int=lambda lexeme: _number(lexeme, True),
    parse_float=lambda lexeme: _number(lexeme, False),
)


@pytest.mark.parametrize(
    "text",
    [
        '{ "b" : [ 1 , -0.5e-3 , 1E+2 , 0 , -0 , 12345678901234567890123 ] , "a" : { } } ',
        '{"k":1,"j":[],"k":{"x":[true,false,null]}}',
        '["\\u0041\\ud83d\\ude00\\udc9f\\/\\n", "\u2028\udbff\udc9f", ""]',
        '"just a string"',
        "-1.5",
    ],
)
def test_the_iterative_parser_gives_the_stdlib_values(text: str) -> None:
    value, end = jsonutil.decode_deep(text, 0, _number)
    assert (value, end) == _STDLIB.raw_decode(text, 0)


def test_any_depth_is_rewritten_byte_for_byte() -> None:
    record = deep()
    assert jsonutil.stringify_bytes(jsonutil.loads_preserving(record)) == record


def test_element_bytes_are_the_exact_slices_of_each_element() -> None:
    data = b' [ 1 ,{"b":"x]}\\""} , "\x9f\\udc9f",[], -1.5e3 ] '
    assert jsonutil.element_bytes(data) == [
        b"1",
        b'{"b":"x]}\\""}',
        b'"\x9f\\udc9f"',
        b"[]",
        b"-1.5e3",
    ]
    assert jsonutil.element_bytes(b"[ ]") == []
    with pytest.raises(ValueError, match="not a JSON array"):
        jsonutil.element_bytes(b'{"a":1}')


def test_member_bytes_at_any_depth() -> None:
    assert jsonutil.member_bytes(deep()) == {"a": deep()[5:-12], "b": b"-0.0e0"}


def test_deep_glued_records_split_at_their_boundaries() -> None:
    text = jsonutil.decode_text(deep() + b" " + deep(3) + deep())
    values, stop = jsonutil.split_values(text)
    assert stop == len(text)
    assert [end - start for start, end, _ in values] == [len(deep()), len(deep(3)), len(deep())]


@pytest.mark.parametrize(
    "raw",
    [deep()[:-1], deep().replace(b'"x"', b"x"), deep() + b"x", deep().replace(b"}]", b"]}", 1)],
    ids=["cut-off", "bad-value", "trailing", "crossed-brackets"],
)
def test_deep_garbage_is_still_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each input fails with its own message
        jsonutil.loads(raw)
    with pytest.raises(ValueError):  # noqa: PT011
        jsonutil.loads_preserving(raw)


def test_an_integer_past_python_digit_limit_is_the_double_json_parse_makes() -> None:
    assert jsonutil.loads(b'{"a":' + b"1" * 5000 + b"}") == {"a": float("inf")}


@pytest.mark.parametrize(
    ("text", "truncated"),
    [
        ('{"type":"message"', True),
        ('{"type":"mess', True),
        ('{"a":tr', True),
        ('{"a":1.', True),
        ('{"a":1e', True),
        ('{"a":"\\u00', True),
        ('{"a":[1,{"b":', True),
        ('{"a":1}', False),
        ("{not json}", False),
        ('{"a":1}}', False),
        ('{"a":"x\x01', False),
        ('{"a":tx', False),
        ("[1,2", False),
        ("", False),
    ],
)
def test_truncated_records_are_told_from_garbage(text: str, truncated: bool) -> None:
    assert jsonutil.is_truncated_object(text) is truncated


def test_split_values_recovers_glued_objects_with_their_spans() -> None:
    text = '{"a":1}{"b":"}{"} {"c":[1]}'
    values, stop = jsonutil.split_values(text)
    assert stop == len(text)
    assert [text[start:end] for start, end, _ in values] == ['{"a":1}', '{"b":"}{"}', '{"c":[1]}']


def test_canonical_form_ignores_key_order() -> None:
    assert jsonutil.canonical({"b": 1, "a": {"d": 1, "c": 2}}) == b'{"a":{"c":2,"d":1},"b":1}'


JSONISH = st.lists(
    st.sampled_from(
        [
            *(b"{", b"}", b"[", b"]", b'"', b'"k"', b":", b",", b" ", b"\n", b"\t", b"1"),
            *(b"-2.5e3", b"true", b"nul", b"x", b"\\", b"\\u12", b"\xc3\xa9", b"\xff"),
            *(b"\xed\xa0\x80", b"\xe2"),
        ]
    ),
    max_size=40,
).map(b"".join)


def _full(data: bytes) -> tuple[str, int] | None:
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return exc.msg, exc.pos
    return None


@given(data=JSONISH, probe=st.integers(1, 12))
def test_a_long_input_refused_early_is_refused_the_same_way(
    data: bytes, probe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal found in the first `_PROBE_BYTES` (here a few bytes) is the one orjson
    gives for the whole input (of valid UTF-8, which `refusal` is given); `loads`
    parses exactly what it parsed before."""
    try:
        expected: object = jsonutil.loads(data)
    except ValueError:
        expected = ValueError
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        utf8 = False  # orjson refuses the whole input for that before looking at syntax
    else:
        utf8 = True
    with monkeypatch.context() as patch:
        patch.setattr(jsonutil, "_PROBE_BYTES", probe)
        if utf8:
            assert jsonutil.refusal(data) == _full(data)
        try:
            found: object = jsonutil.loads(data)
        except ValueError:
            found = ValueError
    assert found == expected


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    record=st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=4),
    compact=st.booleans(),
)
def test_every_proper_prefix_of_a_record_is_truncated(
    record: dict[str, object], compact: bool
) -> None:
    """Torn writes cut a record anywhere: inside strings, escapes, numbers, literals."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":") if compact else None)
    for cut in range(1, len(text)):
        assert jsonutil.is_truncated_object(text[:cut]), text[:cut]
    assert not jsonutil.is_truncated_object(text)
    assert not jsonutil.is_truncated_object(text[:-1] + "x")


@given(
    text=st.lists(
        st.one_of(
            st.characters(),
            st.characters(categories=["Cs"]),
            st.sampled_from(['"', "\\", "\x00", "\x1f", "\x7f", "\u2028", jsonutil.RAW_BYTE]),
        )
    ).map("".join)  # st.text never draws a lone surrogate
)
def test_quoting_takes_the_c_encoder_only_where_it_escapes_as_json_stringify(text: str) -> None:
    """The fast path (no surrogates) and the exact escaping agree on any text."""
    exact = '"' + jsonutil._NEEDS_ESCAPE.sub(jsonutil._escape_char, text) + '"'
    assert jsonutil._quote(text) == exact


_LEXEMES = st.sampled_from(
    ["0", "-0", "1.0", "1e21", "1E+2", "-3.25e-7", "12345678901234567890123"]
)
_TEXTS = st.lists(
    st.one_of(
        st.characters(), st.characters(categories=["Cs"]), st.sampled_from(['"', "\\", "\x1f"])
    )
).map("".join)
_JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        _LEXEMES.map(jsonutil.RawNumber),
        _TEXTS,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_TEXTS, inner, max_size=4)
    ),
    max_leaves=12,
)


@given(value=_JSON_VALUES)
def test_a_preserved_record_is_written_by_orjson_as_the_exact_way_writes_it(value: object) -> None:
    """orjson's way (numbers as their lexemes) and the exact one agree on what a
    preserving parse and the editors' transforms can make, and fall back together."""
    assert jsonutil.stringify_preserved(value) == jsonutil.stringify_bytes(value)


def test_a_preserved_record_deeper_than_orjson_goes_the_exact_way() -> None:
    deep = b"[" * 300 + b"1.50" + b"]" * 300
    value = jsonutil.loads_preserving(deep)
    assert jsonutil.stringify_preserved(value) == deep
