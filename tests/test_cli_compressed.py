"""`sessionfix scan` and `repair` on zstd-compressed sessions (`*.jsonl.zst`), through
typer's CliRunner: every real sample, compressed, reads and repairs as its text does."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import zstandard
from typer.testing import CliRunner

from sessionfix.cli import app
from sessionfix.containers import SessionFile

from .conftest import CORPUS, FIXTURES

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}
LONG_AGO = 1_700_000_000
CODEX_SAMPLES = sorted((CORPUS / "codex").glob("*.jsonl")) if CORPUS.is_dir() else []
OTHER_SAMPLES = [
    "openclaw/pi-mono__compact.v1.glued-line.jsonl",
    "openclaw/letta-trajectory__openclaw-cleanup.corrupt.jsonl",
    "claude/entireio-cli/37-995ebed6e4-2.full.jsonl",
]
CLEAN = FIXTURES / "SF008-trap-clean-file" / "input.jsonl"
CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


def pack(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(data)


def unpack(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()


def at_rest(path: Path) -> Path:
    os.utime(path, (LONG_AGO, LONG_AGO))
    return path


def pair(source: Path, folder: Path) -> tuple[Path, Path]:
    """A plain copy of `source` and a compressed one, in folders of their own under the
    same name (so that nothing but the compression tells them apart)."""
    plain_dir, packed_dir = folder / "plain", folder / "packed"
    plain_dir.mkdir(parents=True)
    packed_dir.mkdir(parents=True)
    plain = at_rest(Path(shutil.copyfile(source, plain_dir / source.name)))
    packed = packed_dir / (source.name + ".zst")
    packed.write_bytes(pack(source.read_bytes()))
    return plain, at_rest(packed)


def scanned(path: Path) -> tuple[int, list[dict[str, Any]]]:
    result = run("scan", "--output-format", "json", path)
    assert "Traceback" not in result.output
    diagnostics = json.loads(result.stdout)
    for diagnostic in diagnostics:
        assert diagnostic.pop("filename") == str(path)
        place = diagnostic["record"].pop("place")
        assert place == f"{path}:{diagnostic['location']['row']}:{diagnostic['location']['column']}"
    return result.exit_code, diagnostics


def test_the_codex_samples_are_there() -> None:
    assert len(CODEX_SAMPLES) == 7


@pytest.mark.parametrize(
    "sample",
    [*CODEX_SAMPLES, *(CORPUS / name for name in OTHER_SAMPLES)],
    ids=[*(p.name for p in CODEX_SAMPLES), *OTHER_SAMPLES],
)
def test_a_compressed_sample_scans_as_its_text(tmp_path: Path, sample: Path) -> None:
    plain, packed = pair(sample, tmp_path)
    code, expected = scanned(plain)
    assert scanned(packed) == (code, expected)
    assert code in (0, 1)


def test_compressed_codex_samples_exit_zero_when_clean_and_one_with_problems(
    tmp_path: Path,
) -> None:
    codes = {}
    for sample in CODEX_SAMPLES:
        packed = tmp_path / (sample.name + ".zst")
        packed.write_bytes(pack(sample.read_bytes()))
        codes[sample.name] = run("scan", packed).exit_code
    assert codes["session-doctor__current-response-items.jsonl"] == 0
    assert codes["session-doctor__current-response-item-ambiguities.jsonl"] == 1
    assert set(codes.values()) == {0, 1}


@pytest.mark.parametrize(
    "sample",
    [
        CORPUS / "codex" / "session-doctor__current-response-item-ambiguities.jsonl",
        CORPUS / "codex" / "session-doctor__basic-session.jsonl",
        CORPUS / "openclaw" / "pi-mono__compact.v1.glued-line.jsonl",
        CORPUS / "claude" / "entireio-cli" / "37-995ebed6e4-2.full.jsonl",
    ],
    ids=lambda path: path.name,
)
def test_repair_of_a_compressed_sample_is_the_repair_of_its_text(
    tmp_path: Path, sample: Path
) -> None:
    plain, packed = pair(sample, tmp_path)
    expected = run("repair", "--unsafe-fixes", "-o", tmp_path / "plain.jsonl", plain)
    assert expected.exit_code in (0, 1)
    repaired = (tmp_path / "plain.jsonl").read_bytes()
    assert repaired != sample.read_bytes()

    to_plain = run("repair", "--unsafe-fixes", "-o", tmp_path / "out.jsonl", packed)
    assert to_plain.exit_code == expected.exit_code
    assert (tmp_path / "out.jsonl").read_bytes() == repaired

    to_packed = run("repair", "--unsafe-fixes", "-o", tmp_path / "out.jsonl.zst", packed)
    assert to_packed.exit_code == expected.exit_code
    assert unpack((tmp_path / "out.jsonl.zst").read_bytes()) == repaired

    original = packed.read_bytes()
    in_place = run("repair", "--unsafe-fixes", "--in-place", packed)
    assert in_place.exit_code == expected.exit_code, in_place.output
    assert unpack(packed.read_bytes()) == repaired
    [backup] = [p for p in packed.parent.iterdir() if p != packed]
    assert backup.name.startswith(packed.name + ".sessionfix-bak-")
    assert backup.read_bytes() == original


def test_diff_of_a_compressed_session_is_the_diff_of_its_text(tmp_path: Path) -> None:
    plain, packed = pair(CLONES, tmp_path)
    before = packed.read_bytes()
    expected = run("repair", "--diff", plain)
    result = run("repair", "--diff", packed)
    assert result.exit_code == expected.exit_code == 1
    assert result.stdout == expected.stdout.replace(str(plain), str(packed))
    assert result.stdout.startswith(f"--- a/{packed}\n+++ b/{packed}\n@@ -")
    assert packed.read_bytes() == before


def test_exit_codes_of_compressed_sessions(tmp_path: Path) -> None:
    clean = tmp_path / "clean.jsonl.zst"
    clean.write_bytes(pack(CLEAN.read_bytes()))
    problems = tmp_path / "problems.jsonl.zst"
    problems.write_bytes(pack(CLONES.read_bytes()))
    for path in (clean, problems):
        at_rest(path)
    assert run("scan", clean).exit_code == 0
    assert run("scan", problems).exit_code == 1
    assert run("repair", "--diff", clean).exit_code == 0
    assert run("repair", "--in-place", clean).exit_code == 0
    assert run("repair", "--exit-non-zero-on-fix", "--in-place", problems).exit_code == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(pack(CLONES.read_bytes())[:-20], "truncated", id="truncated"),
        pytest.param(CLONES.read_bytes(), "Unknown frame descriptor", id="plain-text"),
        pytest.param(b"\x28\xb5\x2f\xfd" + bytes(40), "not valid zstd data", id="garbage"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["scan"],
        ["repair", "--diff"],
        ["repair", "--in-place"],
        ["repair", "-o", "{out}"],
        ["repair", "-o", "-"],
    ],
    ids=["scan", "diff", "in-place", "output", "stdout"],
)
def test_bad_compressed_data_is_one_line_and_exit_two(
    tmp_path: Path, content: bytes, reason: str, command: list[str]
) -> None:
    session = tmp_path / "s.jsonl.zst"
    session.write_bytes(content)
    at_rest(session)
    out = tmp_path / "out.jsonl"
    result = run(*(part.format(out=out) for part in command), session)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("sessionfix: error")]
    assert len(errors) == 1, result.stderr
    assert f"{session}: not valid zstd data (" in errors[0]
    assert reason in errors[0]
    assert "{" not in result.stdout  # no session bytes, not even to standard output
    assert session.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl.zst"]


def test_a_folder_scan_reads_the_plain_session_not_its_compressed_leftover(
    tmp_path: Path,
) -> None:
    sample = CORPUS / "codex" / "session-doctor__basic-session.jsonl"
    shutil.copyfile(sample, tmp_path / "rollout-a.jsonl")
    (tmp_path / "rollout-a.jsonl.zst").write_bytes(b"not even zstd")
    (tmp_path / "rollout-b.jsonl.zst").write_bytes(pack(sample.read_bytes()))
    result = run("scan", "--output-format", "json", tmp_path)
    assert result.exit_code == 1
    files = {d["filename"] for d in json.loads(result.stdout)}
    assert files == {str(tmp_path / "rollout-a.jsonl"), str(tmp_path / "rollout-b.jsonl.zst")}
    assert "Scanned 2 files" in result.stderr


def test_restore_puts_back_the_compressed_original(tmp_path: Path) -> None:
    _, packed = pair(CLONES, tmp_path)
    original = packed.read_bytes()
    assert run("repair", "--in-place", packed).exit_code == 0
    assert packed.read_bytes() != original
    restored = run("restore", packed)
    assert restored.exit_code == 0, restored.output
    assert packed.read_bytes() == original


def test_a_repair_goes_into_a_file_through_the_file_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In place and to `-o`, plain or compressed, the repaired text takes the file's place
    by the session file container's write protocol (compressed there when the name says
    so), as a store's session goes back through the store's."""
    taken: list[Path] = []
    published: list[Path] = []
    take_back, publish = SessionFile.take_back, SessionFile.publish

    def taking_back(self: SessionFile, *args: Any, **kw: Any) -> Any:
        taken.append(self.path)
        return take_back(self, *args, **kw)

    def publishing(self: SessionFile, *args: Any, **kw: Any) -> Any:
        published.append(self.path)
        return publish(self, *args, **kw)

    monkeypatch.setattr(SessionFile, "take_back", taking_back)
    monkeypatch.setattr(SessionFile, "publish", publishing)
    plain, packed = pair(CLONES, tmp_path)
    outputs = [tmp_path / "out.jsonl", tmp_path / "out.jsonl.zst"]
    for source, output in zip((plain, packed), outputs, strict=True):
        assert run("repair", "-o", output, source).exit_code == 0
    for source in (plain, packed):
        assert run("repair", "--in-place", "--jobs", "1", source).exit_code == 0
    assert published == outputs
    assert taken == [plain, packed]
    assert unpack(outputs[1].read_bytes()) == outputs[0].read_bytes() == plain.read_bytes()
    assert unpack(packed.read_bytes()) == plain.read_bytes()
