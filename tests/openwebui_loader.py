"""open-webui's own reading of `webui.db` chats (0.12.4, pinned in `tests/open-webui`).

One oracle process per test run (`tests/open-webui/oracle.py`, run by the venv `make
open-webui` builds in `.cache/open-webui`), started at the first request and stopped
when the run ends. It makes new databases with open-webui's own alembic migrations
(`created_database`: the exact schema a 0.12.4 server has) and loads chats through
open-webui's own read path (`load_with_openwebui`: a whole database's chats per
request, read from a copy, so that the backfill of `chat_message` rows open-webui does
while reading never reaches the database a test holds). Spec formats/open-webui.md §8.

`make test` installs the pinned packages and sets `SESSIONFIX_REQUIRE_OPENWEBUI=1`, so
that a missing venv fails the run there; a bare `pytest` leaves the modules that need
it out when they are collected (`require_openwebui_at_collection`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

PYTHON = ROOT / ".cache" / "open-webui" / "venv" / "bin" / "python"
ORACLE = ROOT / "tests" / "open-webui" / "oracle.py"
PR_SET_PDEATHSIG = 1
SECONDS: list[float] = []
"""How long each request took (the first includes open-webui's start)."""


def openwebui_missing() -> str | None:
    """Why open-webui cannot run here (None when it can)."""
    if not PYTHON.exists():
        return "open-webui is not installed in .cache/open-webui (make test installs it)"
    return None


def require_openwebui_at_collection() -> None:
    """Call at the top of a test module that needs open-webui: the module is left out
    when collected if it cannot run, and under `SESSIONFIX_REQUIRE_OPENWEBUI=1` its
    collection fails instead."""
    missing = openwebui_missing()
    if missing is None:
        return
    if os.environ.get("SESSIONFIX_REQUIRE_OPENWEBUI") == "1":
        pytest.fail(missing, pytrace=False)
    pytest.skip(missing, allow_module_level=True)


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class _Oracle:
    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="sessionfix-open-webui-"))
        self.log = (self.home / "oracle.log").open("wb")
        self.process = subprocess.Popen(
            [str(PYTHON), str(ORACLE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=self.home,
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(self.home)},
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )

    def ask(self, request: dict[str, Any]) -> Any:
        started = time.perf_counter()
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        SECONDS.append(time.perf_counter() - started)
        if not line:
            raise AssertionError(f"open-webui's oracle exited: {self.tail()}")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"open-webui's oracle: {answer['error']}\n{self.tail()}")
        return answer["ok"]

    def tail(self) -> str:
        self.log.flush()
        return (self.home / "oracle.log").read_text(errors="replace")[-3000:]

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


_ORACLE: list[_Oracle] = []


def _oracle() -> _Oracle:
    missing = openwebui_missing()
    if missing is not None:
        raise AssertionError(missing)
    if not _ORACLE:
        _ORACLE.append(_Oracle())
        atexit.register(_ORACLE[0].close)
    return _ORACLE[0]


def created_database(path: Path) -> Path:
    """A new, empty `webui.db` at `path`, made by open-webui 0.12.4's own migrations."""
    _oracle().ask({"op": "create", "path": str(path)})
    return path


def saved_by_openwebui(database: Path, chats: Mapping[str, Mapping[str, Any]]) -> Path:
    """Save each chat's document (`{"title", "history": {...}}`) into `database` as
    open-webui's own save of a browser's chat does (`Chats.update_chat_by_id`)."""
    saved = _oracle().ask({"op": "save", "path": str(database), "chats": dict(chats)})
    assert all(saved.values()), saved
    return database


def load_with_openwebui(
    databases: Sequence[tuple[Path, Sequence[str] | None]],
) -> dict[Path, dict[str, dict[str, Any]]]:
    """What open-webui reads of each database's chats (those named, or all): per chat
    its `stored_current_id`, `current_id` (after its in-memory repair), `source`,
    `branch` (message ids), `checkpoint` and `summary` (native compaction), `payload`
    (the messages sent before filters)."""
    oracle = _oracle()
    return {
        path: oracle.ask(
            {"op": "load", "path": str(path), "chats": None if chats is None else list(chats)}
        )
        for path, chats in databases
    }
