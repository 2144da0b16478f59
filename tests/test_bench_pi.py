"""The pi session `make bench` builds from the real samples: v1 samples migrated to v3,
every id rewritten consistently per copy, one chain from the first entry to the last,
the defects planted in it (and the samples' own findings) found exactly, and the same
bytes for the same size."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionfix import Settings, check_file

from .bench_files import pi_generator

SIZE_MB = 8
SAMPLE_FINDINGS = {"SF301", "SF402", "SF601", "SF606"}
"""What the real samples bring by themselves: stale reads, calls of aborted turns left
without results, leaked `partialJson`, and the placeholder thinking signature of letta's
fixture ("sig-1"), which Anthropic refuses."""


@pytest.fixture(scope="module")
def built(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """Three rounds of the samples (about 3.4 MB each)."""
    out = tmp_path_factory.mktemp("pi") / "session.jsonl"
    stats = pi_generator().generate_pi(out, SIZE_MB, corpus / "openclaw")
    return out, stats


def entries(path: Path) -> list[dict[str, Any]]:
    """Every entry after the header, glued ones split apart."""
    data = path.read_bytes()
    assert data.endswith(b"\n")
    lines = data.splitlines()
    assert orjson.loads(lines[0])["version"] == 3
    found = []
    for line in lines[1:]:
        for part in re.split(rb'(?<=\})(?=\{"type":"message","id")', line):
            found.append(orjson.loads(part))
    return found


def calls_of(entry: dict[str, Any]) -> list[str]:
    content = (entry.get("message") or {}).get("content")
    if not isinstance(content, list):
        return []
    return [block["id"] for block in content if block.get("type") == "toolCall"]


def test_the_planted_defects_and_the_samples_findings_and_nothing_else_are_found(
    built: tuple[Path, Any],
) -> None:
    path, stats = built
    found = Counter(diagnostic.code for diagnostic in check_file(path, Settings(quiescence=0.0)))
    assert dict(found) == stats.expected
    assert set(stats.planted) == {"SF001", "SF201", "SF202", "SF301", "SF401"}
    assert all(count > 0 for count in stats.planted.values())
    assert set(stats.inherent) == SAMPLE_FINDINGS
    for code, count in stats.expected.items():
        assert count == stats.planted.get(code, 0) + stats.inherent.get(code, 0)


def test_the_size_is_reached_with_whole_rounds(built: tuple[Path, Any]) -> None:
    path, stats = built
    assert stats.bytes == path.stat().st_size >= SIZE_MB << 20
    assert stats.rounds >= 2
    assert stats.copies == stats.rounds * len(pi_generator().SAMPLES)
    assert stats.entries == len(entries(path))


def test_one_chain_of_unique_ids(built: tuple[Path, Any]) -> None:
    rows = entries(built[0])
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{8}", entry_id) for entry_id in ids)
    assert [row["parentId"] for row in rows] == [None, *ids[:-1]]
    stamps = [row["timestamp"] for row in rows]
    assert stamps == sorted(stamps)


def test_calls_and_results_stay_paired(built: tuple[Path, Any]) -> None:
    path, stats = built
    calls = Counter(call for row in entries(path) for call in calls_of(row))
    assert max(calls.values()) == 1
    assert sum(calls.values()) == stats.tool_calls
    made: set[str] = set()
    orphans = 0
    for row in entries(path):
        made.update(calls_of(row))
        message = row.get("message") or {}
        if message.get("role") == "toolResult" and message["toolCallId"] not in made:
            orphans += 1
    assert orphans == stats.planted["SF401"]


def test_v1_compactions_keep_the_entry_their_index_named(
    built: tuple[Path, Any], corpus: Path
) -> None:
    path, stats = built
    sample = [
        orjson.loads(line)
        for line in (corpus / "openclaw" / "pi-mono__before-compaction.v1.jsonl")
        .read_bytes()
        .splitlines()
    ]
    kept_messages = [
        sample[record["firstKeptEntryIndex"]]["message"]["content"]
        for record in sample
        if record["type"] == "compaction"
    ]
    rows = entries(path)
    by_id = {row["id"]: row for row in rows}
    compactions = [row for row in rows if row["type"] == "compaction"]
    assert len(compactions) == stats.compactions
    assert not any("firstKeptEntryIndex" in row for row in compactions)
    migrated = [
        by_id[row["firstKeptEntryId"]]["message"]["content"]
        for row in compactions
        if row["tokensBefore"] in {record.get("tokensBefore") for record in sample}
    ]
    assert migrated == kept_messages * stats.rounds
    position = {row["id"]: index for index, row in enumerate(rows)}
    assert all(position[row["firstKeptEntryId"]] < position[row["id"]] for row in compactions)


def test_same_bytes_for_the_same_size(
    built: tuple[Path, Any], corpus: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again.jsonl"
    stats = pi_generator().generate_pi(again, SIZE_MB, corpus / "openclaw")
    assert again.read_bytes() == built[0].read_bytes()
    assert stats == built[1]
