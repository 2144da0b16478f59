"""Sessions stored zstd-compressed (`*.jsonl.zst`): Codex compresses rollouts idle for a week.

Everything else reads and writes plain JSONL by path and by offset (forked workers,
mmap, line offsets, in-kernel copies). So a compressed session is decompressed, by
streaming, into a private temporary copy (mode 0600, in a folder of its own under
`$TMPDIR`, under the session's own name without `.zst`), which is read in its place
and removed afterwards; a repair of it is compressed again as Codex writes it (zstd
level 3 with a content checksum).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final

from sessionfix.errors import InputError, SessionfixError, described
from sessionfix.read.reader import open_regular
from sessionfix.scratch import private_folder
from sessionfix.units import human_bytes

if TYPE_CHECKING:
    import zstandard

SUFFIX: Final = ".zst"
LEVEL: Final = 3
"""The compression level of Codex's own writer."""
READ_BYTES: Final = 512
"""Compressed bytes decompressed at a time: each step yields at most this times the
compression ratio (JSONL compresses 5 to 100 times; a run of one byte, in blocks of 128
KiB that take 4 bytes each, 32,768 times: 16 MiB), never the whole session."""
WRITE_BYTES: Final = 1 << 20
EXPANSION_LIMIT: Final = 10_000
"""How many times its compressed size a session may decompress to (past
`EXPANSION_FLOOR`). Real sessions compress 5 to 40 times; a rollout that repeats one
compacted history thousands of times, about 4,000 times; only runs of one byte (a
file of newlines) go past 10,000."""
EXPANSION_FLOOR: Final = 64 << 20
"""A session may always decompress to this much, whatever its compressed size."""


def is_compressed(path: Path | str) -> bool:
    """Whether `path` names a zstd-compressed session (by its name, as Codex does)."""
    return os.fspath(path).endswith(SUFFIX)


def plain_name(name: str) -> str:
    """The session's name without the compression suffix."""
    return name.removesuffix(SUFFIX)


def session_name(path: Path) -> Path:
    """The name and folder a session is read under: its own; a compressed one's name
    less `.zst`, in the folder it really lies in (its text is read from a private copy,
    whose folder says nothing of where the session lies, and a link to it is followed
    as a reader of a plain one follows it)."""
    if not is_compressed(path):
        return path
    return Path(os.path.realpath(path)).parent / (plain_name(path.name) or "session.jsonl")


@contextmanager
def session_text(
    path: Path, *, compressed: bool | None = None, name: str | None = None
) -> Iterator[Path]:
    """A path holding the session text of `path`: `path` itself when it is plain, else a
    private decompressed copy that lives as long as the block. `compressed` overrides
    what the name says; `name` is the copy's file name (by default the session's, less
    `.zst`: some formats read the session id from it). The copy carries the session's
    times, so that how long it has been at rest is the session's own (a torn last line is
    a write in progress only in a file written recently).

    An error raised in the block that names the copy is raised again naming `path`.
    Corrupt or truncated compressed data raises `InputError`.
    """
    if not (is_compressed(path) if compressed is None else compressed):
        yield path
        return
    with private_folder(f"{path}: cannot decompress it") as folder:
        copy = folder / (name or plain_name(path.name) or "session.jsonl")
        decompress(path, copy)
        try:
            st = os.stat(path)
            os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        except OSError as exc:
            raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        try:
            yield copy
        except SessionfixError as exc:
            exc.args = tuple(
                arg.replace(str(copy), str(path)) if isinstance(arg, str) else arg
                for arg in exc.args
            )
            raise


def decompress(path: Path, copy: Path) -> None:
    """Stream the zstd data of `path` into the new file `copy` (mode 0600); every frame
    must be complete and its checksum, if any, must match, and the text may not grow
    past `expansion_limit` of the compressed size (checked as it streams: a few bytes
    that expand to gigabytes of newlines are refused, not written out)."""
    import zstandard

    fd, info = open_regular(path)
    limit = expansion_limit(info.st_size)
    with os.fdopen(fd, "rb") as packed:
        try:
            out_fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise InputError(
                f"{path}: cannot decompress it into {copy.parent} ({described(exc)})"
            ) from None
        try:
            with os.fdopen(out_fd, "wb", buffering=WRITE_BYTES) as out:
                written = 0
                for piece in _frames(packed):
                    written += len(piece)
                    if written > limit:
                        raise InputError(
                            f"{path}: not read: its zstd data decompresses to more than "
                            f"{human_bytes(limit)}, over {EXPANSION_LIMIT:,} times its "
                            f"{human_bytes(info.st_size)}"
                        )
                    out.write(piece)
        except zstandard.ZstdError as exc:
            raise InputError(f"{path}: not valid zstd data ({_reason(exc)})") from None
        except OSError as exc:
            raise InputError(
                f"{path}: cannot decompress it into {copy.parent} ({described(exc)})"
            ) from None


def text_chunks(path: Path, piece: int = WRITE_BYTES) -> Iterator[bytes]:
    """The session text of `path`, a piece at a time: a compressed one decompressed as
    it is read, within `expansion_limit` (`InputError` past it, and for data that is
    not valid zstd); `OSError` where the file cannot be read."""
    import zstandard

    fd, info = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        if not is_compressed(path):
            while data := handle.read(piece):
                yield data
            return
        limit = expansion_limit(info.st_size)
        written = 0
        try:
            for data in _frames(handle):
                written += len(data)
                if written > limit:
                    raise InputError(
                        f"{path}: not read: its zstd data decompresses to more than "
                        f"{human_bytes(limit)}, over {EXPANSION_LIMIT:,} times its "
                        f"{human_bytes(info.st_size)}"
                    )
                yield data
        except zstandard.ZstdError as exc:
            raise InputError(f"{path}: not valid zstd data ({_reason(exc)})") from None


def expansion_limit(size: int) -> int:
    """The most a session of `size` compressed bytes may decompress to."""
    return max(EXPANSION_FLOOR, EXPANSION_LIMIT * size)


def _frames(packed: BinaryIO) -> Iterator[bytes]:
    """The decompressed bytes of a stream of zstd frames, a piece at a time."""
    import zstandard

    decompressor = zstandard.ZstdDecompressor()
    current = decompressor.decompressobj()
    begun = False
    """The current frame has been given bytes."""
    seen = False
    while data := packed.read(READ_BYTES):
        seen = True
        while data:
            begun = True
            out = current.decompress(data)
            if out:
                yield out
            if not current.eof:
                break
            data = current.unused_data
            current = decompressor.decompressobj()
            begun = False
    if not seen:
        raise zstandard.ZstdError("the file is empty")
    if begun:
        raise zstandard.ZstdError("truncated: the last frame stops before its end")


def _reason(error: zstandard.ZstdError) -> str:
    text = str(error)
    for prefix in ("zstd decompress error: ", "zstd decompressor error: "):
        text = text.removeprefix(prefix)
    return text


def compressor() -> zstandard.ZstdCompressor:
    """A compressor writing as Codex does: level 3, each frame with a content checksum."""
    import zstandard

    return zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)


def compressed_chunks(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """`chunks` compressed into one zstd frame, by streaming."""
    packer = compressor().compressobj()
    for chunk in chunks:
        out = packer.compress(chunk)
        if out:
            yield out
    yield packer.flush()


def compress_file(plain: Path, packed: Path, mode: int = 0o600, *, sync: bool = False) -> None:
    """Write `plain` compressed to the new file `packed`, with `mode` (synced if `sync`);
    on failure `packed` is gone."""
    fd = os.open(packed, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        # The file object is the descriptor's only owner (never closed twice).
        with open(fd, "wb", buffering=WRITE_BYTES) as out, open(plain, "rb") as source:
            with suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(mode))
            for chunk in compressed_chunks(iter(lambda: source.read(WRITE_BYTES), b"")):
                out.write(chunk)
            out.flush()
            if sync:
                os.fsync(out.fileno())
    except BaseException:
        with suppress(OSError):
            packed.unlink()
        raise


def scaled_progress(
    progress: Callable[[int], None] | None, path: Path, text: Path
) -> Callable[[int], None] | None:
    """`progress` in bytes of the file at `path` for bytes read of its text at `text`:
    a run's total counts the compressed sizes."""
    if progress is None or path == text:
        return progress
    try:
        stored, size = os.stat(path).st_size, os.stat(text).st_size
    except OSError:
        return progress
    done = reported = 0

    def scaled(count: int) -> None:
        nonlocal done, reported
        done += count
        now = done * stored // size if size else stored
        if now > reported:
            progress(now - reported)
            reported = now

    return scaled
