"""Start-up cost, guarded by what a small `check` imports rather than by a clock: the
modules only other commands, formats or output formats need stay unloaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SMALL = Path(__file__).resolve().parent.parent / "examples" / "sessions" / "windows-v1.jsonl"

PROBE = """
import json, sys
from sessionfix.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

UNNEEDED = (
    "apsw",
    "sqlite3",
    "zstandard",
    "rich",
    "pickle",
    "tempfile",
    "importlib.resources",
    "sessionfix.repair",
    "sessionfix.safety",
    "sessionfix.scan.workers",
    "sessionfix.context",
    "sessionfix.formats.openclaw_store",
    "sessionfix.formats.pi.context",
    "sessionfix.formats.codex",
    "sessionfix.formats.claude",
    "sessionfix.report.context",
    "sessionfix.report.diff",
    "sessionfix.report.progress",
)
"""Modules (and packages, with everything under them) a check of one small plain pi
session has no use for: stores, compression, repair, backups and safe writing, worker
processes, progress bars, the other agents' formats, pi's resume loader, the diff and
context reports."""


def _probe(tmp_path: Path, *args: str) -> tuple[int, list[str], str]:
    """The exit code of a run of `args`, the modules it loaded, and what it printed
    to stderr before them."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    *printed, last = result.stderr.decode().splitlines()
    probe = json.loads(last)
    return probe["code"], probe["modules"], "\n".join(printed)


def _unneeded(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if any(name == heavy or name.startswith(f"{heavy}.") for heavy in UNNEEDED)
    ]


def test_small_check_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    code, modules, _ = _probe(tmp_path, "check", str(SMALL))
    assert code == 0
    assert "sessionfix.engine" in modules
    assert _unneeded(modules) == []


def test_a_scan_prints_its_summary_without_the_terminal_library(tmp_path: Path) -> None:
    """The summary line of a scan is plain text: no progress bar off a terminal, so
    nothing to load rich for."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(SMALL.read_bytes())
    code, modules, printed = _probe(tmp_path, "scan", str(folder))
    assert code == 0
    assert printed.startswith("Scanned 1 file (")
    assert not [name for name in modules if name.partition(".")[0] == "rich"]
