"""opencode's own model context, built by the opencode binary (1.18.33, the linux-x64
package pinned in `tests/opencode`) from sessions of an opencode database.

How a session is loaded (spec `real-clients.md`, opencode, and `formats/opencode.md` §10):
one `opencode serve` per test run, started at the first load and stopped when the run
ends, with `HOME` and the XDG folders in a temporary directory of its own, every
update, download and background feature switched off, and a provider `mock` whose
`baseURL` is `_MockProvider`, an HTTP server on 127.0.0.1 in this process (nothing goes
to the network). Its database (`OPENCODE_DB`) is a scratch database that opencode
creates itself, so its schema is opencode's own. To load a session, its `session`,
`message` and `part` rows are copied from the source database (opened read-only) into
the scratch one, replacing what an earlier load left under those ids; the session is
given the scratch project and an existing folder as its directory (a missing one makes
opencode fail with HTTP 500; neither takes part in the context). Then one probe prompt
is posted to `/session/<id>/message`: the `messages` of the chat request opencode sends
the model, less its system messages and the probe, are what the stored session
contributes. opencode reads the rows anew for every prompt, so one server loads any
number of sessions, one after the other, from any number of databases.

A load appends the probe turn to the scratch copy (and may run opencode's own clean-up
of a reverted session there); the source database is never written. A session whose
times lie after the machine's clock sorts after the probe: fixtures keep to the past.

`make test` installs the pinned package into `.cache/opencode` and sets
`SESSIONFIX_REQUIRE_OPENCODE=1`, so that a missing binary fails the run there. A bare
`pytest` without them leaves the modules that need it out when they are collected
(`require_opencode_at_collection`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import apsw
import pytest

from .conftest import ROOT
from .robustness import start_deaf

PACKAGE = ROOT / ".cache" / "opencode" / "node_modules" / "opencode-linux-x64"
BINARY = PACKAGE / "bin" / "opencode"
PROVIDER = "mock"
MODEL = "m1"
PROBE = "sessionfix-probe"
"""The start of each load's prompt (one word and a number: the load's own)."""
PR_SET_PDEATHSIG = 1
"""Linux's `prctl` option naming the signal a process gets when its parent ends."""
START_TIMEOUT = 60.0
"""Seconds `opencode serve` may take to listen."""
LOAD_TIMEOUT = 60.0
"""Seconds one probe turn may take."""
SWITCHES = {
    "OPENCODE_DISABLE_CHANNEL_DB": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_AUTOCOMPACT": "1",
    "OPENCODE_DISABLE_PRUNE": "1",
}
"""What opencode is kept from doing on its own: another database than `OPENCODE_DB`,
updates, downloads, plugins, reading Claude Code's files, compacting or pruning the
session it loads."""


@dataclass(frozen=True)
class OpencodeLoad:
    """What opencode made of one stored session."""

    error: str | None
    """Why opencode sent nothing (its HTTP answer to the prompt), or None."""
    messages: tuple[dict[str, Any], ...]
    """The chat messages opencode sent the model for the stored session, as sent
    (`role`, `content`, `tool_calls`, `tool_call_id`), without the system messages and
    the probe; empty on an error."""
    request: Mapping[str, Any] = field(default_factory=dict)
    """The whole chat request (empty on an error)."""


def opencode_missing() -> str | None:
    """Why opencode cannot run here (None when it can)."""
    if not BINARY.exists():
        where = PACKAGE.relative_to(ROOT)
        return f"opencode is not installed in {where} (make test installs it)"
    return None


def require_opencode_at_collection() -> None:
    """Call at the top of a test module that needs opencode: the module is left out when
    it is collected if opencode cannot run, and under `SESSIONFIX_REQUIRE_OPENCODE=1` its
    collection fails instead."""
    missing = opencode_missing()
    if missing is None:
        return
    if os.environ.get("SESSIONFIX_REQUIRE_OPENCODE") == "1":
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing, allow_module_level=True)


def isolated_environment(home: Path, database: Path) -> dict[str, str]:
    """The environment opencode runs in: everything of its own under `home`, its
    database `database`, and `SWITCHES`."""
    folders = {
        "HOME": home / "home",
        "XDG_DATA_HOME": home / "data",
        "XDG_CONFIG_HOME": home / "config",
        "XDG_STATE_HOME": home / "state",
        "XDG_CACHE_HOME": home / "cache",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    _settled_dependencies(folders["XDG_CONFIG_HOME"] / "opencode")
    return {
        **{name: str(folder) for name, folder in folders.items()},
        **SWITCHES,
        "OPENCODE_DB": str(database),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _settled_dependencies(config: Path) -> None:
    """Make opencode's configuration folder look as if its plugin package were installed:
    opencode installs `@opencode-ai/plugin` into each configuration folder in the
    background (from the npm registry, unpinned) unless the folder has `node_modules` and
    a lock naming every dependency of its `package.json`."""
    dependencies = {"@opencode-ai/plugin": "*"}
    (config / "node_modules").mkdir(parents=True, exist_ok=True)
    (config / "package.json").write_text(json.dumps({"dependencies": dependencies}))
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": dependencies}}}
    (config / "package-lock.json").write_text(json.dumps(lock))


START_SECONDS: list[float] = []
"""Wall-clock seconds each start of `opencode serve` took, until it answered."""
LOAD_SECONDS: list[float] = []
"""Wall-clock seconds of each session loaded (copy, probe turn, request taken)."""


# --- the mock provider --------------------------------------------------------------------


class _MockProvider:
    """An OpenAI-compatible chat endpoint on 127.0.0.1: every POST is kept and answered
    with a stream of one assistant text and its end; a GET gets an empty list."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._answer("application/json", b'{"object":"list","data":[]}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                with outer.lock:
                    outer.bodies.append(body)
                self._answer("text/event-stream", _stream())

            def _answer(self, kind: str, body: bytes) -> None:
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = start_deaf(self.server.serve_forever)

    def take(self, probe: str) -> dict[str, Any] | None:
        """The agent's request (one with `tools`; a title request has none) whose last
        message is `probe`, forgotten once taken; None if none came."""
        with self.lock:
            for at, body in enumerate(self.bodies):
                if "tools" in body and _text(_last(body)) == probe:
                    return self.bodies.pop(at)
        return None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _stream() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-sessionfix",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [
        chunk({"role": "assistant", "content": "ok"}, None),
        {
            **chunk({}, "stop"),
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        },
    ]
    return b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events) + (
        b"data: [DONE]\n\n"
    )


def _last(body: Mapping[str, Any]) -> Any:
    messages = body.get("messages")
    return messages[-1] if isinstance(messages, list) and messages else None


def _text(message: Any) -> str | None:
    """A message's text when it is one text (a string, or one text part)."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


def stored_messages(body: Mapping[str, Any], probe: str) -> tuple[dict[str, Any], ...]:
    """The request's messages less the system messages before them and the probe at
    their end: what the stored session contributes."""
    messages = list(body["messages"])
    assert _text(messages[-1]) == probe, f"the request does not end with the probe: {messages}"
    messages.pop()
    while messages and messages[0].get("role") == "system":
        messages.pop(0)
    return tuple(messages)


# --- the server -----------------------------------------------------------------------------

_CONFIG = {
    "$schema": "https://opencode.ai/config.json",
    "autoupdate": False,
    "share": "disabled",
    "model": f"{PROVIDER}/{MODEL}",
    "small_model": f"{PROVIDER}/{MODEL}",
}


class _Server:
    """`opencode serve` on 127.0.0.1 in a process group of its own, on a scratch
    database it creates, with `_MockProvider` as its model."""

    def __init__(self) -> None:
        started = time.perf_counter()
        self.home = Path(tempfile.mkdtemp(prefix="sessionfix-opencode-"))
        self.mock = _MockProvider()
        self.database = self.home / "opencode.db"
        self.work = self.home / "work"
        self.work.mkdir()
        env = isolated_environment(self.home, self.database)
        config = {
            **_CONFIG,
            "provider": {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "sessionfix mock",
                    "options": {"baseURL": f"http://127.0.0.1:{self.mock.port}/v1", "apiKey": "-"},
                    "models": {MODEL: {"name": MODEL}},
                }
            },
        }
        (self.home / "config" / "opencode" / "opencode.json").write_text(json.dumps(config))
        self.log = (self.home / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [str(BINARY), "serve", "--port", "0", "--hostname", "127.0.0.1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=env,
            cwd=self.work,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self.loads = 0
        try:
            self.url = self._listening()
            project = self._get("/project/current")
            self.project = str(project["id"])
        except BaseException:
            self.close()
            raise
        START_SECONDS.append(time.perf_counter() - started)

    def _listening(self) -> str:
        """The server's address, from the line it prints once it listens."""
        assert self.process.stdout is not None
        found: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                text = line.decode("utf-8", "replace")
                if "listening on http://" in text and not found:
                    found.append(text.split("listening on ", 1)[1].strip())

        start_deaf(read)
        deadline = time.monotonic() + START_TIMEOUT
        while not found:
            if self.process.poll() is not None:
                raise RuntimeError(f"opencode serve exited: {self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"opencode serve did not listen in {START_TIMEOUT:.0f} s")
            time.sleep(0.05)
        return found[0]

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=LOAD_TIMEOUT) as answer:
            return json.loads(answer.read())

    def _post(self, path: str, body: Mapping[str, Any]) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=LOAD_TIMEOUT) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read()

    def place(self, source: Path, session: str) -> None:
        """Copy the session's rows from `source` into the scratch database, in place of
        whatever rows it had under those ids (ids are global: another session's rows
        under them go too)."""
        rows = session_rows(source, session)
        db = apsw.Connection(str(self.database))
        try:
            db.execute("PRAGMA busy_timeout=10000")
            db.execute("PRAGMA foreign_keys=ON")
            with db:
                for table, key in (
                    ("part", "session_id"),
                    ("message", "session_id"),
                    ("session", "id"),
                ):
                    db.execute(f"DELETE FROM {table} WHERE {key} = ?", (session,))
                for table in ("message", "part"):
                    for record in rows[table]:
                        db.execute(f"DELETE FROM {table} WHERE id = ?", (record["id"],))
                for table, records in rows.items():
                    for record in records:
                        if table == "session":
                            record = {
                                **record,
                                "project_id": self.project,
                                "workspace_id": None,
                                "directory": str(self.work),
                            }
                        columns = ", ".join(record)
                        marks = ", ".join("?" * len(record))
                        db.execute(
                            f"INSERT INTO {table} ({columns}) VALUES ({marks})",
                            tuple(record.values()),
                        )
        finally:
            db.close()

    def load(self, source: Path, session: str) -> OpencodeLoad:
        """Post a probe to the session as `source` holds it, and take the request."""
        started = time.perf_counter()
        self.place(source, session)
        self.loads += 1
        probe = f"{PROBE}-{self.loads}"
        status, answer = self._post(
            f"/session/{session}/message",
            {
                "model": {"providerID": PROVIDER, "modelID": MODEL},
                "parts": [{"type": "text", "text": probe}],
            },
        )
        body = self.mock.take(probe)
        LOAD_SECONDS.append(time.perf_counter() - started)
        if body is None:
            text = answer.decode("utf-8", "replace")[:2000]
            if status == 200:
                raise AssertionError(f"opencode sent no request for {session}: {self.tail()}")
            return OpencodeLoad(error=f"HTTP {status}: {text}", messages=())
        return OpencodeLoad(error=None, messages=stored_messages(body, probe), request=body)

    def tail(self) -> str:
        self.log.flush()
        return (self.home / "serve.log").read_text(errors="replace")[-2000:]

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()
        self.mock.close()
        shutil.rmtree(self.home, ignore_errors=True)


def _die_with_parent() -> None:
    """In the server's process before it runs: have Linux kill it when the thread that
    started it ends (a run killed before its exit handlers ran leaves no server behind;
    load from the thread that will outlive the loads, as pytest's does)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def session_rows(database: Path, session: str) -> dict[str, list[dict[str, Any]]]:
    """The session's `session`, `message` and `part` rows (all columns, by name), read
    from `database` opened read-only."""
    db = apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows: dict[str, list[dict[str, Any]]] = {}
        for table, key in (("session", "id"), ("message", "session_id"), ("part", "session_id")):
            cursor = db.execute(f"SELECT * FROM {table} WHERE {key} = ? ORDER BY id", (session,))
            names = [column[0] for column in cursor.getdescription()]
            rows[table] = [dict(zip(names, row, strict=True)) for row in cursor]
        assert rows["session"], f"{database} holds no session {session}"
        return rows
    finally:
        db.close()


_SERVER: list[_Server] = []
"""The run's server, once started."""
_CACHE: dict[str, OpencodeLoad] = {}
"""Loads of this run by the digest of the session's message and part rows."""


def _server() -> _Server:
    if not _SERVER:
        _SERVER.append(_Server())
        atexit.register(_SERVER[0].close)
    return _SERVER[0]


def _digest(database: Path, session: str) -> str:
    """What a load depends on: the session's id and its message and part rows (the
    session row's place and times take no part in the context)."""
    rows = session_rows(database, session)
    shown = [session, rows["message"], rows["part"]]
    return hashlib.sha256(json.dumps(shown, sort_keys=True, default=repr).encode()).hexdigest()


def load_with_opencode(
    sessions: Sequence[tuple[Path, str]],
) -> dict[tuple[Path, str], OpencodeLoad]:
    """What opencode sends the model for each (database, session id), loaded one after
    the other by the run's one server. Sessions with the same rows are loaded once."""
    missing = opencode_missing()
    if missing is not None:
        raise AssertionError(missing)
    loads = {}
    for database, session in sessions:
        digest = _digest(database, session)
        if digest not in _CACHE:
            _CACHE[digest] = _server().load(database, session)
        loads[database, session] = _CACHE[digest]
    return loads
