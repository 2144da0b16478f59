"""Byte-level reading of session files.

Lines are split on ``\\n`` only (one trailing ``\\r`` stripped), never with
`str.splitlines()`: agents write U+2028/U+2029 unescaped inside strings. Every
record keeps its physical line number, byte offset and original bytes. Lines that
do not hold exactly one JSON object are classified here (`classify_line`); the
common case, a line that parses, never reaches this module's slow path.
"""

from __future__ import annotations

import codecs
import enum
import errno
import io
import os
import re
import stat
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, Final

from msgspec import Struct, field

from sessionfix import jsonutil
from sessionfix.errors import InputError, NotASessionFile

BOM = b"\xef\xbb\xbf"
NUL = b"\x00"


class LineIssue(enum.Enum):
    """What is wrong with a physical line, before any format knowledge."""

    GLUED = "glued"
    """Two or more JSON objects on one line."""
    TORN = "torn"
    """The last non-blank line, or the tail of it, does not parse."""
    UNDEFINED = "undefined"
    """The line is the literal `undefined`."""
    NUL = "nul"
    """Raw NUL bytes that can be stripped or dropped losslessly."""
    BOM = "bom"
    """A UTF-8 byte-order mark at the start of the line."""
    BLANK = "blank"
    """An empty or whitespace-only line."""
    UNPARSABLE = "unparsable"
    """Anything else that is not exactly one JSON object."""
    SPREAD = "spread"
    """Lines that together hold one record, spread over them: none parses alone."""


class NulPlacement(enum.Enum):
    ONLY = "only"
    LEADING = "leading"
    TRAILING = "trailing"
    AROUND = "around"
    INSIDE = "inside"


class LineFinding(Struct):
    """One line-level problem, located by physical line and byte span."""

    issue: LineIssue
    row: int
    offset: int
    """Byte offset of the line in the file."""
    length: int
    """Length of the line body (terminator excluded); for several lines, up to the end
    of the last one's body."""
    rows: int = 1
    """How many lines it covers from `row` on: a run of blank lines or of junk, or the
    lines of a record spread over them, is one finding."""
    tail: int = 0
    """For a run: where its last line starts, counted from `offset`."""
    detail: str = ""
    span: tuple[int, int] | None = None
    """The affected bytes, relative to the line start (damaged tail, NUL-free record...)."""
    records: tuple[tuple[int, int], ...] = ()
    """For glued lines: each clean record's byte span relative to the line start."""
    nul: NulPlacement | None = None
    recoverable: tuple[int, int] | None = None
    """A complete record found after a damaged prefix, relative to the line start."""
    truncated: bool = False
    """The damaged bytes are a record cut off before its end (a torn write)."""
    json_kind: str | None = None
    """For a line that is valid JSON but not an object: what it is ("array", "null"...)."""
    blanks: int = 0
    """For a run of junk: how many of its lines are blank (those amid the junk)."""

    @property
    def last_row(self) -> int:
        return self.row + self.rows - 1

    @property
    def run_kind(self) -> tuple[LineIssue, bool, str | None] | None:
        """What runs of lines like this one are, if such lines make runs: blank lines;
        junk (a whole line that is no JSON object and holds no record); records cut
        off; JSON values of one kind."""
        if self.issue is LineIssue.BLANK:
            return BLANK_RUN
        if (
            self.issue is LineIssue.UNPARSABLE
            and self.span == (0, self.length)
            and self.recoverable is None
        ):
            return (LineIssue.UNPARSABLE, self.truncated, self.json_kind)
        return None

    def continued_by(self, other: LineFinding) -> bool:
        """Whether `other`, the finding after this one, carries on its run."""
        kind = self.run_kind
        return kind is not None and other.row == self.row + self.rows and other.run_kind == kind

    def bridged_by(self, blank: LineFinding, other: LineFinding) -> bool:
        """Whether `other` carries on this finding's run of junk past `blank`, a run of
        blank lines between them: blank lines amid junk are part of it, so that lines
        of junk and blank lines in turn are one finding, not one per line."""
        return (
            self.run_kind == JUNK_RUN
            and blank.issue is LineIssue.BLANK
            and blank.row == self.row + self.rows
            and other.row == blank.row + blank.rows
            and other.run_kind == JUNK_RUN
        )

    def absorb(self, other: LineFinding) -> None:
        """Take in `other`, which carries on this finding's run."""
        self.rows += other.rows
        if self.issue is not LineIssue.BLANK:
            self.blanks += other.rows if other.issue is LineIssue.BLANK else other.blanks
        self.tail = other.offset + other.tail - self.offset
        self.length = other.offset + other.length - self.offset
        if self.span is not None:
            self.span = (0, self.length)

    def last_line_apart(self, terminator: int) -> LineFinding:
        """Split the last line off a run (`terminator`: the length of the line break
        before it) and return it as a finding of its own."""
        start = self.offset + self.tail
        length = self.offset + self.length - start
        last = LineFinding(
            self.issue,
            self.last_row,
            start,
            length,
            detail=self.detail,
            span=None if self.span is None else (0, length),
            truncated=self.truncated,
            json_kind=self.json_kind,
        )
        self.rows -= 1
        self.length = start - terminator - self.offset
        self.tail = 0  # (not kept: a run is split once, at its end)
        if self.span is not None:
            self.span = (0, self.length)
        return last


def add_finding(findings: list[LineFinding], finding: LineFinding, *, bridge: bool = True) -> None:
    """Append `finding`, the one after the last of `findings`; one that carries on a run
    of blank lines or of junk joins it, and with `bridge` one that carries on a run of
    junk past blank lines takes them in too."""
    if findings:
        last = findings[-1]
        if last.continued_by(finding):
            last.absorb(finding)
            return
        if bridge and len(findings) > 1 and findings[-2].bridged_by(last, finding):
            findings.pop()
            run = findings[-1]
            run.absorb(last)
            run.absorb(finding)
            return
    findings.append(finding)


class SplitRecord(Struct):
    """A record recovered by the slow path, with its byte span inside the line."""

    value: dict[str, Any]
    start: int
    end: int


BLANK_RUN: Final = (LineIssue.BLANK, False, None)
"""The run kind of blank lines."""
JUNK_RUN: Final = (LineIssue.UNPARSABLE, False, None)
"""The run kind of junk: lines that are no JSON object, nor a record cut off, nor a
JSON value."""


class SlowLine(Struct):
    """The slow-path classification of one line body."""

    records: list[SplitRecord] = field(default_factory=list)
    findings: list[tuple[LineIssue, dict[str, Any]]] = field(default_factory=list)
    damaged: tuple[int, int] | None = None
    """Bytes that belong to no record (a torn or unparsable part)."""
    damaged_reason: str = ""
    damaged_truncated: bool = False
    json_kind: str | None = None
    recoverable: tuple[int, int] | None = None


def _parse_error(data: bytes, error: str | None = None) -> tuple[str, bool]:
    """Why `data` does not parse, and whether it is a record cut off before its end.

    `error` is what `jsonutil.loads` said about `data`, if it was asked already.
    """
    if _first_byte(data) == b"{" and jsonutil.is_truncated_object(jsonutil.decode_text(data)):
        return "truncated: the record stops mid-value", True
    invalid = _invalid_utf8_at(data)
    if invalid is not None:
        return f"invalid UTF-8 at byte {invalid + 1}", False
    refused = jsonutil.refusal(data)
    if refused is not None:
        message, position = refused
        if not any(word in message for word in _GIVES_UP):
            return _short_reason(message, position, len(data)), False
        if error is None:  # orjson stops at 1,024 levels: the iterative parser goes on
            try:
                jsonutil.loads(data)
            except ValueError as deep:
                error = str(deep)
        if error is not None:
            return error, False
    return "not a JSON object", False


_GIVES_UP: Final = ("depth", "allocate")
"""orjson refusals that say where it stopped, not what is wrong (deep nesting)."""
_NON_SPACE: Final = re.compile(rb"\S")
"""The bytes `bytes.strip()` keeps (all but ASCII whitespace)."""
_UTF8_PIECE: Final = 1 << 20


def _first_byte(data: bytes) -> bytes:
    """The first byte that is not whitespace (b"" if none), found without copying."""
    found = _NON_SPACE.search(data)
    return b"" if found is None else data[found.start() : found.start() + 1]


def _stripped_end(data: bytes) -> int:
    """`len(data.rstrip())`, without the copy rstrip makes of a huge line."""
    end = len(data)
    while end:
        piece = data[max(0, end - 4096) : end]
        kept = len(piece.rstrip())
        if kept:
            return end - len(piece) + kept
        end -= len(piece)
    return 0


def _invalid_utf8_at(data: bytes) -> int | None:
    """The offset of the first byte that is not UTF-8, decoding a MiB at a time (a
    whole huge line decoded at once would take up to four times its size)."""
    if data.isascii():
        return None
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    for start in range(0, len(data), _UTF8_PIECE):
        held = len(decoder.getstate()[0])
        last = start + _UTF8_PIECE >= len(data)
        try:
            decoder.decode(view[start : start + _UTF8_PIECE], final=last)
        except UnicodeDecodeError as exc:
            return start - held + exc.start
    return None


def _short_reason(message: str, pos: int, size: int) -> str:
    return f"{message} at column {pos + 1}" if 0 <= pos < size else message


def classify_line(body: bytes) -> SlowLine:
    """Classify a line body (terminator removed) that the fast path could not decode."""
    result = _classify(body)
    if result.records or result.damaged is None:
        return result
    for issue, facts in result.findings:
        if issue is LineIssue.NUL and facts.get("span") is not None:
            # NULs around bytes that hold no record are not a strippable run: the whole
            # line is damaged.
            result.findings.remove((issue, facts))
            result.damaged = (len(BOM) if body.startswith(BOM) else 0, len(body))
            result.damaged_reason = f"raw NUL bytes; without them, {result.damaged_reason}"
            result.json_kind = None
            break
    return result


def _classify(body: bytes) -> SlowLine:
    result = SlowLine()
    start, end = 0, len(body)
    if body.startswith(BOM):
        result.findings.append((LineIssue.BOM, {}))
        start = len(BOM)
    if NUL in body[start:end]:
        inner = body[start:end]
        stripped = inner.strip(NUL)
        if not stripped:
            result.findings.append((LineIssue.NUL, {"nul": NulPlacement.ONLY}))
            return result
        lead = len(inner) - len(inner.lstrip(NUL))
        trail = len(inner) - len(inner.rstrip(NUL))
        if NUL in stripped:
            result.damaged = (start, end)
            result.damaged_reason = "raw NUL bytes inside the record"
            return result
        placement = (
            NulPlacement.AROUND
            if lead and trail
            else NulPlacement.LEADING
            if lead
            else NulPlacement.TRAILING
        )
        start, end = start + lead, end - trail
        result.findings.append((LineIssue.NUL, {"nul": placement, "span": (start, end)}))
    content = body[start:end]
    if not content or content.isspace():
        result.findings.append((LineIssue.BLANK, {}))
        return result
    if len(content) < 64 and content.strip() == b"undefined":
        result.findings.append((LineIssue.UNDEFINED, {}))
        return result
    error = None
    try:
        value: Any = jsonutil.loads(content)
    except ValueError as exc:
        value, error = _NOT_PARSED, str(exc)
    if value is not _NOT_PARSED:
        if isinstance(value, dict):
            result.records.append(SplitRecord(value, start, end))
        else:
            result.damaged = (start, end)
            result.json_kind = _json_kind(value)
            result.damaged_reason = f"a JSON {result.json_kind}, not an object"
        return result
    _split_glued(content, start, result, error)
    return result


_NOT_PARSED = object()


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


def _split_glued(content: bytes, base: int, result: SlowLine, error: str | None) -> None:
    """Recover the JSON objects at the start of a line that does not parse as one
    (`error`: why it does not)."""
    if _first_byte(content) != b"{":
        # No object starts the line: all of it is damaged (and a huge line is not decoded).
        _damaged_from(content, base, 0, result, error)
        return
    text = jsonutil.decode_text(content)
    values, stop = jsonutil.split_values(text)
    objects: list[tuple[int, int, dict[str, Any]]] = []
    for char_start, char_end, value in values:
        if not isinstance(value, dict):
            stop = char_start
            break
        objects.append((char_start, char_end, value))
    # Character offsets → byte offsets (the text round-trips to the same bytes).
    byte_at = _ByteOffsets(text)
    for char_start, char_end, value in objects:
        result.records.append(
            SplitRecord(value, base + byte_at(char_start), base + byte_at(char_end))
        )
    if stop < len(text):
        _damaged_from(content, base, byte_at(stop), result, None if objects else error)
    if len(result.records) >= 2 or (result.records and result.damaged is not None):
        result.findings.append((LineIssue.GLUED, {}))


def _damaged_from(
    content: bytes, base: int, start: int, result: SlowLine, error: str | None = None
) -> None:
    """Record that `content` is damaged from byte `start` on, and any complete record
    that ends it (`error`: why the damaged bytes do not parse, if known)."""
    damaged_start = base + start
    result.damaged = (damaged_start, base + len(content))
    tail = content[start:] if start else content
    result.damaged_reason, result.damaged_truncated = _parse_error(tail, error)
    recovered = _recoverable_tail(tail)
    if recovered is not None:
        result.recoverable = (damaged_start + recovered[0], damaged_start + recovered[1])


RECOVERY_BUDGET: Final = 4
"""How many times the damaged bytes' length the search for a complete record may parse."""


def _recoverable_tail(tail: bytes) -> tuple[int, int] | None:
    """A complete object that ends the damaged bytes: a partial line followed by a full one.

    Each `{"` is tried in turn; the search gives up once it has parsed a few times the
    line's length, so that a long torn record full of nested objects stays linear.
    """
    end = _stripped_end(tail)
    budget = RECOVERY_BUDGET * end
    pos = tail.find(b'{"', 1)
    while pos != -1 and budget > 0:
        budget -= end - pos
        try:
            value = jsonutil.loads(tail[pos:end])
        except (ValueError, RecursionError):
            pos = tail.find(b'{"', pos + 1)
            continue
        if isinstance(value, dict):
            return pos, end
        return None
    return None


class _ByteOffsets:
    """Maps character offsets in decoded text back to byte offsets."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._ascii = text.isascii()

    def __call__(self, char_index: int) -> int:
        if self._ascii:
            return char_index
        return len(jsonutil.encode_text(self._text[:char_index]))


_STRUCTURE: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[][{}]|"')
"""A JSON string, a bracket, or a quote that opens a string the line does not close."""


class SpreadRecord:
    """A JSON object begun on a line that does not close it, followed line by line: a
    record spread over several lines (pretty-printed, or broken where JSON allows
    whitespace). Strings never cross a line break in JSON text, so each line is looked
    at on its own, only its brackets counted; the joined lines are parsed once closed."""

    __slots__ = ("closes", "depth", "offset", "row")

    def __init__(self, row: int, offset: int) -> None:
        self.row = row
        self.offset = offset
        """Where its first line starts."""
        self.depth = 0
        self.closes: bool | None = None
        """Whether it closes into a record, once that was looked ahead for."""

    @staticmethod
    def begins(body: bytes) -> bool:
        """Whether a line that does not parse may begin a spread record: it starts with
        `{`, at its first byte (a line of a pretty-printed record that begins with one
        is indented; one that begins at the left edge starts the next record)."""
        return body[:1] == b"{"

    def follow(self, body: bytes) -> bool | None:
        """Take the next line: True once the object closes at its end, None while it
        goes on, False when it cannot be one object spread over the lines so far (a
        bracket too many, bytes after the close, a string the line leaves open)."""
        depth = self.depth
        for match in _STRUCTURE.finditer(body):
            token = match.group()
            first = token[0]
            if first == 0x22:  # '"'
                if len(token) == 1:
                    return False
                continue
            depth += 1 if first in b"{[" else -1
            if depth <= 0:
                return depth == 0 and not body[match.end() :].strip()
        self.depth = depth
        return None if depth > 0 else False


SPREAD_DEPTH: Final = 1024
"""Levels of nesting past which a record read ahead for is taken for none (as deep as
orjson parses; no agent writes records nested so deep)."""


def spread_ends(depth: int, lines: Iterable[tuple[int, int, bytes]]) -> tuple[dict[int, int], int]:
    """Where the records that may be spread over `lines` close, read on in one pass: the
    one open before them (`depth` brackets deep, keyed -1) and one begun on each line of
    them that `SpreadRecord.begins` (keyed by its line), each to the end of the line
    where its brackets close with nothing after them (its key → that end); a record
    whose brackets go wrong, that nests deeper than `SPREAD_DEPTH`, or that a string
    left open or the end of the lines cuts off, does not close. A line
    that begins with `{` inside a record spread over lines may begin a record or carry
    on the one open (a nested object broken onto a line of its own, as `indent=0`
    writes it): which, the records that close tell.

    `lines`: (line number, offset of the end of its body, body). Returns the ends found
    and the end of the last line read, by which every record followed is decided."""
    # (key, depth before its first bracket, deepest depth since), depths rising
    open_records = [[-1, 0, depth]]
    ends: dict[int, int] = {}
    read_to = -1
    for row, end, body in lines:
        read_to = end
        if SpreadRecord.begins(body):
            open_records.append([row, depth, depth])
        for match in _STRUCTURE.finditer(body):
            token = match.group()
            if token[0] == 0x22:  # '"'
                if len(token) == 1:
                    return ends, read_to
                continue
            if token[0] in b"{[":
                depth += 1
                top = open_records[-1]
                top[2] = max(top[2], depth)
                continue
            depth -= 1
            key, base, deepest = open_records[-1]
            if depth == base:
                open_records.pop()
                if not body[match.end() :].strip() and deepest - base <= SPREAD_DEPTH:
                    ends[key] = end
                if not open_records:
                    return ends, read_to
                parent = open_records[-1]
                parent[2] = max(parent[2], deepest)
    return ends, read_to


class LineReport(Struct):
    """Line-level facts of one file: everything the line rules need."""

    findings: list[LineFinding] = field(default_factory=list)
    crlf_rows: array[int] = field(default_factory=lambda: array("I"))
    line_count: int = 0
    size: int = 0
    final_newline: bool = True
    last_row: int = 0
    """Physical row of the last non-blank line (0 for an empty file)."""
    last_row_parsed: bool = True
    control_bytes: int = 0
    """Raw control bytes (other than tab, CR, LF and NUL) in lines that do not parse: no
    JSON text holds one, and binary data holds many."""
    foreign: str | None = None
    """What a line that does not parse shows the file to be (see `foreign_data`)."""
    spread_open: bool = False
    """The lines read end inside a record begun on a line that does not close it, which
    the lines after them may carry on."""

    def extend(self, other: LineReport, row_offset: int, byte_shift: int = 0) -> None:
        """Append the facts of the lines that follow, read separately (from bytes that
        lie `byte_shift` further on in this file); a run of lines the two share becomes
        one finding."""
        if not other.line_count:
            return
        findings = self.findings
        for finding in other.findings:
            finding.row += row_offset
            finding.offset += byte_shift
            add_finding(findings, finding)
        self.crlf_rows.extend(array("I", [row + row_offset for row in other.crlf_rows]))
        self.line_count += other.line_count
        self.size += other.size
        self.control_bytes += other.control_bytes
        self.foreign = self.foreign or other.foreign
        self.final_newline = other.final_newline
        self.spread_open = other.spread_open
        if other.last_row:
            self.last_row = other.last_row + row_offset


_SIGNATURES: Final = (
    (re.compile(rb"SQLite format 3\x00"), "an SQLite database"),
    (re.compile(rb"\x28\xb5\x2f\xfd"), "zstd-compressed data"),
    (re.compile(rb"\x1f\x8b"), "gzip-compressed data"),
    (re.compile(rb"BZh[1-9]\x31\x41\x59\x26\x53\x59"), "bzip2-compressed data"),
    (re.compile(rb"\xfd7zXZ\x00"), "xz-compressed data"),
    (re.compile(rb"\x04\x22\x4d\x18"), "lz4-compressed data"),
    (re.compile(rb"PK\x03\x04"), "a zip archive"),
    (re.compile(rb"7z\xbc\xaf\x27\x1c"), "a 7-zip archive"),
    (re.compile(rb"\x7fELF"), "an executable"),
    (re.compile(rb"%PDF-"), "a PDF document"),
    (re.compile(rb"\x89PNG\r\n\x1a\n"), "a PNG image"),
    (re.compile(rb"\xff\xd8\xff"), "a JPEG image"),
    (re.compile(rb"GIF8[79]a"), "a GIF image"),
    (re.compile(rb"\xff\xfe|\xfe\xff"), "UTF-16 text"),
    (re.compile(rb".{257}ustar(?:\x0000|  \x00)", re.DOTALL), "a tar archive"),
    (re.compile(rb"\x37\x7f\x06[\x82\x83]"), "an SQLite write-ahead log"),
    (re.compile(rb"\xd9\xd5\x05\xf9\x20\xa1\x63\xd7"), "an SQLite rollback journal"),
)
"""Leading bytes that no JSONL file starts with (JSON text starts with `{`, whitespace,
a UTF-8 byte-order mark, or the NUL bytes a crash leaves)."""
SIGNATURE_BYTES: Final = 512


_CONTROL: Final = bytes(b for b in range(32) if b not in b"\x00\t\n\r")
_CONTROL_PIECE: Final = 1 << 20


def control_bytes(data: bytes) -> int:
    """How many raw control bytes (other than tab, CR, LF and NUL) `data` holds; a huge
    line is looked at a MiB at a time, never copied whole."""
    count = 0
    for start in range(0, len(data), _CONTROL_PIECE):
        piece = data[start : start + _CONTROL_PIECE]
        count += len(piece) - len(piece.translate(None, _CONTROL))
    return count


_EMBEDDED: Final = ((b"SQLite format 3\x00", "SQLite database pages"),)
"""Byte strings no JSON text holds (a raw NUL) that only a binary format writes: the
first page of an SQLite database, also inside its journal or write-ahead log."""


def foreign_data(line: bytes) -> str | None:
    """What a line that does not parse holds, when it is a binary format's data."""
    if b"\x00" not in line:
        return None
    for needle, what in _EMBEDDED:
        if needle in line:
            return what
    return None


def binary_signature(head: bytes) -> str | None:
    """What a file is when its first bytes say it is not text JSONL, else None."""
    for pattern, what in _SIGNATURES:
        if pattern.match(head):
            return what
    return None


class FileInfo(Struct, frozen=True):
    path: Path
    size: int
    mtime_ns: int
    mode: int


def open_session(path: Path) -> tuple[BinaryIO, FileInfo]:
    """Open a session file for binary reading, refusing anything but a regular file.

    The file is opened non-blocking, so a FIFO given by mistake is refused instead of
    waiting for a writer.
    """
    fd, info = open_regular(path)
    # The file object owns the descriptor at once, and only it closes it: closed here
    # as well after an interrupt that came as the object was made, it was closed
    # twice, and the second close's EBADF hid the interrupt.
    handle = open(fd, "rb")  # noqa: SIM115  (returned to the caller)
    try:
        what = binary_signature(os.pread(fd, SIGNATURE_BYTES, 0))
        if what is not None:
            raise NotASessionFile(f"{path}: not a session file of a known format ({what})")
    except BaseException:
        handle.close()
        raise
    return handle, FileInfo(path, info.st_size, info.st_mtime_ns, info.st_mode)


def open_regular(path: Path) -> tuple[int, os.stat_result]:
    """A descriptor of `path` opened for reading, and its status; `InputError` unless it
    is a regular file (opened non-blocking: a FIFO is refused, not waited on)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{path}: is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


_COPY_RANGE: Final = 64 << 20
_NO_COPY_RANGE: Final = frozenset(
    {errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}
)
"""Why the kernel may refuse an in-kernel copy (an old kernel, another file system, a
special file): then bytes go through a buffer instead."""


class RecordSource:
    """Random access to record bytes by offset, for the few records a rule inspects closely.

    Views and diagnostics read through it long after the scan (an id, an excerpt, an
    edit's content), so it lives as long as they do. Its file is closed by `close()`, or
    when the source is freed: by the file object's own C finalizer, never by Python code,
    so that an interrupt can never land inside a finalizer (where Python would print it
    and lose it, or drop it unseen)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: io.FileIO | None = None

    def _open(self) -> io.FileIO:
        # Opened by its name as text: the finalizer's unclosed-file warning formats the
        # name, and a Path's repr is Python code, where a signal handler would run and
        # its KeyboardInterrupt be discarded by the finalizer.
        return io.FileIO(os.fspath(self.path), "r")

    def hold(self) -> RecordSource:
        """Open the file now, so that later reads still find its bytes once its name is
        gone (a decompressed copy, removed after the scan)."""
        if self._file is None:
            try:
                self._file = self._open()
            except OSError as exc:
                raise InputError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        return self

    def read(self, offset: int, length: int) -> bytes:
        try:
            file = self._file
            if file is None:
                file = self._file = self._open()
            fd = file.fileno()
            data = os.pread(fd, length, offset)
            while len(data) < length:
                more = os.pread(fd, length - len(data), offset + len(data))
                if not more:
                    break
                data += more
            return data
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read ({exc.strerror or exc})") from None

    def copy_to(self, target: int, start: int, end: int) -> int:
        """Append bytes `start` to `end` of the file to the open descriptor `target`, in
        the kernel where it can (no copy through Python); returns how many were copied
        (fewer only if the file got shorter)."""
        try:
            file = self._file
            if file is None:
                file = self._file = self._open()
            fd = file.fileno()
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        position = start
        while position < end:
            try:
                copied = os.copy_file_range(fd, target, min(end - position, _COPY_RANGE), position)
            except OSError as exc:
                if exc.errno not in _NO_COPY_RANGE:
                    raise
                break
            if not copied:
                return position - start
            position += copied
        while position < end:
            data = self.read(position, min(end - position, _COPY_RANGE))
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(target, view) :]
            position += len(data)
        return position - start

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RecordSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
