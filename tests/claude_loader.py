"""Claude Code's own session reader, run by Node.js on session files
(`tests/claude/load.mjs`): the Agent SDK's `getSessionMessages`, which builds the
conversation chain the way Claude Code resumes a session, and for a sub-agent's
transcript its `getSubagentMessages`.

`make test` installs the pinned package into `.cache/claude` and sets
`SESSIONFIX_REQUIRE_CLAUDE=1`, so that a missing reader fails the run there. A bare
`pytest` without them leaves the modules that need the reader out when they are
collected (`require_claude_at_collection`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

PACKAGE = ROOT / ".cache" / "claude" / "node_modules" / "@anthropic-ai" / "claude-agent-sdk"
HARNESS = ROOT / "tests" / "claude" / "load.mjs"
LIST_HARNESS = ROOT / "tests" / "claude" / "list.mjs"


@dataclass(frozen=True)
class LoadedMessage:
    """One message the reader returned: what a resumed session shows and sends."""

    uuid: str
    type: str
    message: Any
    """The record's `message` (None for `system` records, which have none)."""


@dataclass(frozen=True)
class Subagent:
    """Where a sub-agent's transcript lies: `<session>/subagents/agent-<agent>.jsonl`."""

    session: str
    agent: str
    main: Path | None
    """The session's main transcript (None: the reader is given a one-record stub)."""


@dataclass(frozen=True)
class ListedSession:
    """One session Claude Code's session list offers to resume."""

    session_id: str
    summary: str
    """What the list shows it as: its title, else its last or first prompt."""
    custom_title: str | None
    first_prompt: str | None


@dataclass(frozen=True)
class ClaudeLoad:
    """What Claude Code's reader made of one file."""

    session_id: str | None
    """The session id the file's records carry."""
    stored_as: str
    """The file name (without `.jsonl`) the reader was given: the carried id, or a UUID
    derived from it where the carried id is no UUID (the reader takes only UUIDs)."""
    error: str | None
    """What the reader threw, if it did."""
    untouched: bool
    """The reader left the file's bytes and time stamp alone and wrote nothing beside it."""
    messages: tuple[LoadedMessage, ...]


def claude_missing() -> str | None:
    """Why the reader cannot run here (None when it can)."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not (PACKAGE / "sdk.mjs").exists():
        where = PACKAGE.relative_to(ROOT)
        return f"Claude Code's reader is not installed in {where} (make test installs it)"
    return None


def require_claude_at_collection() -> None:
    """Call at the top of a test module that needs the reader: the module is left out
    when it is collected if the reader cannot run, and under `SESSIONFIX_REQUIRE_CLAUDE=1`
    its collection fails instead."""
    missing = claude_missing()
    if missing is None:
        return
    if os.environ.get("SESSIONFIX_REQUIRE_CLAUDE") == "1":
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing, allow_module_level=True)


LOAD_SECONDS: list[float] = []
"""Wall-clock seconds of each `load_with_claude` call of this run, in call order."""


def load_with_claude(
    files: list[Path], subagents: Mapping[Path, Subagent] | None = None
) -> dict[Path, ClaudeLoad]:
    """Load every file in one Node.js process; those `subagents` names as the sub-agent
    transcripts they stand for."""
    missing = claude_missing()
    if missing is not None:
        raise AssertionError(missing)
    placed = subagents or {}
    batch = []
    for path in files:
        item: dict[str, Any] = {"file": str(path)}
        if (place := placed.get(path)) is not None:
            main = None if place.main is None else str(place.main)
            item["subagent"] = {"session": place.session, "agent": place.agent, "main": main}
        batch.append(item)
    started = time.perf_counter()
    result = subprocess.run(
        ["node", str(HARNESS), str(PACKAGE)],
        input=json.dumps(batch),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    LOAD_SECONDS.append(time.perf_counter() - started)
    if result.returncode != 0:
        raise AssertionError(f"Claude Code's reader failed:\n{result.stderr}")
    loads: dict[Path, ClaudeLoad] = {}
    # JSON.stringify leaves U+2028/U+2029 unescaped: split on newlines only.
    for line in filter(None, result.stdout.split("\n")):
        data = json.loads(line)
        loads[Path(data["file"])] = ClaudeLoad(
            session_id=data["sessionId"],
            stored_as=data["storedAs"],
            error=data.get("error"),
            untouched=data["untouched"],
            messages=tuple(
                LoadedMessage(m["uuid"], m["type"], m.get("message"))
                for m in data.get("messages", ())
            ),
        )
    missing_files = [path for path in files if path not in loads]
    assert not missing_files, f"the reader reported nothing for {missing_files}"
    return loads


def list_with_claude(home: Path) -> dict[str, ListedSession]:
    """The sessions Claude Code's session list (the Agent SDK's `listSessions`) offers
    for the user whose home is `home` (`home/.claude/projects/*/`), by session id."""
    missing = claude_missing()
    if missing is not None:
        raise AssertionError(missing)
    result = subprocess.run(
        ["node", str(LIST_HARNESS), str(PACKAGE), str(home)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if result.returncode != 0:
        raise AssertionError(f"Claude Code's session list failed:\n{result.stderr}")
    return {
        item["sessionId"]: ListedSession(
            item["sessionId"], item["summary"], item["customTitle"], item["firstPrompt"]
        )
        for item in json.loads(result.stdout)
    }
