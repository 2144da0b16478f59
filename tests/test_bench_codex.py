"""The Codex rollout `make bench` builds from the real samples: turns of the samples'
shapes, compactions whose replacement histories grow up to a cap and repeat the same
inline images, the defects planted in it found exactly, and the same bytes for the
same size."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionfix import Settings, check_file
from sessionfix.settings import DEFAULT_MAX_RECORD_SIZE

from .bench_files import codex_generator

SIZE_MB = 12


@pytest.fixture(scope="module")
def built(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("codex") / "rollout.jsonl"
    stats = codex_generator().generate_codex(out, SIZE_MB, corpus / "codex")
    return out, stats


def records(path: Path) -> list[dict[str, Any]]:
    """Every complete record, glued ones split apart (the torn last line left out)."""
    found = []
    lines = path.read_bytes().split(b"\n")
    for line in lines[:-1]:
        for part in re.split(rb"(?<=\})(?=\{\"timestamp\")", line):
            found.append(orjson.loads(part))
    return found


def test_the_planted_defects_and_nothing_else_are_found(built: tuple[Path, Any]) -> None:
    path, stats = built
    found = Counter(diagnostic.code for diagnostic in check_file(path, Settings(quiescence=0.0)))
    assert dict(found) == stats.planted
    assert all(stats.planted[code] > 0 for code in stats.planted)
    assert stats.planted["SF504"] == stats.compactions - 1


def test_the_default_size_limit_is_the_generators() -> None:
    assert codex_generator().MAX_RECORD_SIZE == DEFAULT_MAX_RECORD_SIZE


def test_compactions_hold_most_of_the_bytes_and_repeat_the_images(
    built: tuple[Path, Any],
) -> None:
    path, stats = built
    assert stats.bytes == path.stat().st_size >= SIZE_MB << 20
    rows = records(path)
    assert len(rows) == stats.records - 1
    assert rows[0]["type"] == "session_meta"
    compactions = [row for row in rows if row["type"] == "compacted"]
    assert len(compactions) == stats.compactions >= 5
    assert stats.compacted_bytes > 0.6 * stats.bytes
    sizes = [len(orjson.dumps(row)) for row in compactions]
    assert sizes[: len(sizes) // 2] == sorted(sizes[: len(sizes) // 2])
    assert max(sizes) == stats.largest_history
    urls = Counter(
        part["image_url"]
        for row in compactions
        for item in row["payload"]["replacement_history"]
        for part in (item.get("content") if isinstance(item.get("content"), list) else [])
        if part.get("type") == "input_image"
    )
    assert 1 < len(urls) <= codex_generator().IMAGES
    assert max(urls.values()) >= 3
    assert all(url.startswith("data:image/png;base64,iVBORw0KG") for url in urls)
    kinds = Counter(
        (row["type"], row["payload"].get("type")) for row in rows if row["type"] != "compacted"
    )
    for kind in [
        ("turn_context", None),
        ("response_item", "message"),
        ("response_item", "reasoning"),
        ("response_item", "function_call"),
        ("response_item", "function_call_output"),
        ("response_item", "custom_tool_call"),
        ("response_item", "custom_tool_call_output"),
        ("event_msg", "token_count"),
        ("event_msg", "task_complete"),
    ]:
        assert kinds[kind] > 0, kind


def test_same_bytes_for_the_same_size(
    built: tuple[Path, Any], corpus: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again.jsonl"
    stats = codex_generator().generate_codex(again, SIZE_MB, corpus / "codex")
    assert again.read_bytes() == built[0].read_bytes()
    assert stats == built[1]
