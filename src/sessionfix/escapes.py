"""Escaping text from sessions and file names before it reaches a terminal or a machine
format: control characters, bidi overrides and lone surrogates."""

from __future__ import annotations

import re
from typing import Final

_SURROGATES: Final = "\ud800-\udfff"
_UNSAFE_CHARS: Final = re.compile(
    f"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069{_SURROGATES}]"
)
_LONE_SURROGATES: Final = re.compile(f"[{_SURROGATES}]")
_ESCAPED_BYTES: Final = range(0xDC80, 0xDD00)
"""The lone surrogates that stand for bytes that are not UTF-8 (Python's surrogateescape,
as file names hold them)."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def escape(text: str) -> str:
    """Make untrusted text safe for a terminal and for line-based readers: control
    characters (tab and newline too), bidi overrides and lone surrogates (a file name's
    bytes that are not UTF-8 as `\\xNN`) become escapes."""
    return _UNSAFE_CHARS.sub(_escaped, text)


def escape_surrogates(text: str) -> str:
    """`text` as valid Unicode, for JSON and other machine formats: only its lone
    surrogates become escapes, as `escape` writes them (a file name's bytes that are not
    UTF-8 as `\\xNN`); any other text stays exact."""
    return _LONE_SURROGATES.sub(_escaped, text)
