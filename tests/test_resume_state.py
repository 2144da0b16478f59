"""What a session resumes with, as the rules that guard it read it: signed thinking
(SF606) and the leaf a metadata entry moves (SF111), in the cases a golden fixture of
one format cannot show: one session read as pi's and as OpenClaw's, an OpenClaw leaf row
(which pi's own loader, the fixtures' oracle, does not know), and properties over
generated signatures."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sessionfix import Settings, check_file
from sessionfix.formats.common import signature_fault
from sessionfix.model.view import SignatureFault
from sessionfix.repair.targets import repair_to

SETTINGS = Settings(quiescence=0.0)
HEADER_ID = "7c3e9a51-0d2b-4f6e-8a91-3b5c7d9e1f20"
OPENCLAW_NAME = f"agents/main/sessions/{HEADER_ID}.jsonl"


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _header() -> dict[str, Any]:
    return {
        "type": "session",
        "version": 3,
        "id": HEADER_ID,
        "timestamp": "2026-07-24T06:21:03.000Z",
        "cwd": "/home/me/app",
    }


def _entry(entry_id: str, parent: str | None, second: int, **fields: Any) -> dict[str, Any]:
    stamp = f"2026-07-24T06:22:{second:02d}.000Z"
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp, **fields}


def _user(entry_id: str, parent: str | None, text: str, second: int) -> dict[str, Any]:
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    return _entry(entry_id, parent, second, message=message)


def _assistant(
    entry_id: str, parent: str, text: str, second: int, signature: str | None = None
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if signature is not None:
        content.append({"type": "thinking", "thinking": "", "thinkingSignature": signature})
    content.append({"type": "text", "text": text})
    message = {
        "role": "assistant",
        "content": content,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-opus-4-8",
        "stopReason": "stop",
    }
    return _entry(entry_id, parent, second, message=message)


def _session(tmp_path: Path, records: list[dict[str, Any]], name: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(map(_line, records)))
    return path


def _rows(path: Path, code: str) -> list[int]:
    return [d.row for d in check_file(path, SETTINGS) if d.code == code]


WHOLE = base64.b64encode(bytes(range(256))[:255]).decode()
"""A signature as Anthropic's look: padded base64, 340 characters."""


def test_openclaw_sends_no_signature_a_compaction_kept_from_before_it(tmp_path: Path) -> None:
    """A broken signature on a message the last compaction keeps from before it: pi
    sends it and fails (SF606); OpenClaw strips the signatures of the messages a
    compaction kept, so the same session is sound there."""
    records = [
        _header(),
        _user("a0000001", None, "Summarise the report.", 1),
        _assistant("a0000002", "a0000001", "Done.", 2, WHOLE[:301]),
        {
            "type": "compaction",
            "id": "a0000003",
            "parentId": "a0000002",
            "timestamp": "2026-07-24T06:22:03.000Z",
            "summary": "The user asked for a summary of the report; it was given.",
            "firstKeptEntryId": "a0000001",
            "tokensBefore": 150000,
        },
        _user("a0000004", "a0000003", "Thanks.", 4),
        _assistant("a0000005", "a0000004", "You are welcome.", 5, WHOLE),
    ]
    assert _rows(_session(tmp_path / "pi", records, "session.jsonl"), "SF606") == [3]
    assert _rows(_session(tmp_path / "openclaw", records, OPENCLAW_NAME), "SF606") == []


def _two_branches() -> list[dict[str, Any]]:
    return [
        _header(),
        _user("b0000001", None, "Set up the database.", 1),
        _assistant("b0000002", "b0000001", "Which engine?", 2),
        _user("b0000003", "b0000002", "SQLite.", 3),
        _assistant("b0000004", "b0000003", "SQLite is wired in.", 4),
        _user("b0000005", "b0000002", "Postgres instead.", 5),
        _assistant("b0000006", "b0000005", "Postgres is wired in.", 6),
    ]


def _rename(entry_id: str, parent: str) -> dict[str, Any]:
    stamp = "2026-07-24T06:23:00.000Z"
    return {"type": "session_info", "id": entry_id, "parentId": parent, "timestamp": stamp}


def test_an_openclaw_leaf_row_moves_the_leaf_on_purpose(tmp_path: Path) -> None:
    """A rename below an OpenClaw leaf row that names the older branch follows a move
    OpenClaw recorded: not SF111. Without the leaf row, the same rename is a stale leaf."""
    leaf_row = {
        "type": "leaf",
        "id": "b0000007",
        "parentId": "b0000006",
        "timestamp": "2026-07-24T06:22:59.000Z",
        "targetId": "b0000004",
    }
    moved = [*_two_branches(), leaf_row, _rename("b0000008", "b0000007")]
    assert _rows(_session(tmp_path / "moved", moved, OPENCLAW_NAME), "SF111") == []
    stale = [*_two_branches(), _rename("b0000008", "b0000004")]
    assert _rows(_session(tmp_path / "stale", stale, OPENCLAW_NAME), "SF111") == [8]


@given(st.binary(min_size=75, max_size=3000))
def test_a_whole_signature_is_never_at_fault(signed: bytes) -> None:
    """Anthropic's signatures are padded base64 of hundreds of bytes and more."""
    assert signature_fault(base64.b64encode(signed).decode()) is None


@given(st.binary(min_size=75, max_size=600), st.integers(min_value=1, max_value=3))
def test_a_signature_cut_off_its_padding_is_malformed(signed: bytes, cut: int) -> None:
    """A signature cut short in the stream has a length that is no multiple of 4."""
    whole = base64.b64encode(signed).decode()
    assert signature_fault(whole[: len(whole) - cut]) is SignatureFault.MALFORMED


@given(
    signatures=st.lists(
        st.one_of(
            st.binary(min_size=75, max_size=400).map(lambda b: base64.b64encode(b).decode()),
            st.sampled_from(["", "sig-1", WHOLE[:24], WHOLE[:301], WHOLE[:99]]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_the_unsafe_repair_keeps_every_whole_signature(
    signatures: list[str], tmp_path: Path
) -> None:
    """Whatever mix of whole and broken signatures a session holds, its unsafe repair
    keeps every block with a whole signature (and an empty one, which pi sends as plain
    text) and every text, and leaves no SF606 error."""
    records: list[dict[str, Any]] = [_header()]
    parent = None
    for number, signature in enumerate(signatures):
        asked, answered = f"c{2 * number:07d}", f"c{2 * number + 1:07d}"
        records.append(_user(asked, parent, f"Question {number}.", 2 * number))
        records.append(_assistant(answered, asked, f"Answer {number}.", 2 * number + 1, signature))
        parent = answered
    source = _session(tmp_path, records, "session.jsonl")
    out = tmp_path / "out.jsonl"
    out.unlink(missing_ok=True)
    repair_to(source, out, Settings(quiescence=0.0, unsafe_fixes=True))
    blocks = [b for line in out.read_text().splitlines()[1:] for b in _content(line)]
    kept = [s for s in signatures if not s or signature_fault(s) is None]
    assert [b["thinkingSignature"] for b in blocks if b["type"] == "thinking"] == kept
    texts = [b["text"] for r in records[1:] for b in r["message"]["content"] if "text" in b]
    assert [b["text"] for b in blocks if b["type"] == "text"] == texts
    assert [d for d in check_file(out, SETTINGS) if d.code == "SF606"] == []


def _content(line: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = json.loads(line)["message"]["content"]
    return blocks


def test_model_fields_of_any_type_are_read(tmp_path: Path) -> None:
    """An assistant whose `api` is an array and `provider` an object names no API the
    signatures are checked for: its thinking is read, not refused, and nothing fails."""
    records = [_header(), _user("d0000001", None, "Hi.", 1)]
    odd = _assistant("d0000002", "d0000001", "Hello.", 2, "sig-1")
    odd["message"] |= {"api": ["anthropic-messages"], "provider": {"name": "anthropic"}}
    records.append(odd)
    assert _rows(_session(tmp_path, records, "session.jsonl"), "SF606") == []
