"""SIGKILL at every step of an in-place repair: the path then holds the original or the
complete repaired bytes, nothing else, no byte is lost, and what is left over is never
taken for a session; the next run finishes the job.

Each kill point is a system call or a block of written bytes, counted in a forked child
by an audit hook (opens, renames, links, removals, mode and owner changes), by wrapping
`os.fsync`, and by cutting the repaired bytes into 1 KiB blocks. The child kills itself
with SIGKILL at point N, for every N of a full run.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from sessionfix import Settings
from sessionfix.discovery import discover
from sessionfix.repair import targets
from sessionfix.repair.plan import RepairPlan
from sessionfix.repair.targets import repair_in_place
from sessionfix.safety.locks import SessionLocked

from .sessions import Session

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

AUDITED: Final = frozenset(
    {"open", "os.rename", "os.link", "os.remove", "os.chmod", "os.chown", "os.truncate"}
)
BLOCK: Final = 1024
AT_REST: Final = Settings(quiescence=0.0)
HEADER_ID: Final = "019f92c8-d694-7ac3-9144-e3b22add01f3"
SURVIVED: list[int] = []
"""Kill points survived across this module, for the reliability figures."""


@pytest.fixture(autouse=True)
def _no_settling(monkeypatch: pytest.MonkeyPatch) -> None:
    """No writer appends here: skip the pause for appends in flight at the rename."""
    monkeypatch.setattr(targets, "SWAP_SETTLE_SECONDS", 0.0)


def _session_bytes() -> bytes:
    """About 150 KB with overflow clones (SF201) to drop and a glued line (SF001) to split."""
    session = Session()
    for turn in range(120):
        prompt = f"turn {turn}: " + "work on the parser " * 20
        user = session.user(prompt)
        if turn % 7 == 3:
            line = session.lines[-1]
            session.lines.append(line.replace(f'"id":"{user}"', f'"id":"c{user[1:]}"'))
            session.lines[-1] = session.lines[-1].replace(
                f'"parentId":"{session.ids[-2]}"' if len(session.ids) > 1 else '"parentId":null',
                f'"parentId":"{user}"',
            )
        session.assistant([])
    text = session.text()
    lines = text.split("\n")
    lines[20] = lines[20] + lines[21]
    del lines[21]
    return "\n".join(lines).encode()


def _in_child(action: Callable[[], None], kill_at: int | None, report: int) -> int:
    """Fork; in the child count kill points, dying at `kill_at`; return the child's pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        count = 0

        def point() -> None:
            nonlocal count
            count += 1
            if count == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        def audit(event: str, args: tuple[Any, ...]) -> None:
            # Reading /proc (the look for processes writing the session) changes nothing:
            # as many kill points as the machine has processes would add no case.
            if event in AUDITED and not (event == "open" and _in_proc(args[0])):
                point()

        fsync = os.fsync

        def counted_fsync(fd: int) -> None:
            point()
            fsync(fd)

        chunks = RepairPlan.chunks

        def blockwise(self: RepairPlan) -> Iterator[bytes]:
            for chunk in chunks(self):
                for start in range(0, len(chunk), BLOCK):
                    point()
                    yield chunk[start : start + BLOCK]

        os.fsync = counted_fsync
        RepairPlan.chunks = blockwise  # type: ignore[method-assign]
        sys.addaudithook(audit)
        action()
        os.write(report, f"{count}\n".encode())
        code = 0
    except BaseException:
        code = 3
    finally:
        os._exit(code)


def _in_proc(opened: object) -> bool:
    return isinstance(opened, str | bytes | os.PathLike) and os.fsdecode(opened).startswith(
        "/proc/"
    )


def _repair(path: Path, openclaw: bool) -> Callable[[], None]:
    def action() -> None:
        repair_in_place(path, AT_REST, break_stale_lock=openclaw)

    return action


def _run(action: Callable[[], None], kill_at: int | None) -> tuple[int, str]:
    read, write = os.pipe()
    pid = _in_child(action, kill_at, write)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    return status, said


def _expected(tmp_path: Path, original: bytes, name: str) -> bytes:
    folder = tmp_path / "expected"
    folder.mkdir()
    path = folder / name
    path.write_bytes(original)
    repair_in_place(path, AT_REST)
    return path.read_bytes()


@pytest.mark.parametrize("openclaw", [False, True], ids=["pi", "openclaw"])
def test_every_kill_point_leaves_the_original_or_the_repair(tmp_path: Path, openclaw: bool) -> None:
    original = _session_bytes()
    name = f"{HEADER_ID}.jsonl"
    repaired = _expected(tmp_path, original, name)
    assert repaired != original
    folder = tmp_path / ("agents/main/sessions" if openclaw else "pi")
    folder.mkdir(parents=True)
    path = folder / name

    def fresh() -> None:
        for leftover in folder.iterdir():
            leftover.unlink()
        path.write_bytes(original)

    fresh()
    status, said = _run(_repair(path, openclaw), None)
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0
    assert path.read_bytes() == repaired
    points = int(said)
    assert points >= 100
    outcomes = {"original": 0, "repaired": 0}
    for kill_at in range(1, points + 1):
        fresh()
        status, _ = _run(_repair(path, openclaw), kill_at)
        assert os.WIFSIGNALED(status)
        assert os.WTERMSIG(status) == signal.SIGKILL
        now = path.read_bytes()
        assert now in (original, repaired), f"kill point {kill_at}: the path holds other bytes"
        outcomes["original" if now == original else "repaired"] += 1
        for other in folder.iterdir():
            if ".sessionfix-bak-" in other.name:
                assert other.read_bytes() == original, f"kill point {kill_at}: bad backup"
        assert discover([folder]).files == [path], f"kill point {kill_at}: a leftover is scanned"
        lock = path.with_name(path.name + ".lock")
        if lock.exists():
            with pytest.raises(SessionLocked, match="dead-pid"):
                repair_in_place(path, AT_REST)
        repair_in_place(path, AT_REST, break_stale_lock=True)
        assert path.read_bytes() == repaired, f"kill point {kill_at}: no recovery"
        assert not [p for p in folder.iterdir() if "sessionfix-tmp" in p.name or ".lock" in p.name]
        SURVIVED.append(kill_at)
    assert outcomes["original"]
    assert outcomes["repaired"]
