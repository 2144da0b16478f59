"""The Claude Code session `make bench` builds from the real samples: one session,
every id rewritten consistently per copy, one chain from the last record back to the
first, the same bytes for the same size, and nothing for sessionfix to report."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from .bench_files import claude_generator


@pytest.fixture(scope="module")
def built(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """Two rounds of the samples (about 5.7 MB each)."""
    out = tmp_path_factory.mktemp("claude") / "session.jsonl"
    stats = claude_generator().generate_claude(out, 7, corpus / "claude")
    return out, stats


def records(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [orjson.loads(line) for line in data.splitlines()]


def blocks(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = (record.get("message") or {}).get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict) and block.get("type") == kind]


def test_several_rounds_of_every_sample(built: tuple[Path, Any]) -> None:
    path, stats = built
    assert stats.rounds >= 2
    assert stats.copies == stats.rounds * len(claude_generator().SAMPLES)
    assert stats.bytes == path.stat().st_size >= 7 << 20
    assert stats.records == len(records(path))
    assert stats.compactions >= 2 * stats.rounds


def test_ids_are_unique_and_every_reference_resolves(built: tuple[Path, Any], corpus: Path) -> None:
    rows = records(built[0])
    uuids = Counter(row["uuid"] for row in rows if "uuid" in row)
    assert max(uuids.values()) == 1
    assert {row["sessionId"] for row in rows if "sessionId" in row} == {
        claude_generator().SESSION_ID
    }
    seen: set[str] = set()
    calls: set[str] = set()
    for index, row in enumerate(rows):
        parent = row.get("parentUuid", "absent")
        if parent is None:
            assert index == 0 or row.get("subtype") == "compact_boundary", index
        elif parent != "absent":
            assert parent in seen, index
        for key in ("logicalParentUuid", "sourceToolAssistantUUID"):
            if key in row:
                assert row[key] in uuids, (index, key)
        if "leafUuid" in row:
            assert row["leafUuid"] in seen, index
        meta = row.get("compactMetadata") or {}
        segment = meta.get("preservedSegment") or {}
        kept = meta.get("preservedMessages") or {}
        for uuid in [*segment.values(), kept.get("anchorUuid"), *kept.get("uuids", [])]:
            if uuid is not None:
                assert uuid in uuids, index
        for block in blocks(row, "tool_use"):
            assert block["id"] not in calls
            calls.add(block["id"])
        for block in blocks(row, "tool_result"):
            assert block["tool_use_id"] in calls, index
        if "uuid" in row:
            seen.add(row["uuid"])
    # Lines of one API message share its id within a copy, and no other copy has it.
    generator = claude_generator()
    per_round = 0
    for name in generator.SAMPLES:
        sample = generator.cut_unanswered(
            generator.drop_replays(generator.read_records(corpus / "claude" / name))
        )
        per_round += len({row["message"]["id"] for row in sample if row.get("type") == "assistant"})
    message_ids = {row["message"]["id"] for row in rows if row.get("type") == "assistant"}
    assert len(message_ids) == per_round * built[1].rounds


def test_one_chain_from_the_last_prompt_to_the_first_record(built: tuple[Path, Any]) -> None:
    """Back from the leaf the last `last-prompt` names, along `parentUuid`; across a
    compaction boundary to the pre-compaction messages (the preserved segment's head,
    else `logicalParentUuid`)."""
    rows = records(built[0])
    assert rows[-1]["type"] == "last-prompt"
    by_uuid = {row["uuid"]: row for row in rows if "uuid" in row}
    visited: set[str] = set()
    current: str | None = rows[-1]["leafUuid"]
    while current is not None:
        assert current not in visited
        visited.add(current)
        row = by_uuid[current]
        if row.get("subtype") == "compact_boundary":
            head = (row["compactMetadata"].get("preservedSegment") or {}).get("headUuid")
            current = head or row["logicalParentUuid"]
        else:
            current = row["parentUuid"]
    assert row is next(r for r in rows if "uuid" in r)
    # Off the chain: progress records, parallel tool calls' side lines, a rewound branch.
    turns = [uuid for uuid, row in by_uuid.items() if row["type"] in ("user", "assistant")]
    assert sum(uuid in visited for uuid in turns) > 0.95 * len(turns)


def test_timestamps_move_forward_from_copy_to_copy(built: tuple[Path, Any]) -> None:
    rows = [row for row in records(built[0]) if row.get("type") in ("user", "assistant")]
    assert rows[0]["timestamp"].startswith("2026-01-05T")
    assert rows[-1]["timestamp"] > rows[0]["timestamp"]


def test_same_bytes_for_the_same_size(
    built: tuple[Path, Any], corpus: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again.jsonl"
    claude_generator().generate_claude(again, 7, corpus / "claude")
    assert again.read_bytes() == built[0].read_bytes()


def test_nothing_for_sessionfix_to_report(built: tuple[Path, Any]) -> None:
    sessionfix = [sys.executable, "-m", "sessionfix"]
    done = subprocess.run(
        [*sessionfix, "scan", str(built[0]), "--no-progress", "--fail-on", "info"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "All checks passed!\n"
