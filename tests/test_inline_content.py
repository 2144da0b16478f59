"""Inline media the provider refuses (SF604) and blank text blocks (SF605), beyond the
golden fixtures: sizes too large for a fixture, what a request may hold in all, reading
in parallel, what `context` shows the fix saves, and repairs that settle."""

from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessionfix import Settings, check_file, media
from sessionfix.context import context_after_repair, context_of
from sessionfix.formats.claude import decode as claude_decode
from sessionfix.repair.targets import repair_to
from sessionfix.scan import scanner as scanner_module

SESSION = "3f6a9c2e-1b4d-4e7f-8a0c-5d2e7f9b1c3a"
MIB = 1024 * 1024


def png(width: int, height: int, size: int = 0) -> str:
    """The base64 of a PNG of these dimensions, padded with a chunk of zeros to `size`
    bytes of file."""
    chunks = [(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))]
    chunks.append((b"IDAT", zlib.compress(b"\0" * 16)))
    data = b"\x89PNG\r\n\x1a\n"
    for kind, body in chunks:
        data += struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind))
    padding = max(0, size - len(data) - 24)
    data += struct.pack(">I", padding) + b"zeRo" + b"\0" * padding + b"\0" * 4
    data += struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    return base64.b64encode(data).decode()


def sized(encoded: int) -> str:
    """A 1000x800 PNG whose base64 text is exactly `encoded` bytes (a multiple of 4)."""
    text = png(1000, 800, encoded // 4 * 3)
    assert len(text) == encoded, (len(text), encoded)
    return text


def claude_session(path: Path, prompts: list[list[dict[str, Any]]]) -> Path:
    """A Claude Code session of these prompts, each answered."""
    lines = []
    parent = None
    for number, content in enumerate(prompts):
        for kind, message in (
            ("user", {"role": "user", "content": content}),
            (
                "assistant",
                {
                    "model": "claude-sonnet-4-5-20250929",
                    "id": f"msg_01Answer{number:017d}",
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"Answer {number}."}],
                    "stop_reason": "end_turn",
                },
            ),
        ):
            uuid = f"3f6a9c2e-0000-4000-8000-{len(lines) + 1:012d}"
            lines.append(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "type": kind,
                    "message": message,
                    "uuid": uuid,
                    "timestamp": f"2026-05-26T09:{len(lines) // 60:02d}:{len(lines) % 60:02d}.000Z",
                    "sessionId": SESSION,
                    "cwd": "/home/dev/app",
                    "version": "2.1.142",
                }
            )
            parent = uuid
    path.write_text("\n".join(json.dumps(line, separators=(",", ":")) for line in lines) + "\n")
    return path


def image(data: str, media_type: str = "image/png", kind: str = "image") -> dict[str, Any]:
    return {"type": kind, "source": {"type": "base64", "media_type": media_type, "data": data}}


def findings(path: Path, code: str, **options: Any) -> list[tuple[int, str, str]]:
    found = check_file(path, Settings(quiescence=0.0, **options))
    return [(d.row, d.severity.label, d.message) for d in found if d.code == code]


def test_an_image_over_5_mb_of_base64_is_refused_and_only_its_header_is_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic's API counts an image's base64 text: 5 MiB of it is the most (one at
    exactly that passes). Measuring either decodes a few header bytes, not the image."""
    decoded: list[int] = []
    original = binascii.a2b_base64

    def counting(data: bytes, *, strict_mode: bool = False) -> bytes:
        decoded.append(len(data))
        return original(data, strict_mode=strict_mode)

    monkeypatch.setattr(media.binascii, "a2b_base64", counting)
    over = claude_session(tmp_path / "over.jsonl", [[image(sized(5 * MIB + 4))]])
    at = claude_session(tmp_path / "at.jsonl", [[image(sized(5 * MIB))]])
    [(row, severity, message)] = findings(over, "SF604")
    assert (row, severity) == (1, "error")
    assert "5.0 MiB of base64, over the 5.0 MiB an image may have" in message
    assert findings(at, "SF604") == []
    assert sum(decoded) < 1000


def test_the_media_a_request_may_hold_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Media in context that come to more than a request may hold: the largest are
    reported, as many as must go for the rest to fit; a document alone over it too. Read
    in parallel byte ranges, the findings are the same."""
    limits = msgspec.structs.replace(claude_decode.ANTHROPIC_MEDIA_LIMITS, request=4000)
    monkeypatch.setattr(claude_decode, "ANTHROPIC_MEDIA_LIMITS", limits)
    pdf = base64.b64encode(b"%PDF-1.7\n" + b"\0" * 3300).decode()
    path = claude_session(
        tmp_path / "session.jsonl",
        [
            [image(sized(1600))],
            [image(sized(2000)), {"type": "text", "text": "and this"}],
            [image(sized(1200))],
            [image(pdf, "application/pdf", "document")],
        ],
    )
    found = findings(path, "SF604")
    assert [(row, severity) for row, severity, _ in found] == [(3, "error"), (7, "error")]
    assert "the inline media in context come to" in found[0][2]
    assert "application/pdf document" in found[1][2]
    assert "over the 3.9 KiB a request may have" in found[1][2]
    with monkeypatch.context() as patch:
        patch.setattr(scanner_module, "TASK_BYTES", 600)
        patch.setattr(scanner_module, "WORKER_MIN_BYTES", 1)
        assert findings(path, "SF604", jobs=2) == found


def test_context_shows_what_the_fix_saves(tmp_path: Path) -> None:
    """`context --after-repair --unsafe-fixes`: the refused image is no longer sent; the
    placeholder's text is, and the other image stays."""
    path = claude_session(
        tmp_path / "session.jsonl",
        [[image(png(9600, 720, 40_000))], [image(png(1200, 800, 20_000))]],
    )
    settings = Settings(quiescence=0.0, unsafe_fixes=True)
    now = context_of(path, settings)
    later = context_after_repair(path, settings, measured=now)
    assert (now.images, later.images) == (2, 1)
    assert now.image_bytes - later.image_bytes == len(png(9600, 720, 40_000))
    assert later.tokens < now.tokens
    assert later.file_bytes < now.file_bytes - 50_000


def test_a_repair_settles(tmp_path: Path) -> None:
    """Once repaired (unsafe fixes), a session holds neither finding, and a second repair
    changes nothing."""
    path = claude_session(
        tmp_path / "session.jsonl",
        [
            [image(png(9600, 720)), {"type": "text", "text": " \n"}],
            [{"type": "text", "text": ""}],
            [image(png(800, 600)), {"type": "text", "text": "fine"}],
        ],
    )
    settings = Settings(quiescence=0.0, unsafe_fixes=True)
    once, twice = tmp_path / "once.jsonl", tmp_path / "twice.jsonl"
    repair_to(path, once, settings)
    repair_to(once, twice, settings)
    assert twice.read_bytes() == once.read_bytes()
    assert findings(once, "SF604") == findings(once, "SF605") == []
    assert len(once.read_text().splitlines()) == 5


def test_an_openclaw_result_reports_its_whitespace_block_and_not_its_empty_one(
    tmp_path: Path,
) -> None:
    """OpenClaw leaves an empty text block of a tool result with an image out, and sends
    one of whitespace: the finding names that one alone; the repair removes both (what
    OpenClaw sends is then the image alone, as it was meant)."""
    folder = tmp_path / ".openclaw" / "agents" / "main" / "sessions"
    folder.mkdir(parents=True)
    sid = "8555a0a4-0b79-459d-939c-e17cdbbf4fe2"
    screenshot = {"type": "image", "data": png(1280, 800), "mimeType": "image/png"}
    blocks = [{"type": "text", "text": ""}, screenshot, {"type": "text", "text": "\t"}]
    call = {"type": "toolCall", "id": "c1", "name": "shot", "arguments": {}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Capture it."}]},
        {"role": "assistant", "content": [call], "stopReason": "toolUse"},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "shot", "content": blocks},
    ]
    lines: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-07-24T06:21:03.508Z"}
    ]
    for number, message in enumerate(messages, 1):
        lines.append(
            {
                "type": "message",
                "id": f"a{number}",
                "parentId": f"a{number - 1}" if number > 1 else None,
                "timestamp": f"2026-07-24T06:21:0{number}.000Z",
                "message": {**message, "isError": False} if number == 3 else message,
            }
        )
    path = folder / f"{sid}.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    [(row, severity, message)] = findings(path, "SF605")
    assert (row, severity) == (4, "error")
    assert "a text block that is whitespace only" in message
    repaired = folder / "repaired.jsonl"
    repair_to(path, repaired, Settings(quiescence=0.0))
    content = json.loads(repaired.read_text().splitlines()[3])["message"]["content"]
    assert content == [screenshot]


def test_the_screenshots_of_a_real_pi_session_are_measured_and_within_limits(
    corpus: Path,
) -> None:
    """The three PNG screenshots `read` returned in a real pi session: their sizes and
    dimensions as their IHDR headers say (read here by decoding the whole image), and
    within every limit, so nothing is reported."""
    from sessionfix.scan.scanner import read_session

    path = corpus / "openclaw" / "pi-mono__compact.v1.glued-line.jsonl"
    expected = []
    for line in path.read_bytes().splitlines():
        for part in line.split(b'{"type":"message"')[1:]:
            try:
                record = json.loads(b'{"type":"message"' + part)
            except ValueError:
                continue
            for block in record["message"].get("content") or []:
                if isinstance(block, dict) and block.get("type") == "image":
                    data = base64.b64decode(block["data"])
                    width, height = struct.unpack(">II", data[16:24])
                    expected.append((len(block["data"]), len(data), width, height))
    view = read_session(path).view
    found = [
        (block.encoded, block.decoded, block.width, block.height)
        for blocks in view.media.values()
        for block in blocks
    ]
    assert len(expected) == 3
    assert found == expected
    assert findings(path, "SF604") == []
