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
code = main(["check", sys.argv[1]])
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


def test_small_check_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(SMALL)],
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    probe = json.loads(result.stderr.decode().splitlines()[-1])
    assert probe["code"] == 0
    assert "sessionfix.engine" in probe["modules"]
    loaded = [
        name
        for name in probe["modules"]
        if any(name == heavy or name.startswith(f"{heavy}.") for heavy in UNNEEDED)
    ]
    assert loaded == []
