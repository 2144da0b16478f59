"""JSON helpers with the semantics of the agents' own readers and writers.

Agents parse lines with `JSON.parse` on text decoded leniently and write them with
`JSON.stringify`; these helpers reproduce both on bytes, so that a record keeps its
exact bytes when read and re-written.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring as _encode_basestring
from typing import Any, Final

import orjson

RAW_BYTE: Final = "\udbff"
"""In decoded text, an input byte that is not UTF-8 is this code point followed by the
byte's own, U+DC80..U+DCFF (as `surrogateescape` maps it). Parsed JSON strings can
never hold that pair otherwise: the parsers join an escaped U+DBFF with an escaped
low surrogate after it into one code point, so `"\\udc9f"` (a lone surrogate
`JSON.parse` keeps) and a raw 0x9F byte (which it reads as U+FFFD) stay apart."""
_RAW_BYTES_CODEC: Final = "sessionfix-raw-bytes"


def _raw_bytes_handler(exc: UnicodeError) -> tuple[str | bytes, int]:
    """Decoding, each invalid byte becomes its `RAW_BYTE` pair; encoding, each pair its
    byte again, and any other lone surrogate stays an error."""
    if isinstance(exc, UnicodeDecodeError):
        invalid = exc.object[exc.start : exc.end]
        return "".join(RAW_BYTE + chr(0xDC00 + byte) for byte in invalid), exc.end
    if isinstance(exc, UnicodeEncodeError):
        # The encoder hands over the whole run of surrogates: only marker pairs encode.
        run = exc.object[exc.start : exc.end]
        raw = bytearray()
        for mark, code in zip(run[0::2], run[1::2], strict=False):
            if mark != RAW_BYTE or not "\udc80" <= code <= "\udcff":
                raise exc
            raw.append(ord(code) - 0xDC00)
        if len(run) % 2 == 0:
            return bytes(raw), exc.end
    raise exc


codecs.register_error(_RAW_BYTES_CODEC, _raw_bytes_handler)


def _int_or_double(lexeme: str) -> int | float:
    """An integer lexeme's value; past Python's digit limit, the double `JSON.parse` makes."""
    try:
        return int(lexeme)
    except ValueError:
        return float(lexeme)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_STDLIB_DECODER = json.JSONDecoder(parse_int=_int_or_double, parse_constant=_refuse_constant)


def decode_text(data: bytes) -> str:
    """Decode UTF-8, keeping each invalid byte as a `RAW_BYTE` pair (round-trips exactly)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", _RAW_BYTES_CODEC)


def encode_text(text: str) -> bytes:
    """Inverse of `decode_text`; any other lone surrogate is an error."""
    return text.encode("utf-8", _RAW_BYTES_CODEC)


def loads(data: bytes) -> Any:
    """Parse one JSON value strictly, as `JSON.parse` would accept it.

    orjson first; it rejects lone-surrogate escapes, invalid UTF-8 and numbers beyond
    a double that `JSON.parse` accepts, and nesting past 1,024 levels that it reads
    too, so the stdlib parser gets a second chance (with NaN/Infinity refused, which
    `JSON.parse` also refuses), and past its recursion limit an iterative parser.
    """
    early = _early_refusal(data)
    if early is not None:
        raise ValueError(early[0])
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not _second_chance(exc.msg):
            # Plain syntax: JSON.parse rejects it too (no need to decode a huge line).
            raise ValueError(exc.msg) from None
    return _parse(decode_text(data), _STDLIB_DECODER, _number_value)


def refusal(data: bytes) -> tuple[str, int] | None:
    """orjson's message and character position for `data` (valid UTF-8) it does not
    parse; None if it parses."""
    early = _early_refusal(data)
    if early is not None:
        return early
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return exc.msg, exc.pos
    return None


_SECOND_CHANCE: Final = ("surrogate", "UTF-8", "infinity", "depth", "allocate")
"""orjson refusals that `JSON.parse` may accept: lone surrogates, invalid UTF-8 (read
leniently), numbers beyond a double (Infinity), nesting past orjson's 1,024 levels
(which it may also report as a failure to allocate)."""
_PROBE_BYTES: Final = 1 << 20
_UNFINISHED: Final = ("end of data", "empty")
"""orjson refusals of a first MiB that the rest of the input may settle."""


def _second_chance(message: str) -> bool:
    return any(word in message for word in _SECOND_CHANCE)


def _early_refusal(data: bytes) -> tuple[str, int] | None:
    """For an input over a MiB: a plain syntax error that orjson finds in its first MiB
    after any leading whitespace (message, character position), which is then the error
    of the whole input, since parsing goes left to right. Saves parsing the rest, and
    the copy of all of it as text that orjson's error carries."""
    if len(data) <= _PROBE_BYTES:
        return None
    found = _NON_SPACE.search(data)
    if found is None:
        return None
    start = found.start()
    cut = min(start + _PROBE_BYTES, len(data))
    while start < cut < len(data) and data[cut] & 0xC0 == 0x80:  # never split a UTF-8 sequence
        cut -= 1
    try:
        orjson.loads(memoryview(data)[start:cut])
    except orjson.JSONDecodeError as exc:
        if not any(word in exc.msg for word in _UNFINISHED) and not _second_chance(exc.msg):
            return exc.msg, start + exc.pos
    return None


_NON_SPACE: Final = re.compile(rb"[^ \t\r\n]")
"""JSON's whitespace is these four bytes."""


def _parse(text: str, decoder: json.JSONDecoder, number: _NumberParser) -> Any:
    """`decoder.decode(text)`, or the iterative parser where recursion runs out."""
    try:
        return decoder.decode(text)
    except RecursionError:
        pass
    value, end = decode_deep(text, _skip_ws(text, 0), number)
    if _skip_ws(text, end) != len(text):
        raise ValueError(f"extra data at column {end + 1}")
    return value


def split_values(text: str) -> tuple[list[tuple[int, int, Any]], int]:
    """Split text holding several JSON values back to back.

    Returns the values parsed from the start, each with its character span, and the
    character index where parsing stopped (``len(text)`` when everything parsed).
    """
    values: list[tuple[int, int, Any]] = []
    pos = _skip_ws(text, 0)
    while pos < len(text):
        try:
            try:
                value, end = _STDLIB_DECODER.raw_decode(text, pos)
            except RecursionError:
                value, end = decode_deep(text, pos, _number_value)
        except ValueError:
            break
        values.append((pos, end, value))
        pos = _skip_ws(text, end)
    return values, pos


_WS: Final = frozenset(" \t\r\n")
_NOT_WS: Final = re.compile(r"[^ \t\r\n]")


def _skip_ws(text: str, pos: int) -> int:
    found = _NOT_WS.search(text, pos)
    return len(text) if found is None else found.start()


_STRING_OR_SPACE: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[ \t\r\n]+')


def spaces_between_tokens(data: bytes) -> Iterator[tuple[int, int]]:
    """The byte ranges of the whitespace between the tokens of the JSON text `data`
    (strings skipped whole): what a compact writer leaves out."""
    for match in _STRING_OR_SPACE.finditer(data):
        if data[match.start()] != 0x22:  # not a string
            yield match.span()


def compact(data: bytes) -> bytes:
    """The JSON text `data` without the whitespace between its tokens; every token's
    bytes are kept as they are (escapes, numbers, key order)."""
    pieces: list[bytes] = []
    position = 0
    for start, end in spaces_between_tokens(data):
        pieces.append(data[position:start])
        position = end
    pieces.append(data[position:])
    return b"".join(pieces)


def canonical(value: Any) -> bytes:
    """Canonical JSON: keys sorted recursively, compact, UTF-8."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        pass
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise ValueError("nesting too deep") from None
    return text.encode("utf-8", "surrogatepass")


class RawNumber(str):
    """A JSON number kept as its original lexeme, so re-serialising never reformats it."""

    __slots__ = ()


_PRESERVING_DECODER = json.JSONDecoder(
    parse_float=RawNumber, parse_int=RawNumber, parse_constant=_refuse_constant
)


def loads_preserving(data: bytes) -> Any:
    """Parse for rewriting: key order and number lexemes are kept exactly."""
    return _parse(decode_text(data), _PRESERVING_DECODER, _raw_number)


# ---- any depth -------------------------------------------------------------------------

_NumberParser = Callable[[str, bool], Any]
"""Makes a number from its lexeme and whether it is an integer."""


def _number_value(lexeme: str, integer: bool) -> Any:
    return _int_or_double(lexeme) if integer else float(lexeme)


def _raw_number(lexeme: str, integer: bool) -> Any:
    return RawNumber(lexeme)


_NUMBER_LEXEME: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERAL_VALUES: Final[dict[str, Any]] = {"null": None, "true": True, "false": False}
_LITERAL_OF: Final = {word[0]: word for word in _LITERAL_VALUES}
_scanstring: Final[Callable[[str, int, bool], tuple[str, int]]] = vars(json.decoder)["scanstring"]
"""The stdlib decoder's own string scanner (not in its typed interface)."""


def decode_deep(text: str, pos: int, number: _NumberParser) -> tuple[Any, int]:
    """The JSON value at `pos` and the index after it, parsed without recursion.

    `JSON.parse` reads any depth; the recursive parsers stop near a thousand levels.
    This one gives the values the stdlib parser would (strings through its own
    `scanstring`, keys last-wins), at Python speed: it only runs where they give up.
    """
    containers: list[Any] = []
    """Open arrays and objects, innermost last."""
    keys: list[str] = []
    """The key whose value comes next, per open object."""
    value: Any
    # Whitespace is skipped inline: compact records have none, and this loop runs once
    # per token.
    while True:
        if text[pos : pos + 1] in _WS:
            pos = _skip_ws(text, pos)
        char = text[pos : pos + 1]
        if char == "[" or char == "{":
            pos += 1
            if text[pos : pos + 1] in _WS:
                pos = _skip_ws(text, pos)
            if text[pos : pos + 1] == ("]" if char == "[" else "}"):
                value = [] if char == "[" else {}
                pos += 1
            elif char == "[":
                containers.append([])
                continue
            else:
                containers.append({})
                key, pos = _member_key(text, pos)
                keys.append(key)
                continue
        elif char == '"':
            value, pos = _scanstring(text, pos + 1, True)
        elif (word := _LITERAL_OF.get(char)) is not None and text.startswith(word, pos):
            value = _LITERAL_VALUES[word]
            pos += len(word)
        else:
            match = _NUMBER_LEXEME.match(text, pos)
            if match is None:
                raise ValueError(f"expecting a value at column {pos + 1}")
            value = number(match.group(), match.lastindex is None)
            pos = match.end()
        # A value is complete: place it, closing every container that ends after it.
        while containers:
            container = containers[-1]
            if text[pos : pos + 1] in _WS:
                pos = _skip_ws(text, pos)
            char = text[pos : pos + 1]
            if type(container) is list:
                container.append(value)
                if char == ",":
                    pos += 1
                    break
                if char != "]":
                    raise ValueError(f"expecting ',' or ']' at column {pos + 1}")
            else:
                container[keys[-1]] = value
                if char == ",":
                    keys[-1], pos = _member_key(text, pos + 1)
                    break
                if char != "}":
                    raise ValueError(f"expecting ',' or '}}' at column {pos + 1}")
                keys.pop()
            pos += 1
            value = containers.pop()
        else:
            return value, pos


def _member_key(text: str, pos: int) -> tuple[str, int]:
    """An object member's key at `pos` (whitespace before it allowed) and the index
    after its colon."""
    pos = _skip_ws(text, pos)
    if text[pos : pos + 1] != '"':
        raise ValueError(f"expecting a property name at column {pos + 1}")
    key, pos = _scanstring(text, pos + 1, True)
    pos = _skip_ws(text, pos)
    if text[pos : pos + 1] != ":":
        raise ValueError(f"expecting ':' at column {pos + 1}")
    return key, pos + 1


# ---- exact bytes of members ---------------------------------------------------------

_STRING_BYTES: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR_BYTES: Final = re.compile(
    rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null"
)
_NESTING_BYTES: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_OPENERS: Final = frozenset(b"[{")
_WS_BYTES: Final = b" \t\r\n"


def member_bytes(data: bytes) -> dict[str, bytes]:
    """The exact bytes of each member's value of the JSON object `data`, by key (the
    last of repeated keys, as `JSON.parse` keeps it), at any depth and whatever the
    encoding inside strings. For a record already known to parse; ValueError if not
    an object."""
    members: dict[str, bytes] = {}
    pos = _skip_ws_bytes(data, 0)
    if data[pos : pos + 1] != b"{":
        raise ValueError("not a JSON object")
    pos = _skip_ws_bytes(data, pos + 1)
    if data[pos : pos + 1] == b"}":
        return members
    while True:
        key = _STRING_BYTES.match(data, pos)
        if key is None:
            raise ValueError(f"expecting a property name at byte {pos + 1}")
        pos = _skip_ws_bytes(data, key.end())
        if data[pos : pos + 1] != b":":
            raise ValueError(f"expecting ':' at byte {pos + 1}")
        start = _skip_ws_bytes(data, pos + 1)
        end = _value_end(data, start)
        members[loads(key.group())] = data[start:end]
        pos = _skip_ws_bytes(data, end)
        if data[pos : pos + 1] == b"}":
            return members
        if data[pos : pos + 1] != b",":
            raise ValueError(f"expecting ',' or '}}' at byte {pos + 1}")
        pos = _skip_ws_bytes(data, pos + 1)


def element_bytes(data: bytes) -> list[bytes]:
    """The exact bytes of each element of the JSON array `data`, in order (as
    `member_bytes` gives an object's members). ValueError if not an array."""
    elements: list[bytes] = []
    pos = _skip_ws_bytes(data, 0)
    if data[pos : pos + 1] != b"[":
        raise ValueError("not a JSON array")
    pos = _skip_ws_bytes(data, pos + 1)
    if data[pos : pos + 1] == b"]":
        return elements
    while True:
        end = _value_end(data, pos)
        elements.append(data[pos:end])
        pos = _skip_ws_bytes(data, end)
        if data[pos : pos + 1] == b"]":
            return elements
        if data[pos : pos + 1] != b",":
            raise ValueError(f"expecting ',' or ']' at byte {pos + 1}")
        pos = _skip_ws_bytes(data, pos + 1)


def _value_end(data: bytes, pos: int) -> int:
    """Where the JSON value starting at `pos` ends: strings are skipped whole, brackets
    counted, so the depth costs nothing but the count."""
    if data[pos : pos + 1] == b'"':
        match = _STRING_BYTES.match(data, pos)
    elif data[pos : pos + 1] in (b"[", b"{"):
        depth = 0
        for token in _NESTING_BYTES.finditer(data, pos):
            char = data[token.start()]
            if char != 0x22:
                depth += 1 if char in _OPENERS else -1
                if not depth:
                    return token.end()
        match = None
    else:
        match = _SCALAR_BYTES.match(data, pos)
    if match is None:
        raise ValueError(f"expecting a value at byte {pos + 1}")
    return match.end()


def _skip_ws_bytes(data: bytes, pos: int) -> int:
    while data[pos : pos + 1] and data[pos] in _WS_BYTES:
        pos += 1
    return pos


# ---- writing -------------------------------------------------------------------------

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_NEEDS_ESCAPE = re.compile(RAW_BYTE + '[\udc80-\udcff]|["\\\\\x00-\x1f\ud800-\udfff]')


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    if len(char) == 2:  # a raw input byte (RAW_BYTE pair): written back as that byte
        return char
    return _ESCAPES.get(char) or f"\\u{ord(char):04x}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _quote(text: str) -> str:
    if _SURROGATE.search(text) is None:
        # Without surrogates, the C encoder escapes exactly what JSON.stringify does.
        return _encode_basestring(text)
    # Lone surrogates are escaped, as JSON.stringify does; raw input bytes stay raw.
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, text) + '"'


def stringify(value: Any) -> str:
    """Serialise like JavaScript's `JSON.stringify(value)`: compact, key order kept.

    Raw input bytes stay `RAW_BYTE` pairs in the text (`encode_text` writes them).
    """
    parts: list[str] = []
    try:
        _emit(value, parts)
    except RecursionError:
        parts.clear()
        _emit_deep(value, parts)
    return "".join(parts)


def stringify_bytes(value: Any) -> bytes:
    return encode_text(stringify(value))


def stringify_preserved(value: Any) -> bytes:
    """`stringify_bytes` of a value `loads_preserving` read (every number a `RawNumber`)
    and changed only by strings, integers, booleans, None, lists and dicts.

    orjson writes such a value as JSON.stringify does, its numbers as their lexemes;
    what it refuses (a lone surrogate or a raw input byte, an integer past 64 bits,
    nesting past its limit) goes the exact way. A float would not: none is in such a
    value."""
    try:
        return orjson.dumps(value, default=_lexeme, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except orjson.JSONEncodeError:
        return stringify_bytes(value)


def _lexeme(value: Any) -> orjson.Fragment:
    if type(value) is RawNumber:
        return orjson.Fragment(str.__str__(value))
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _emit(value: Any, out: list[str]) -> None:
    if isinstance(value, RawNumber):
        out.append(str.__str__(value))
    elif isinstance(value, str):
        out.append(_quote(value))
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_js_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(_quote(str(key)))
            out.append(":")
            _emit(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _emit(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot serialise {type(value).__name__}")


class _Text(str):
    """Output text queued by `_emit_deep` (not a string value to quote)."""

    __slots__ = ()


def _emit_deep(value: Any, out: list[str]) -> None:
    """`_emit` without recursion, for values nested deeper than Python recurses."""
    todo: list[Any] = [value]
    while todo:
        item = todo.pop()
        if type(item) is _Text:
            out.append(item)
        elif isinstance(item, dict):
            todo.append(_Text("}"))
            members = list(item.items())
            for position in range(len(members) - 1, -1, -1):
                key, member = members[position]
                todo.append(member)
                todo.append(_Text(("," if position else "") + _quote(str(key)) + ":"))
            todo.append(_Text("{"))
        elif isinstance(item, list | tuple):
            todo.append(_Text("]"))
            for position in range(len(item) - 1, -1, -1):
                todo.append(item[position])
                if position:
                    todo.append(_Text(","))
            todo.append(_Text("["))
        else:
            _emit(item, out)


def _js_number(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        return "null"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text


_LITERALS = ("true", "false", "null")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_PREFIX = re.compile(r"-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?")
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')

# Parser states for `is_truncated_object`.
_VALUE, _ARRAY_FIRST, _KEY_FIRST, _KEY, _COLON, _AFTER_MEMBER, _AFTER_ITEM, _DONE = range(8)


def is_truncated_object(text: str) -> bool:
    """Whether `text` is an incomplete JSON object: valid so far, cut off before its end.

    This tells a torn write (the tail is missing) from garbage: a torn line is a
    proper prefix of a record; garbage has an error before its last byte.
    """
    n = len(text)
    i = _skip_ws(text, 0)
    if i >= n or text[i] != "{":
        return False
    stack: list[str] = []
    state = _VALUE
    while True:
        i = _skip_ws(text, i)
        if i >= n:
            return state != _DONE
        char = text[i]
        if state == _DONE:
            return False
        if state == _COLON:
            if char != ":":
                return False
            state, i = _VALUE, i + 1
        elif state in (_AFTER_MEMBER, _AFTER_ITEM):
            closer = "}" if state == _AFTER_MEMBER else "]"
            if char == ",":
                state, i = (_KEY if state == _AFTER_MEMBER else _VALUE), i + 1
            elif char == closer:
                stack.pop()
                state, i = _after_value(stack), i + 1
            else:
                return False
        elif state in (_KEY_FIRST, _KEY):
            if char == "}" and state == _KEY_FIRST:
                stack.pop()
                state, i = _after_value(stack), i + 1
            elif char == '"':
                end = _scan_string(text, i)
                if end < 0:
                    return end == -1
                state, i = _COLON, end
            else:
                return False
        else:  # _VALUE or _ARRAY_FIRST
            if char == "]" and state == _ARRAY_FIRST:
                stack.pop()
                state, i = _after_value(stack), i + 1
            elif char == "{":
                stack.append("{")
                state, i = _KEY_FIRST, i + 1
            elif char == "[":
                stack.append("[")
                state, i = _ARRAY_FIRST, i + 1
            elif char == '"':
                end = _scan_string(text, i)
                if end < 0:
                    return end == -1
                state, i = _after_value(stack), end
            elif char in "tfn":
                word = next(w for w in _LITERALS if w[0] == char)
                if text.startswith(word, i):
                    state, i = _after_value(stack), i + len(word)
                else:
                    return word.startswith(text[i:])
            elif char == "-" or char.isdigit():
                prefix = _NUMBER_PREFIX.match(text, i)
                if prefix is not None and prefix.end() == n:
                    return True
                match = _NUMBER.match(text, i)
                if match is None or prefix is None or match.end() != prefix.end():
                    return False
                state, i = _after_value(stack), match.end()
            else:
                return False


def _after_value(stack: list[str]) -> int:
    if not stack:
        return _DONE
    return _AFTER_MEMBER if stack[-1] == "{" else _AFTER_ITEM


_STRING_SPECIAL: Final = re.compile('["\\\\\x00-\x1f]')


def _scan_string(text: str, start: int) -> int:
    """End index after the closing quote; -1 when the text ends inside it; -2 on an error."""
    n = len(text)
    i = start + 1
    while i < n:
        # Plain characters are skipped in one search (a torn record may hold megabytes).
        special = _STRING_SPECIAL.search(text, i)
        if special is None:
            return -1
        i = special.start()
        char = text[i]
        if char == '"':
            return i + 1
        if char == "\\":
            if i + 1 >= n:
                return -1
            escape = text[i + 1]
            if escape == "u":
                digits = text[i + 2 : i + 6]
                if not all(d in _HEX for d in digits):
                    return -2
                if len(digits) < 4:
                    return -1
                i += 6
                continue
            if escape not in _SIMPLE_ESCAPES:
                return -2
            i += 2
            continue
        if char < " ":
            return -2
        i += 1
    return -1
