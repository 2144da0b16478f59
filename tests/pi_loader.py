"""pi's own session loader, run by Node.js on session files (`tests/pi/load.mjs`).

`make test` installs the pinned package into `.cache/pi` and sets
`SESSIONFIX_REQUIRE_PI=1`, so that these checks fail there rather than skip when pi or
Node.js is missing. A bare `pytest` without them skips the checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

PACKAGE = ROOT / ".cache" / "pi" / "node_modules" / "@mariozechner" / "pi-coding-agent"
HARNESS = ROOT / "tests" / "pi" / "load.mjs"


@dataclass(frozen=True)
class PiLoad:
    """What pi made of one file (`hang`: pi did not finish loading it; `error`: what
    pi threw while opening it)."""

    hang: bool
    error: str | None
    parsed: int
    """Lines `parseSessionEntries` turned into entries."""
    skipped: tuple[int, ...]
    """Physical lines (1-based) pi's loader dropped because JSON.parse failed."""
    loaded: int
    """Entries the session manager kept (header excluded)."""
    header: str | None
    leaf: str | None
    messages: list[Any]
    """The context pi builds for the model."""


def require_pi() -> Path:
    """The pi package directory; skips (or fails under `make test`) when unavailable."""
    missing = None
    if shutil.which("node") is None:
        missing = "node is not on PATH"
    elif not (PACKAGE / "dist" / "core" / "session-manager.js").exists():
        missing = f"pi is not installed in {PACKAGE.relative_to(ROOT)} (make test installs it)"
    if missing is not None:
        if os.environ.get("SESSIONFIX_REQUIRE_PI") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    return PACKAGE


def load_with_pi(files: list[Path]) -> dict[Path, PiLoad]:
    """Load every file in one Node.js process."""
    package = require_pi()
    result = subprocess.run(
        ["node", str(HARNESS), str(package), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if result.returncode != 0:
        raise AssertionError(f"pi's loader failed:\n{result.stderr}")
    loads: dict[Path, PiLoad] = {}
    # JSON.stringify leaves U+2028/U+2029 unescaped: split on newlines only.
    for line in filter(None, result.stdout.split("\n")):
        data = json.loads(line)
        loads[Path(data["file"])] = PiLoad(
            hang=data.get("hang", False),
            error=data.get("error"),
            parsed=data.get("parsed", 0),
            skipped=tuple(data.get("skipped", ())),
            loaded=data.get("loaded", 0),
            header=data.get("header"),
            leaf=data.get("leaf"),
            messages=data.get("messages", []),
        )
    return loads
