"""Compressed sessions (`*.jsonl.zst`, as Codex stores rollouts idle for a week), read
and repaired through the library: decompressed by streaming into a private copy that is
gone afterwards, and written back compressed exactly when the name says so."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import zstandard

from sessionfix import Settings, check_file, containers
from sessionfix.discovery import discover
from sessionfix.errors import InputError, NotASessionFile
from sessionfix.read.compressed import session_text
from sessionfix.repair.preview import preview_repair
from sessionfix.repair.targets import repair_in_place, repair_to

from .conftest import FIXTURES

SETTINGS = Settings(quiescence=0.0)
CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
CLEAN = FIXTURES / "SF008-trap-clean-file" / "input.jsonl"
LONG_AGO = 1_700_000_000


def pack(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data)


def unpack(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()


def compressed_copy(source: Path, target: Path) -> Path:
    target.write_bytes(pack(source.read_bytes()))
    os.utime(target, (LONG_AGO, LONG_AGO))
    return target


def plain_copy(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    os.utime(target, (LONG_AGO, LONG_AGO))
    return target


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$TMPDIR for the run: where the decompressed copies go (and must not stay)."""
    folder = tmp_path / "tmpdir"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return folder


def test_session_text_is_a_private_copy_removed_afterwards(
    tmp_path: Path, private_tmp: Path
) -> None:
    data = CLONES.read_bytes()
    packed = compressed_copy(CLONES, tmp_path / "rollout.jsonl.zst")
    with session_text(packed) as text:
        assert text.read_bytes() == data
        assert text.name == "rollout.jsonl"
        assert text.is_relative_to(private_tmp)
        assert stat.S_IMODE(text.stat().st_mode) == 0o600
        assert stat.S_IMODE(text.parent.stat().st_mode) == 0o700
    assert not text.exists()
    assert list(private_tmp.iterdir()) == []


def test_a_plain_session_is_read_where_it_is(tmp_path: Path, private_tmp: Path) -> None:
    session = plain_copy(CLONES, tmp_path / "s.jsonl")
    with session_text(session) as text:
        assert text == session
    assert list(private_tmp.iterdir()) == []


def test_several_frames_are_one_text(tmp_path: Path, private_tmp: Path) -> None:
    data = CLONES.read_bytes()
    half = len(data) // 2
    packed = tmp_path / "s.jsonl.zst"
    packed.write_bytes(pack(data[:half]) + pack(data[half:]))
    with session_text(packed) as text:
        assert text.read_bytes() == data


_PEAK = """
import sys
from pathlib import Path
from sessionfix.read.compressed import session_text

def peak():
    # The high-water mark of this process's own memory (ru_maxrss would carry over
    # the peak of the process that started it).
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")

before = peak()
with session_text(Path(sys.argv[1])) as text:
    size = text.stat().st_size
print(size, peak() - before)
"""


def test_a_multi_megabyte_session_is_decompressed_by_streaming(
    tmp_path: Path, private_tmp: Path
) -> None:
    """A 37 MiB generated rollout (one frame, written by streaming) reads as the same
    text, without holding it whole: peak memory grows by far less than its size."""
    lines = [
        b'{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"x",'
        b'"timestamp":"2026-01-01T00:00:00Z","cwd":"/w","originator":"codex_cli_rs",'
        b'"cli_version":"0.137.0"}}\n'
    ]
    for k in range(120_000):
        text = f"message {k} " + "lorem ipsum dolor sit amet " * 6
        lines.append(
            b'{"timestamp":"2026-01-01T00:00:01Z","type":"response_item","payload":'
            b'{"type":"message","role":"user","content":[{"type":"input_text","text":"'
            + text.encode()
            + b'"}]}}\n'
        )
    plain = tmp_path / "big.jsonl"
    plain.write_bytes(b"".join(lines))
    del lines
    size = plain.stat().st_size
    assert size > 32 << 20
    packed = tmp_path / "big.jsonl.zst"
    with open(plain, "rb") as source, open(packed, "wb") as out:
        zstandard.ZstdCompressor(level=3, write_checksum=True).copy_stream(source, out)
    assert packed.stat().st_size < size // 10
    # Measured in a fresh process, whose peak so far is only its imports.
    measured = subprocess.run(
        [sys.executable, "-c", _PEAK, str(packed)], capture_output=True, text=True, check=True
    )
    copied, grown = map(int, measured.stdout.split())
    assert copied == size
    assert grown < size // 4
    with session_text(packed) as text:
        assert text.stat().st_size == size
        with open(text, "rb") as copy, open(plain, "rb") as original:
            while block := original.read(1 << 20):
                assert copy.read(1 << 20) == block
    assert check_file(packed, SETTINGS) == check_file(plain, SETTINGS)
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(lambda data: pack(data)[:-7], "truncated", id="truncated"),
        pytest.param(lambda data: pack(data)[:3], "truncated", id="cut-in-header"),
        pytest.param(lambda data: data, "Unknown frame descriptor", id="not-zstd"),
        pytest.param(lambda data: b"", "the file is empty", id="empty"),
        pytest.param(
            lambda data: pack(data)[:-9] + bytes([pack(data)[-9] ^ 0xFF]) + pack(data)[-8:],
            "not valid zstd data",
            id="corrupt",
        ),
    ],
)
def test_bad_compressed_data_is_one_clear_error_and_leaves_nothing(
    tmp_path: Path, private_tmp: Path, content: object, reason: str
) -> None:
    assert callable(content)
    packed = tmp_path / "s.jsonl.zst"
    packed.write_bytes(content(CLONES.read_bytes()))
    os.utime(packed, (LONG_AGO, LONG_AGO))
    before = packed.read_bytes()
    with pytest.raises(InputError) as caught:
        check_file(packed, SETTINGS)
    message = str(caught.value)
    assert message.startswith(f"{packed}: not valid zstd data (")
    assert reason in message
    assert "\n" not in message
    for attempt in (
        lambda: repair_to(packed, tmp_path / "out.jsonl", SETTINGS),
        lambda: repair_in_place(packed, SETTINGS),
    ):
        with pytest.raises(InputError):
            attempt()
    assert packed.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl.zst", "tmpdir"]
    assert list(private_tmp.iterdir()) == []


def test_errors_about_the_text_name_the_compressed_file(tmp_path: Path, private_tmp: Path) -> None:
    """Compressed bytes that are not a session are refused under the name given."""
    packed = tmp_path / "s.jsonl.zst"
    packed.write_bytes(pack(b"SQLite format 3\x00" + bytes(600)))
    with pytest.raises(NotASessionFile, match=r"^.*s\.jsonl\.zst: not a session file") as caught:
        check_file(packed, SETTINGS)
    assert str(private_tmp) not in str(caught.value)
    assert list(private_tmp.iterdir()) == []


def test_scan_of_a_compressed_session_equals_that_of_its_text(
    tmp_path: Path, private_tmp: Path
) -> None:
    plain = plain_copy(CLONES, tmp_path / "s.jsonl")
    packed = compressed_copy(CLONES, tmp_path / "p.jsonl.zst")
    found = check_file(packed, SETTINGS, filename="x")
    assert found
    assert found == check_file(plain, SETTINGS, filename="x")
    # The fixes' new content is read from the copy after it is gone from the folder.
    assert list(private_tmp.iterdir()) == []
    contents = [e.content for d in found if d.fix is not None for e in d.fix.edits]
    assert contents == [
        e.content for d in check_file(plain, SETTINGS) if d.fix for e in d.fix.edits
    ]


GLUED = FIXTURES / "SF001-glued-assistant-and-user" / "input.jsonl"


def test_a_compressed_session_is_read_as_lying_where_it_lies(
    tmp_path: Path, private_tmp: Path
) -> None:
    """Its text is read from a private copy, yet a compressed session in an OpenClaw
    sessions folder is OpenClaw's, as its plain text there is; a repair of it reports
    what is left as a check of it afterwards does."""
    folder = tmp_path / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    plain = plain_copy(GLUED, folder / "s.jsonl")
    packed = compressed_copy(GLUED, folder / "p.jsonl.zst")
    assert {d.format for d in check_file(plain, SETTINGS)} == {"openclaw"}
    assert [(d.code, d.row, d.format) for d in check_file(packed, SETTINGS)] == [
        (d.code, d.row, d.format) for d in check_file(plain, SETTINGS)
    ]
    result = repair_in_place(packed, SETTINGS, backup=False)
    assert result.format == "openclaw"
    assert result.remaining
    assert [(d.code, d.format) for d in result.remaining] == [
        (d.code, d.format) for d in check_file(packed, SETTINGS)
    ]


@pytest.mark.parametrize("at_rest", [True, False], ids=["at rest", "just written"])
def test_a_compressed_session_is_at_rest_when_its_file_is(
    tmp_path: Path, private_tmp: Path, at_rest: bool
) -> None:
    """How long the session has been at rest is the compressed file's, not that of its
    freshly decompressed copy: a torn last line is a write in progress, and its fix
    withheld, exactly as in the same session stored plain."""
    torn = FIXTURES / "SF002-codex-torn-last-line" / "input.jsonl"
    plain = plain_copy(torn, tmp_path / "s.jsonl")
    packed = compressed_copy(torn, tmp_path / "p.jsonl.zst")
    if not at_rest:
        os.utime(plain)
        os.utime(packed)
    settings = Settings(quiescence=60.0, select=("SF002",))
    found = check_file(packed, settings, filename="x")
    assert [d.fix is not None for d in found] == [at_rest]
    assert found == check_file(plain, settings, filename="x")


def test_repair_writes_compressed_exactly_when_the_output_name_ends_in_zst(
    tmp_path: Path, private_tmp: Path
) -> None:
    plain = plain_copy(CLONES, tmp_path / "s.jsonl")
    packed = compressed_copy(CLONES, tmp_path / "p.jsonl.zst")
    expected_result = repair_to(plain, tmp_path / "expected.jsonl", SETTINGS)
    expected = (tmp_path / "expected.jsonl").read_bytes()
    assert expected != CLONES.read_bytes()

    result = repair_to(packed, tmp_path / "out.jsonl", SETTINGS)
    assert (tmp_path / "out.jsonl").read_bytes() == expected
    assert result.path == packed
    assert result.output_size == expected_result.output_size == len(expected)
    assert result.input_size == expected_result.input_size

    repair_to(packed, tmp_path / "out.jsonl.zst", SETTINGS)
    written = (tmp_path / "out.jsonl.zst").read_bytes()
    assert unpack(written) == expected
    params = zstandard.get_frame_parameters(written)
    assert params.has_checksum

    repair_to(plain, tmp_path / "from-plain.jsonl.zst", SETTINGS)
    assert unpack((tmp_path / "from-plain.jsonl.zst").read_bytes()) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "expected.jsonl",
        "from-plain.jsonl.zst",
        "out.jsonl",
        "out.jsonl.zst",
        "p.jsonl.zst",
        "s.jsonl",
        "tmpdir",
    ]
    assert list(private_tmp.iterdir()) == []


def test_repair_output_keeps_the_mode_of_the_compressed_session(
    tmp_path: Path, private_tmp: Path
) -> None:
    packed = compressed_copy(CLONES, tmp_path / "p.jsonl.zst")
    packed.chmod(0o640)
    repair_to(packed, tmp_path / "out.jsonl", SETTINGS)
    repair_to(packed, tmp_path / "out.jsonl.zst", SETTINGS)
    assert stat.S_IMODE((tmp_path / "out.jsonl").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "out.jsonl.zst").stat().st_mode) == 0o640


def test_in_place_keeps_a_compressed_session_compressed_and_backs_up_its_bytes(
    tmp_path: Path, private_tmp: Path
) -> None:
    plain = plain_copy(CLONES, tmp_path / "s.jsonl")
    repair_in_place(plain, SETTINGS, backup=False)
    expected = plain.read_bytes()

    packed = compressed_copy(CLONES, tmp_path / "p.jsonl.zst")
    original = packed.read_bytes()
    result = repair_in_place(packed, SETTINGS)
    assert result.changed
    assert result.backup is not None
    assert result.backup.name.startswith("p.jsonl.zst.sessionfix-bak-")
    assert result.backup.read_bytes() == original
    written = packed.read_bytes()
    assert unpack(written) == expected
    assert zstandard.get_frame_parameters(written).has_checksum
    assert check_file(packed, SETTINGS) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["p.jsonl.zst", result.backup.name, "s.jsonl", "tmpdir"]
    )
    assert list(private_tmp.iterdir()) == []


def test_in_place_of_a_clean_compressed_session_writes_nothing(
    tmp_path: Path, private_tmp: Path
) -> None:
    packed = compressed_copy(CLEAN, tmp_path / "p.jsonl.zst")
    before = packed.stat()
    result = repair_in_place(packed, SETTINGS)
    assert not result.changed
    assert result.backup is None
    after = packed.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_preview_of_a_compressed_session_diffs_its_text(tmp_path: Path, private_tmp: Path) -> None:
    packed = compressed_copy(CLONES, tmp_path / "p.jsonl.zst")
    preview = preview_repair(packed, SETTINGS)
    try:
        assert preview.path == packed
        assert preview.input.read_bytes() == CLONES.read_bytes()
        assert preview.output is not None
    finally:
        preview.close()
    assert list(private_tmp.iterdir()) == []


def test_discovery_finds_compressed_sessions_unless_the_plain_one_is_beside(
    tmp_path: Path,
) -> None:
    for name in ("a.jsonl", "a.jsonl.zst", "b.jsonl.zst", "c.jsonl"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "notes.zst").write_bytes(b"")
    found = discover([tmp_path])
    assert [p.name for p in found.files] == ["a.jsonl", "b.jsonl.zst", "c.jsonl"]


def test_progress_counts_the_bytes_of_the_compressed_file(tmp_path: Path) -> None:
    """A run's total is the size of the files it reads: a compressed one's progress adds
    up to its own size, not to that of its text."""
    packed = compressed_copy(CLONES, tmp_path / "p.jsonl.zst")
    steps: list[int] = []
    check_file(packed, SETTINGS, progress=steps.append)
    assert sum(steps) == packed.stat().st_size
    assert all(step > 0 for step in steps)


def test_in_place_repair_that_takes_two_passes_stays_compressed(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second pass repairs the decompressed result again: what replaces the session
    is that pass's result, compressed."""
    source = FIXTURES / "SF401-orphan-sharing-an-id-with-a-kept-entry" / "input.jsonl"
    settings = Settings(quiescence=0.0, unsafe_fixes=True)
    plain = plain_copy(source, tmp_path / "s.jsonl")
    first = repair_in_place(plain, settings, backup=False)
    expected = plain.read_bytes()

    recompressed: list[Path] = []
    compress_over = containers._compress_over

    def spy(text: Path, packed: Path) -> None:
        recompressed.append(packed)
        compress_over(text, packed)

    monkeypatch.setattr(containers, "_compress_over", spy)
    packed = compressed_copy(source, tmp_path / "p.jsonl.zst")
    result = repair_in_place(packed, settings, backup=False)
    assert len(recompressed) == 1
    assert [d.code for d in result.applied] == [d.code for d in first.applied]
    assert unpack(packed.read_bytes()) == expected
    assert result.output_size == len(expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl.zst", "s.jsonl", "tmpdir"]
    assert list(private_tmp.iterdir()) == []


def test_discovery_skips_compressed_sibling_files(tmp_path: Path) -> None:
    """What is not a session beside sessions is not one compressed either."""
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "rollout-1.jsonl.zst").write_bytes(b"")
    (tmp_path / "history.jsonl.zst").write_bytes(b"")
    (tmp_path / "journal.jsonl.zst").write_bytes(b"")
    found = discover([tmp_path])
    assert [p.name for p in found.files] == ["rollout-1.jsonl.zst"]
    assert sorted(p.name for p in found.skipped) == ["history.jsonl.zst", "journal.jsonl.zst"]


def _newlines_packed(target: Path, count: int) -> Path:
    """A session header then `count` empty lines, compressed (runs of one byte shrink
    32,768 times: 64 MiB to about 2 KiB)."""
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    header = CLONES.read_bytes().split(b"\n")[0] + b"\n"
    block = b"\n" * (1 << 20)
    pieces = [compressor.compress(header)]
    for _ in range(count >> 20):
        pieces.append(compressor.compress(block))
    pieces.append(compressor.compress(b"\n" * (count & ((1 << 20) - 1))))
    pieces.append(compressor.flush())
    target.write_bytes(b"".join(pieces))
    os.utime(target, (LONG_AGO, LONG_AGO))
    return target


def test_a_tiny_file_of_megabytes_of_newlines_is_one_finding(
    tmp_path: Path, private_tmp: Path
) -> None:
    """A few hundred bytes holding 4 MiB of empty lines (it ran past 20 s): one finding,
    one edit, and the repair drops them."""
    packed = _newlines_packed(tmp_path / "s.jsonl.zst", 4 << 20)
    assert packed.stat().st_size < 1024
    [found] = check_file(packed, SETTINGS)
    assert (found.code, found.row, found.end_row) == ("SF007", 2, (4 << 20) + 1)
    assert found.fix is not None
    assert [(e.op.value, e.row, e.end_row) for e in found.fix.edits] == [
        ("delete", 2, (4 << 20) + 1)
    ]
    result = repair_to(packed, tmp_path / "out.jsonl", SETTINGS)
    assert result.output_size == len(CLONES.read_bytes().split(b"\n")[0]) + 1
    assert list(private_tmp.iterdir()) == []


def test_a_file_that_expands_past_the_limit_is_refused_as_it_streams(
    tmp_path: Path, private_tmp: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past 10,000 times its compressed size (and past 64 MiB), the text is refused as
    it is decompressed, before more of it is written: one line, exit 2, nothing left."""
    from sessionfix.cli import main
    from sessionfix.read.compressed import EXPANSION_FLOOR, expansion_limit
    from sessionfix.units import human_bytes

    packed = _newlines_packed(tmp_path / "s.jsonl.zst", EXPANSION_FLOOR + (1 << 20))
    assert expansion_limit(packed.stat().st_size) == EXPANSION_FLOOR
    before = packed.read_bytes()
    with pytest.raises(InputError, match=r"decompresses to more than 64\.0 MiB, over 10,000 times"):
        check_file(packed, SETTINGS)
    out = tmp_path / "out.jsonl"
    for argv in (
        ["check", str(packed)],
        ["repair", "-o", str(out), str(packed)],
        ["repair", "--in-place", "--quiescence", "0", str(packed)],
        ["repair", "--diff", str(packed)],
    ):
        assert main(argv) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert errors == [
            f"sessionfix: error: {packed}: not read: its zstd data decompresses to more than "
            f"64.0 MiB, over 10,000 times its {human_bytes(packed.stat().st_size)}"
        ]
    assert packed.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl.zst", "tmpdir"]
    assert list(private_tmp.iterdir()) == []
