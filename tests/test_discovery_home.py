"""`sessionfix scan` with no path: every installed agent's session folders, found from
`HOME` and the agents' own variables; JSONL files no format reads are skipped."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Final

import pytest
from typer.testing import CliRunner

from sessionfix.cli import app
from sessionfix.discovery import agent_folders, is_foreign

from .conftest import CORPUS, FIXTURES
from .test_fixtures import place_case

CLAUDE: Final = (
    CORPUS / "claude" / "misc" / "kvsankar-agent-history__real_sessions_claude_session-01.jsonl"
)
CODEX: Final = CORPUS / "codex" / "session-doctor__basic-session.jsonl"
PI: Final = CORPUS / "openclaw" / "letta-trajectory__pi-tool-calls.v3.jsonl"
OPENCLAW: Final = CORPUS / "openclaw" / "letta-trajectory__openclaw-tool-calls.jsonl"

AGENT_VARIABLES: Final = (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "PI_CODING_AGENT_DIR",
    "PI_CODING_AGENT_SESSION_DIR",
    "OPENCLAW_STATE_DIR",
    "XDG_DATA_HOME",
    "OPENCODE_DB",
    "CODEWHALE_HOME",
    "DATA_DIR",
    "DATABASE_URL",
)
ROLLOUT: Final = "rollout-2026-01-01T00-00-00-0199a0b0-0000-7000-8000-000000000001.jsonl"
CLAUDE_HISTORY: Final = (
    b'{"display": "fix the tests", "pastedContents": {}, "timestamp": 1767225600000, '
    b'"project": "/tmp/x"}\n'
    b'{"display": "/clear", "pastedContents": {}, "timestamp": 1767225700000, '
    b'"project": "/tmp/x"}\n'
)
CODEX_HISTORY: Final = (
    b'{"session_id": "0199a0b0-0000-7000-8000-000000000001", "ts": 1767225600, '
    b'"text": "fix the tests"}\n'
)
ENV: Final = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "xterm"}

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")


def run(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


TORN: Final = b'{"type":"message","id":"9f8e'
"""A last line cut short, so that every session has a finding to show its format by."""


def torn(session: Path) -> bytes:
    data = session.read_bytes()
    return data + (b"" if data.endswith(b"\n") else b"\n") + TORN


def put(source: Path | bytes, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(source, bytes):
        target.write_bytes(source)
    else:
        shutil.copyfile(source, target)
    return target


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home folder, with none of the agents' variables set."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in AGENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return folder


@pytest.fixture
def installed(home: Path) -> Path:
    """A home where Claude Code, Codex, pi and OpenClaw each kept a session (its last
    line torn), beside their prompt histories and JSONL files that are no session."""
    put(
        torn(CLAUDE),
        home / ".claude" / "projects" / "-tmp-x" / "0d4c3a43-1111-4222-8333-444455556666.jsonl",
    )
    put(CLAUDE_HISTORY, home / ".claude" / "history.jsonl")
    put(torn(CODEX), home / ".codex" / "sessions" / "2026" / "01" / "01" / ROLLOUT)
    put(CODEX_HISTORY, home / ".codex" / "history.jsonl")
    put(
        torn(PI),
        home / ".pi" / "agent" / "sessions" / "--tmp--" / "2026-07-24T06-21-03-508Z_pi.jsonl",
    )
    put(
        torn(OPENCLAW),
        home / ".openclaw" / "agents" / "main" / "sessions" / "openclaw-session-0001.jsonl",
    )
    # JSONL inside the session folders that no agent wrote there as a session.
    put(CLAUDE_HISTORY, home / ".claude" / "projects" / "-tmp-x" / "prompts.jsonl")
    put(b'{"input": "2+2", "label": "4"}\n' * 3, home / ".pi" / "agent" / "sessions" / "data.jsonl")
    return home


def findings(stdout: str) -> list[dict[str, Any]]:
    found = json.loads(stdout)
    assert isinstance(found, list)
    return found


def test_scan_without_paths_reads_every_agents_sessions(installed: Path) -> None:
    result = run("scan", "--output-format", "json", "--no-progress")
    found = findings(result.stdout)
    assert {d["format"] for d in found} == {"claude", "codex", "pi", "openclaw"}
    names = {Path(d["filename"]).name for d in found}
    assert not names & {"history.jsonl", "prompts.jsonl", "data.jsonl"}
    failing = any(d["severity"] in ("warning", "error") for d in found)
    assert result.exit_code == (1 if failing else 0), result.stderr
    note = result.stderr.strip().splitlines()[-1]
    assert note.startswith("Scanned 4 files ")
    for folder in ("~/.claude/projects", "~/.codex/sessions", "~/.pi/agent/sessions"):
        assert folder in note
    assert "~/.openclaw/agents" in note
    assert "~/.codex/archived_sessions" not in note, "a folder that is not there is named"
    assert note.endswith("; skipped 2 files of no known format")
    assert "warning" not in result.stderr, "a walk skips files of no known format silently"


def test_sessionfix_without_a_command_is_scan_without_paths(installed: Path) -> None:
    bare = run()
    scan = run("scan")
    assert (bare.exit_code, bare.stdout) == (scan.exit_code, scan.stdout)
    assert bare.stdout.strip()


def test_scan_without_paths_and_no_agent_is_one_line_and_exit_zero(home: Path) -> None:
    result = run("scan", "--output-format", "json", "--no-progress")
    assert result.exit_code == 0
    assert findings(result.stdout) == []
    assert result.stderr.strip().splitlines() == [
        "No agent session folders found (looked in ~/.pi/agent/sessions, ~/.openclaw/agents, "
        "~/.codex/sessions, ~/.codex/archived_sessions, ~/.codex/state_5.sqlite, "
        "~/.codex/sqlite/state_5.sqlite, ~/.claude/projects, ~/.local/share/opencode, "
        "~/.codewhale/sessions, ~/.deepseek/sessions)"
    ]


def test_strict_scan_makes_files_of_no_known_format_errors(installed: Path) -> None:
    result = run("scan", "--strict", "--output-format", "json", "--no-progress")
    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("sessionfix: error:")]
    assert len(errors) == 2
    assert all("not a session file of a known format" in line for line in errors)


def test_the_agents_variables_move_their_folders(home: Path, tmp_path: Path) -> None:
    env = {
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "CODEX_HOME": "~/codex",
        "PI_CODING_AGENT_DIR": str(tmp_path / "pi"),
        "OPENCLAW_STATE_DIR": str(tmp_path / "openclaw"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "CODEWHALE_HOME": str(tmp_path / "codewhale"),
    }
    _, looked = agent_folders(env, home)
    assert set(looked) == {
        tmp_path / "claude" / "projects",
        home / "codex" / "sessions",
        home / "codex" / "archived_sessions",
        home / "codex" / "state_5.sqlite",
        home / "codex" / "sqlite" / "state_5.sqlite",
        tmp_path / "pi" / "sessions",
        tmp_path / "openclaw" / "agents",
        tmp_path / "data" / "opencode",
        tmp_path / "codewhale" / "sessions",
        home / ".deepseek" / "sessions",
    }
    sessions_only = {**env, "PI_CODING_AGENT_SESSION_DIR": str(tmp_path / "pi-sessions")}
    assert tmp_path / "pi-sessions" in agent_folders(sessions_only, home)[1]
    assert tmp_path / "pi" / "sessions" not in agent_folders(sessions_only, home)[1]
    # An empty variable is no override.
    assert home / ".claude" / "projects" in agent_folders({"CLAUDE_CONFIG_DIR": ""}, home)[1]


def test_scan_without_paths_follows_the_variables(
    installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = tmp_path / "elsewhere"
    put(CODEX, moved / "archived_sessions" / ROLLOUT)
    monkeypatch.setenv("CODEX_HOME", str(moved))
    result = run("scan", "--output-format", "json", "--no-progress")
    codex = {d["filename"] for d in findings(result.stdout) if d["format"] == "codex"}
    assert codex, "no finding in the moved Codex folder to tell it was read"
    assert all(name.startswith(str(moved / "archived_sessions")) for name in codex)
    assert f"{moved / 'archived_sessions'}" in result.stderr
    assert "~/.codex" not in result.stderr


def test_check_of_a_file_of_no_known_format_says_so_and_exits_zero(tmp_path: Path) -> None:
    path = put(CLAUDE_HISTORY, tmp_path / "history.jsonl")
    result = run("check", "--no-progress", path)
    assert result.exit_code == 0
    assert "SF" not in result.stdout
    assert result.stderr.strip().splitlines() == [
        f"sessionfix: warning: {path}: not a session file of a known format (no agent writes "
        "records like its first); skipped (--format FORMAT reads it as a session)"
    ]
    strict = run("check", "--strict", "--no-progress", path)
    assert strict.exit_code == 2
    assert strict.stderr.strip().splitlines() == [
        f"sessionfix: error: {path}: not a session file of a known format (no agent writes "
        "records like its first)"
    ]
    forced = run("check", "--format", "pi", "--output-format", "json", "--no-progress", path)
    assert forced.exit_code == 1
    assert findings(forced.stdout)


def test_check_of_a_session_is_unchanged_by_strict(tmp_path: Path) -> None:
    path = put(CODEX, tmp_path / ROLLOUT)
    plain = run("check", "--output-format", "json", "--no-progress", path)
    strict = run("check", "--strict", "--output-format", "json", "--no-progress", path)
    assert (plain.exit_code, plain.stdout) == (strict.exit_code, strict.stdout)
    assert "not a session" not in plain.stderr


SESSION_LINES: Final = PI.read_bytes().splitlines(keepends=True) if PI.is_file() else []


@pytest.mark.parametrize(
    ("data", "foreign"),
    [
        pytest.param(CLAUDE_HISTORY, True, id="claude-history"),
        pytest.param(CODEX_HISTORY, True, id="codex-history"),
        pytest.param(b"", False, id="empty"),
        pytest.param(b"\n\n", False, id="blank"),
        pytest.param(b"not json at all\n", False, id="text"),
        pytest.param(b"\x00" * 64, False, id="zeroed"),
        pytest.param(b'{"input": 1}\n' + b"".join(SESSION_LINES[1:]), False, id="known-later"),
        pytest.param(SESSION_LINES[0][:40] + b"".join(SESSION_LINES[1:]), False, id="torn-first"),
        pytest.param(
            SESSION_LINES[0].rstrip(b"\n") + b"".join(SESSION_LINES[1:]), False, id="glued-first"
        ),
        pytest.param(b"".join(SESSION_LINES), False, id="session"),
    ],
)
def test_only_plain_non_sessions_are_foreign(tmp_path: Path, data: bytes, foreign: bool) -> None:
    """A damaged session (torn or glued first line, zeroed bytes) is never passed over."""
    assert is_foreign(put(data, tmp_path / "s.jsonl")) is foreign


def test_a_walk_still_reads_a_session_with_a_torn_first_line(home: Path) -> None:
    torn = SESSION_LINES[0][:40] + b"".join(SESSION_LINES[1:])
    put(torn, home / ".pi" / "agent" / "sessions" / "--tmp--" / "torn.jsonl")
    result = run("scan", "--output-format", "json", "--no-progress")
    assert {Path(d["filename"]).name for d in findings(result.stdout)} == {"torn.jsonl"}
    assert result.exit_code == 1


def test_scan_without_paths_finds_a_claude_project_with_a_stale_index(home: Path) -> None:
    """A project folder whose `sessions-index.json` lists only the older of its two
    sessions (the index Claude Code 2.1.3x stopped updating): the newer is reported."""
    case = FIXTURES / "SF702-claude-session-left-out-of-the-index"
    project = home / ".claude" / "projects" / "-home-dev-projects-webapp"
    session = place_case(case, project)
    bare = run()
    assert bare.exit_code == 1, bare.stderr
    reported = [line for line in bare.stdout.splitlines() if " SF702 " in line]
    assert len(reported) == 1
    assert reported[0].startswith(f"{session}:1:1: SF702 `sessions-index.json`")
    found = findings(run("scan", "--output-format", "json", "--no-progress").stdout)
    assert [(Path(d["filename"]).name, d["code"]) for d in found] == [(session.name, "SF702")]
