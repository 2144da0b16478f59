"""Codex's own history reconstruction, run on rollout files (`codex app-server`, the
binary of the `@openai/codex` package pinned in `tests/codex`).

How a file is loaded (spec `real-clients.md`, Codex): one app-server process per batch
of files, each with `HOME` and `CODEX_HOME` in a temporary directory of its own, whose
`config.toml` names a private model provider served by a mock Responses API on
127.0.0.1 (`_MockResponses`, in this process; nothing goes to the network). Each file
is copied to `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl` with
`session_meta.payload.model_provider` set to that provider (a thread's provider cannot
be changed on resume; the field takes no part in the history), then `thread/resume`
rebuilds its history and `turn/start` sends one probe message: the `input` array of the
request Codex then makes is the rebuilt history, followed by the items Codex writes to
the rollout for the new turn (cut off by their ids, see `_history`).

The resume names the file by `path` (an experimental field, hence `experimentalApi` at
`initialize`): by id alone Codex takes only UUIDs. A file whose thread id an earlier
file of the same call has is loaded under a fresh id (`_renamed`), as one app-server
holds one thread per id; the id takes no part in the history either. The binary is the
linux-x64 one of the package.

`make test` installs the pinned package into `.cache/codex` and sets
`SESSIONFIX_REQUIRE_CODEX=1`, so that a missing binary fails the run there. A bare
`pytest` without them leaves the modules that need it out when they are collected
(`require_codex_at_collection`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
from .robustness import start_deaf

PACKAGE = ROOT / ".cache" / "codex" / "node_modules" / "@openai"
BINARY = PACKAGE / "codex-linux-x64" / "vendor" / "x86_64-unknown-linux-musl" / "bin" / "codex"
PROVIDER = "sessionfix-mock"
PROBE = "sessionfix probe: reply with one word."
"""The user message each load sends; what follows it in the request is Codex's own."""
REPLY_ID = "msg_sessionfix_reply"
"""The id of the mock model's reply."""
BATCH = 40
"""Files per app-server process at most (starting one takes a fraction of a second,
loading a file about a tenth)."""
WORKERS = 4
"""App-server processes run at once."""
LOAD_TIMEOUT = 60.0
"""Seconds one file may take (resume and probe turn) before the load is abandoned."""


@dataclass(frozen=True)
class CodexLoad:
    """What Codex made of one file."""

    error: str | None
    """Why Codex refused the thread (the JSON-RPC error of `thread/resume` or of the
    probe turn), or None."""
    history: tuple[dict[str, Any], ...]
    """The items Codex sent the model as the thread's history (empty on an error)."""
    request: tuple[dict[str, Any], ...] = ()
    """The whole `input` array of the probe request, history and new turn."""
    appended: bytes = b""
    """What Codex wrote to its copy of the rollout during the load (the whole copy if it
    rewrote what was there)."""
    instructions: Any = None
    """The request's `instructions`."""
    turns: tuple[Any, ...] = ()
    """The thread's turns as the UI shows them after the resume (`thread/read`), each
    as the kinds of its items with their text (`_shown`)."""


def codex_missing() -> str | None:
    """Why Codex cannot run here (None when it can)."""
    if not BINARY.exists():
        where = PACKAGE.relative_to(ROOT)
        return f"Codex is not installed in {where} (make test installs it)"
    return None


def require_codex_at_collection() -> None:
    """Call at the top of a test module that needs Codex: the module is left out when it
    is collected if Codex cannot run, and under `SESSIONFIX_REQUIRE_CODEX=1` its
    collection fails instead."""
    missing = codex_missing()
    if missing is None:
        return
    if os.environ.get("SESSIONFIX_REQUIRE_CODEX") == "1":
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing, allow_module_level=True)


LOAD_SECONDS: list[float] = []
"""Wall-clock seconds of each `load_with_codex` call of this run, in call order."""


# --- the mock Responses API -----------------------------------------------------------------


class _MockResponses:
    """An HTTP server on 127.0.0.1 answering every POST with a Responses API event
    stream holding one assistant message, and keeping each request's body by the first
    segment of its path: each app-server's provider has a `base_url` of its own."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.waiters: dict[str, threading.Event] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = b'{"data":[],"models":[]}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                key = self.path.split("/")[1] if self.path.count("/") > 1 else ""
                outer._keep(key, body)
                stream = b"".join(_sse(event) for event in _events())
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(stream)))
                self.end_headers()
                self.wfile.write(stream)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = start_deaf(self.server.serve_forever)

    def _keep(self, key: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.bodies.setdefault(key, []).append(body)
            self.waiters.setdefault(key, threading.Event()).set()

    def take(self, key: str, timeout: float) -> dict[str, Any] | None:
        with self.lock:
            event = self.waiters.setdefault(key, threading.Event())
        if not event.wait(timeout):
            return None
        with self.lock:
            bodies = self.bodies.pop(key)
            self.waiters.pop(key, None)
        return bodies[0]

    def clear(self, key: str) -> None:
        """Forget what else came for `key` (a request the probe turn made after the
        first)."""
        with self.lock:
            self.bodies.pop(key, None)
            self.waiters.pop(key, None)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _events() -> list[dict[str, Any]]:
    message = {
        "type": "message",
        "role": "assistant",
        "id": REPLY_ID,
        "status": "completed",
        "content": [{"type": "output_text", "text": "ok", "annotations": []}],
    }
    response = {"id": "resp_probe", "object": "response", "status": "completed", "output": []}
    return [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {
            "type": "response.completed",
            "response": {
                **response,
                "output": [message],
                "usage": {
                    "input_tokens": 1,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 1,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 2,
                },
            },
        },
    ]


# --- one app-server process -------------------------------------------------------------


class _Refused(Exception):
    """Codex answered a request with an error."""


class _AppServer:
    """`codex app-server` over stdio, in a process group of its own."""

    def __init__(self, home: Path) -> None:
        env = {
            "HOME": str(home),
            "CODEX_HOME": str(home / ".codex"),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "RUST_LOG": "error",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        self.stderr = (home / "stderr.log").open("wb")
        self.process = subprocess.Popen(
            [str(BINARY), "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            cwd=home,
            start_new_session=True,
        )
        self.home = home
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.next_id = 0
        self.reader = start_deaf(self._read)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                self.messages.put(json.loads(line))
            except ValueError:
                continue
        self.messages.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        self.next_id += 1
        ident = self.next_id
        self.send({"id": ident, "method": method, "params": params})
        message = self.wait(lambda m: m.get("id") == ident and "method" not in m, timeout, method)
        if "error" in message:
            raise _Refused(json.dumps(message["error"]))
        return message.get("result")

    def wait(self, matches: Any, timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"Codex gave no answer to {what} in {timeout:.0f} s")
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise RuntimeError(f"Codex exited while waiting for {what}: {self.log()}")
            if "method" in message and "id" in message:
                # A request from the server (an approval): decline it.
                self.send({"id": message["id"], "error": {"code": -32601, "message": "no"}})
                continue
            if matches(message):
                return message

    def log(self) -> str:
        self.stderr.flush()
        text = (self.home / "stderr.log").read_text(errors="replace")
        return text[-2000:]

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.stderr.close()


# --- placing a file where Codex looks for it ------------------------------------------------


def _meta(data: bytes) -> tuple[str, str]:
    """The thread id and time stamp of the file's first `session_meta` record (read
    leniently: a BOM or a missing field still gives a name to store the file under)."""
    for line in data.splitlines():
        try:
            record = json.loads(line.lstrip(b"\xef\xbb\xbf \t\r"))
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == "session_meta":
            payload = record.get("payload")
            if isinstance(payload, dict):
                ident = payload.get("id")
                stamp = payload.get("timestamp", record.get("timestamp"))
                return (
                    ident if isinstance(ident, str) else "",
                    stamp if isinstance(stamp, str) else "",
                )
    return "", ""


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def stand_in_id(ident: str) -> str:
    """The UUID a stand-in copy gives a thread whose id is no UUID."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "sessionfix:" + ident))


def _private_copy(data: bytes, stand_in: bool, renamed: dict[str, str]) -> bytes:
    """The file with every `session_meta` record's `payload.model_provider` set to the
    mock provider, each `payload.id` in `renamed` replaced by the id it maps to, and, with
    `stand_in`, a string `payload.id` that is no UUID replaced by `stand_in_id` (Codex
    takes only UUIDs); every other byte as it was."""
    out = []
    for line in data.splitlines(keepends=True):
        body = line.rstrip(b"\r\n")
        end = line[len(body) :]
        lead = len(body) - len(body.lstrip(b"\xef\xbb\xbf \t"))
        try:
            record = json.loads(body[lead:])
        except ValueError:
            out.append(line)
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if record.get("type") == "session_meta" and isinstance(payload, dict):
            payload["model_provider"] = PROVIDER
            ident = payload.get("id")
            if isinstance(ident, str) and ident in renamed:
                payload["id"] = renamed[ident]
            elif stand_in and isinstance(ident, str) and not _is_uuid(ident):
                payload["id"] = stand_in_id(ident)
            body = body[:lead] + json.dumps(record, ensure_ascii=False).encode()
        out.append(body + end)
    return b"".join(out)


def _stored_name(ident: str, stamp: str) -> tuple[str, str]:
    """(`YYYY/MM/DD`, `rollout-<YYYY-MM-DDThh-mm-ss>-<id>.jsonl`) for a thread."""
    digits = stamp[:19] if len(stamp) >= 19 and stamp[4] == "-" else "2026-01-01T00:00:00"
    day = digits[:10].replace("-", "/")
    return day, f"rollout-{digits.replace(':', '-')}-{ident}.jsonl"


def _new_turn(appended: bytes) -> list[Any]:
    """The ids of the items Codex wrote to the rollout for the probe turn before the
    model's reply: the turn's context and the probe, the tail of its request."""
    ids = []
    for line in appended.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if record.get("type") == "response_item" and isinstance(payload, dict):
            if payload.get("id") == REPLY_ID:
                break
            ids.append(payload.get("id"))
    return ids


def _history(request: list[dict[str, Any]], appended: bytes) -> list[dict[str, Any]]:
    """The rebuilt history: the request's input less the probe turn at its end (the
    items Codex wrote to the rollout for that turn, matched by their ids)."""
    new = _new_turn(appended)
    cut = len(request) - len(new)
    tail = [item.get("id") for item in request[cut:]]
    assert new, f"Codex wrote no item for the probe turn: {appended[-2000:]!r}"
    assert tail == new, f"the probe turn {new} is not the end of the request {tail}"
    return request[:cut]


# --- loading ------------------------------------------------------------------------------

_CONFIG = """\
model = "mock-model"
model_provider = "{provider}"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.{provider}]
name = "sessionfix mock"
base_url = "http://127.0.0.1:{port}/{key}/v1"
wire_api = "responses"
requires_openai_auth = false
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false
"""


def _load_batch(mock: _MockResponses, copies: list[bytes]) -> list[CodexLoad]:
    """Load each private copy in one app-server process, one after the other."""
    with tempfile.TemporaryDirectory(prefix="sessionfix-codex-") as tmp:
        home = Path(tmp)
        key = home.name
        (home / ".codex").mkdir()
        (home / ".codex" / "config.toml").write_text(
            _CONFIG.format(provider=PROVIDER, port=mock.port, key=key)
        )
        (home / "work").mkdir()
        server = _AppServer(home)
        try:
            server.request(
                "initialize",
                {
                    "clientInfo": {"name": "sessionfix-tests", "version": "0"},
                    "capabilities": {"experimentalApi": True},
                },
                LOAD_TIMEOUT,
            )
            server.send({"method": "initialized"})
            loads = []
            for n, copy in enumerate(copies):
                try:
                    loads.append(_load_one(server, mock, key, copy, n))
                except (AssertionError, RuntimeError, TimeoutError) as failure:
                    ident, stamp = _meta(copy)
                    raise AssertionError(
                        f"Codex failed on the rollout of thread {ident!r} ({stamp}): "
                        f"{failure}\nits log ends:\n{server.log()}"
                    ) from failure
            return loads
        finally:
            server.close()


def _load_one(server: _AppServer, mock: _MockResponses, key: str, copy: bytes, n: int) -> CodexLoad:
    ident, stamp = _meta(copy)
    day, name = _stored_name(ident or f"00000000-0000-0000-0000-{n:012d}", stamp)
    target = server.home / ".codex" / "sessions" / day / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(copy)
    try:
        # `path` (an experimental field) names the file; the id alone finds a file by
        # its name too, but takes only UUIDs.
        resumed = server.request(
            "thread/resume",
            {"threadId": ident or name, "path": str(target), "cwd": str(server.home / "work")},
            LOAD_TIMEOUT,
        )
        thread = resumed["thread"]["id"]
        shown = server.request(
            "thread/read", {"threadId": thread, "includeTurns": True}, LOAD_TIMEOUT
        )
        server.request(
            "turn/start",
            {"threadId": thread, "input": [{"type": "text", "text": PROBE}]},
            LOAD_TIMEOUT,
        )
    except _Refused as refused:
        return CodexLoad(error=str(refused).replace(str(server.home), "$HOME"), history=())
    body = mock.take(key, LOAD_TIMEOUT)
    if body is None:
        raise AssertionError(f"Codex sent no model request for {name}: {server.log()}")
    server.wait(
        lambda m: (
            m.get("method") == "turn/completed" and m.get("params", {}).get("threadId") == thread
        ),
        LOAD_TIMEOUT,
        "the probe turn",
    )
    mock.clear(key)
    request = body.get("input")
    assert isinstance(request, list), f"no input array in Codex's request: {body}"
    after = target.read_bytes()
    appended = after[len(copy) :] if after.startswith(copy) else after
    return CodexLoad(
        error=None,
        history=tuple(_history(request, appended)),
        request=tuple(request),
        appended=appended,
        instructions=body.get("instructions"),
        turns=tuple(_shown(turn) for turn in shown["thread"].get("turns") or ()),
    )


def _shown(turn: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A UI turn as the kinds of its items and what they show (ids left out: Codex makes
    some of them up on every read)."""
    return tuple(
        (item.get("type"), item.get("text") or item.get("content") or item.get("command"))
        for item in turn.get("items") or ()
    )


def _serving(home: Path, mock: _MockResponses | None) -> _AppServer:
    """An initialized app-server on the Codex home `home/.codex`, its config naming the
    mock provider (served by `mock`, or by nothing where no request is to be made)."""
    codex = home / ".codex"
    codex.mkdir(parents=True, exist_ok=True)
    (home / "work").mkdir(exist_ok=True)
    config = codex / "config.toml"
    if mock is not None or not config.exists():
        port = mock.port if mock is not None else 9
        config.write_text(_CONFIG.format(provider=PROVIDER, port=port, key=home.name))
    server = _AppServer(home)
    try:
        server.request(
            "initialize",
            {
                "clientInfo": {"name": "sessionfix-tests", "version": "0"},
                "capabilities": {"experimentalApi": True},
            },
            LOAD_TIMEOUT,
        )
        server.send({"method": "initialized"})
    except BaseException:
        server.close()
        raise
    return server


def start_threads(home: Path, prompts: list[str]) -> list[str]:
    """Threads Codex itself starts in the Codex home `home/.codex`, one per prompt, each
    with one turn the mock model answers (its rollout and its row in the thread index
    are Codex's own); the app-server is stopped before this returns. Their ids."""
    mock = _MockResponses()
    try:
        server = _serving(home, mock)
        try:
            threads = []
            for prompt in prompts:
                started = server.request("thread/start", {"cwd": str(home / "work")}, LOAD_TIMEOUT)
                thread = started["thread"]["id"]
                server.request(
                    "turn/start",
                    {"threadId": thread, "input": [{"type": "text", "text": prompt}]},
                    LOAD_TIMEOUT,
                )
                server.wait(
                    lambda m, t=thread: (
                        m.get("method") == "turn/completed"
                        and m.get("params", {}).get("threadId") == t
                    ),
                    LOAD_TIMEOUT,
                    "a turn",
                )
                threads.append(thread)
            return threads
        finally:
            server.close()
    finally:
        mock.close()


@contextlib.contextmanager
def codex_running(home: Path) -> Iterator[int]:
    """An app-server running on the Codex home `home/.codex` for as long as the block
    lasts (it has listed the home's threads from its index, which it has open; a listing
    from the rollouts would mend the rows of the newest ones); its pid."""
    server = _serving(home, None)
    try:
        server.request("thread/list", {"useStateDbOnly": True}, LOAD_TIMEOUT)
        yield server.process.pid
    finally:
        server.close()


def list_threads(home: Path, params: dict[str, Any]) -> list[dict[str, Any]]:
    """What `thread/list` with `params` returns in the Codex home `home/.codex` (every
    page), from an app-server started for it and stopped before this returns."""
    server = _serving(home, None)
    try:
        listed: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = server.request("thread/list", {**params, "cursor": cursor}, LOAD_TIMEOUT)
            listed += page["data"]
            cursor = page.get("nextCursor")
            if not cursor:
                return listed
    finally:
        server.close()


_CACHE: dict[tuple[str, bool], CodexLoad] = {}
"""Loads of this run by the SHA-256 of the file's bytes (and stand-in)."""


def _batches(digests: list[str]) -> list[list[str]]:
    """The copies (by digest) in batches of at most `BATCH`, spread over at least
    `WORKERS` batches where there are that many."""
    count = max(-(-len(digests) // BATCH), min(WORKERS, len(digests)))
    return [digests[at::count] for at in range(count)]


def _renamed(data: bytes, digest: str, stand_in: bool, seen: set[str]) -> dict[str, str]:
    """Where the file's thread id (a UUID, or one standing in) is one an earlier file of
    this call has, the fresh UUID it is given: one app-server cannot hold two threads
    with one id, and the id takes no part in the history. Nothing where the id is new."""
    ident = _meta(data)[0]
    used = stand_in_id(ident) if stand_in and ident and not _is_uuid(ident) else ident
    if not _is_uuid(used):
        return {}
    if used not in seen:
        seen.add(used)
        return {}
    return {ident: str(uuid.uuid5(uuid.NAMESPACE_URL, f"sessionfix:{used}:{digest}"))}


def load_with_codex(files: list[Path], stand_in: bool = False) -> dict[Path, CodexLoad]:
    """Load every file as Codex resumes it, in up to `WORKERS` app-server processes at
    once, each taking a batch of files. Files with the same bytes are loaded once; a
    file whose thread id an earlier one has is loaded under a fresh one (`_renamed`).
    With `stand_in`, a thread id that is no UUID is replaced by one (`stand_in_id`)."""
    missing = codex_missing()
    if missing is not None:
        raise AssertionError(missing)
    started = time.perf_counter()
    digests = {}
    todo: dict[str, bytes] = {}
    seen: set[str] = set()
    for path in files:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        digests[path] = digest
        if (digest, stand_in) not in _CACHE and digest not in todo:
            todo[digest] = _private_copy(data, stand_in, _renamed(data, digest, stand_in, seen))
    mock = _MockResponses()
    try:
        batches = _batches(list(todo))
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            results = list(pool.map(lambda b: _load_batch(mock, [todo[d] for d in b]), batches))
    finally:
        mock.close()
    for batch, loads in zip(batches, results, strict=True):
        for digest, load in zip(batch, loads, strict=True):
            _CACHE[digest, stand_in] = load
    LOAD_SECONDS.append(time.perf_counter() - started)
    return {path: _CACHE[digests[path], stand_in] for path in files}
