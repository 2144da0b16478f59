"""In-place repair next to live agents and other sessionfix runs (cli-and-safety.md §8):
OpenClaw's write lock, the sidecar lock, links, and a file that grows meanwhile."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sessionfix import Settings
from sessionfix.cli import app
from sessionfix.repair import verification
from sessionfix.repair.planned import PlannedRepair, RepairResult
from sessionfix.repair.targets import repair_in_place
from sessionfix.repair.verification import VerificationFailed
from sessionfix.safety import locks
from sessionfix.safety.locks import SessionLocked, lock_state, sidecar_lock
from sessionfix.safety.writing import FileChanged

from .conftest import FIXTURES
from .robustness import tree_state

CLONES = FIXTURES / "SF201-three-back-to-back-copies" / "input.jsonl"
REPAIRED = FIXTURES / "SF201-three-back-to-back-copies" / "repaired.jsonl"
AT_REST = Settings(quiescence=0.0)
ENV = {"NO_COLOR": "1", "COLUMNS": "120"}
LONG_AGO = 1_700_000_000
LAST_ID = "a0000008"
HEADER_ID = "019f92c8-d694-7ac3-9144-e3b22add01f3"


def run(*args: str | Path):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [str(a) for a in args], env=ENV, color=False)


def appended(n: int, parent: str = LAST_ID) -> bytes:
    """A user message as an agent appends it after the session's leaf."""
    record = {
        "type": "message",
        "id": f"ap{n:06d}",
        "parentId": parent if n == 0 else f"ap{n - 1:06d}",
        "timestamp": "2026-07-24T07:00:00.000Z",
        "message": {"role": "user", "content": f"appended {n}", "timestamp": 1784876400000 + n},
    }
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def _session(folder: Path, name: str = "s.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(CLONES.read_bytes())
    os.utime(path, (LONG_AGO, LONG_AGO))
    return path


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return _session(tmp_path)


@pytest.fixture
def openclaw_session(tmp_path: Path) -> Path:
    return _session(tmp_path / "agents" / "main" / "sessions", f"{HEADER_ID}.jsonl")


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _during_verification(monkeypatch: pytest.MonkeyPatch, action: Iterator[None]) -> None:
    """Run the next step of `action` each time a repair verifies its written bytes."""
    verify = verification.verify

    def verifying(planned: PlannedRepair, written: Path, filename: str):  # type: ignore[no-untyped-def]
        next(action, None)
        return verify(planned, written, filename)

    monkeypatch.setattr(verification, "verify", verifying)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ---- OpenClaw's write lock ----------------------------------------------------------------


def test_an_openclaw_session_is_rewritten_under_openclaws_own_lock(
    openclaw_session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock exists, in OpenClaw's format, while the repair writes; it is gone after."""
    seen: list[bytes] = []
    lock = openclaw_session.with_name(openclaw_session.name + ".lock")

    def look() -> Iterator[None]:
        seen.append(lock.read_bytes())
        yield

    _during_verification(monkeypatch, look())
    result = repair_in_place(openclaw_session, AT_REST)
    assert result.changed
    payload = json.loads(seen[0])
    assert payload["pid"] == os.getpid()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", payload["createdAt"])
    assert seen[0].decode() == json.dumps(payload, indent=2)  # JSON.stringify(x, null, 2)
    assert result.backup is not None
    assert _listing(openclaw_session.parent) == [openclaw_session.name, result.backup.name]


def test_a_live_lock_refuses_the_repair_and_stays(openclaw_session: Path) -> None:
    lock = openclaw_session.with_name(openclaw_session.name + ".lock")
    holder = os.getppid()
    lock.write_text(json.dumps({"pid": holder, "createdAt": "2099-01-01T00:00:00.000Z"}))
    before = lock.read_bytes()
    result = run(
        "repair", "--in-place", "--quiescence", "0", "--break-stale-lock", openclaw_session
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"session is locked by pid {holder}" in result.stderr
    assert openclaw_session.read_bytes() == CLONES.read_bytes()
    assert lock.read_bytes() == before


def test_a_stale_lock_is_broken_only_when_asked(openclaw_session: Path) -> None:
    lock = openclaw_session.with_name(openclaw_session.name + ".lock")
    lock.write_text(json.dumps({"pid": _dead_pid(), "createdAt": "2026-11-22T06:00:00.000Z"}))
    refused = run("repair", "--in-place", "--quiescence", "0", openclaw_session)
    assert refused.exit_code == 2
    assert "stale lock" in refused.stderr
    assert "dead-pid" in refused.stderr
    assert "--break-stale-lock" in refused.stderr
    assert openclaw_session.read_bytes() == CLONES.read_bytes()
    broken = run(
        "repair", "--in-place", "--quiescence", "0", "--break-stale-lock", openclaw_session
    )
    assert broken.exit_code == 0, broken.stderr
    assert openclaw_session.read_bytes() == REPAIRED.read_bytes()
    assert not lock.exists()


def test_a_lock_that_is_no_longer_ours_is_not_released(
    openclaw_session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Release deletes the lock only while it still holds our payload."""
    lock = openclaw_session.with_name(openclaw_session.name + ".lock")
    theirs = json.dumps({"pid": os.getppid(), "createdAt": "2099-01-01T00:00:00.000Z"})

    def replace_lock() -> Iterator[None]:
        lock.write_text(theirs)
        yield

    _during_verification(monkeypatch, replace_lock())
    repair_in_place(openclaw_session, AT_REST)
    assert lock.read_text() == theirs


def test_an_own_pid_lock_not_held_is_an_orphan(openclaw_session: Path) -> None:
    lock = openclaw_session.with_name(openclaw_session.name + ".lock")
    lock.write_text(json.dumps({"pid": os.getpid(), "createdAt": "2099-01-01T00:00:00.000Z"}))
    assert lock_state(lock).stale_reasons == ("orphan-self-pid",)


def test_a_lock_beside_a_pi_session_is_honoured_too(session: Path) -> None:
    lock = session.with_name(session.name + ".lock")
    lock.write_text(json.dumps({"pid": os.getppid(), "createdAt": "2099-01-01T00:00:00.000Z"}))
    with pytest.raises(SessionLocked, match="locked by pid"):
        repair_in_place(session, AT_REST)
    assert session.read_bytes() == CLONES.read_bytes()


def test_a_pi_session_gets_no_lock_file(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def look() -> Iterator[None]:
        seen.append(_listing(session.parent))
        yield

    _during_verification(monkeypatch, look())
    repair_in_place(session, AT_REST)
    assert not any(name.endswith(".jsonl.lock") for name in seen[0])
    assert "s.jsonl.sessionfix.lock" in seen[0]


# ---- the sidecar lock between sessionfix runs -----------------------------------------------


def test_a_second_run_waits_for_the_first(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(locks, "SIDECAR_WAIT_SECONDS", 0.2)
    with sidecar_lock(session):
        started = time.monotonic()
        with pytest.raises(SessionLocked, match="another sessionfix run"):
            repair_in_place(session, AT_REST)
        assert time.monotonic() - started >= 0.2
    assert session.read_bytes() == CLONES.read_bytes()
    assert _listing(session.parent) == ["s.jsonl"]


def test_concurrent_runs_repair_once(session: Path) -> None:
    """Four runs at once: one repairs, the others then find nothing to do."""
    results: list[RepairResult | BaseException] = []

    def repair() -> None:
        try:
            results.append(repair_in_place(session, AT_REST))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=repair) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(r, RepairResult) for r in results), results
    assert sum(r.changed for r in results if isinstance(r, RepairResult)) == 1
    assert session.read_bytes() == REPAIRED.read_bytes()
    assert len([n for n in _listing(session.parent) if ".sessionfix-bak-" in n]) == 1


# ---- links ------------------------------------------------------------------------------------


def test_a_symbolic_link_is_refused_unless_followed(session: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(session)
    refused = run("repair", "--in-place", "--quiescence", "0", link)
    assert refused.exit_code == 2
    assert "symbolic link" in refused.stderr
    assert session.read_bytes() == CLONES.read_bytes()
    followed = run("repair", "--in-place", "--quiescence", "0", "--follow-symlinks", link)
    assert followed.exit_code == 0, followed.stderr
    assert link.is_symlink()
    assert session.read_bytes() == REPAIRED.read_bytes()


def test_a_hard_linked_file_is_refused_unless_forced(session: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-name"
    os.link(session, other)
    refused = run("repair", "--in-place", "--quiescence", "0", session)
    assert refused.exit_code == 2
    assert "hard link" in refused.stderr
    forced = run("repair", "--in-place", "--quiescence", "0", "--force", session)
    assert forced.exit_code == 0, forced.stderr
    assert session.read_bytes() == REPAIRED.read_bytes()
    assert other.read_bytes() == CLONES.read_bytes()


def test_mode_is_kept(session: Path) -> None:
    session.chmod(0o640)
    repair_in_place(session, AT_REST)
    assert session.stat().st_mode & 0o777 == 0o640


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root")
def test_owner_is_kept_where_allowed(session: Path) -> None:
    os.chown(session, 1234, 2345)
    os.utime(session, (LONG_AGO, LONG_AGO))
    repair_in_place(session, AT_REST)
    st = session.stat()
    assert (st.st_uid, st.st_gid) == (1234, 2345)
    assert session.read_bytes() == REPAIRED.read_bytes()


# ---- other processes holding the session open ------------------------------------------------

HOLDER = """
import sys
if len(sys.argv) > 3:  # the process's command name, as `prctl(PR_SET_NAME)` sets it
    with open("/proc/self/comm", "w") as comm:
        comm.write(sys.argv[3])
with open(sys.argv[1], sys.argv[2]) as handle:
    print("open", flush=True)
    for line in sys.stdin.buffer:  # each line given is appended, at once
        handle.write(line)
        handle.flush()
"""
needs_proc = pytest.mark.skipif(
    not os.path.isdir("/proc/self/fdinfo"), reason="open files are found through /proc"
)


class Holder:
    """Another process with the session open (as `open(path, mode)`), appending the lines
    it is given through the open descriptor, as an agent that keeps its file does."""

    def __init__(self, path: Path, mode: str, *name: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path), mode, *name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == b"open\n"
        self.pid = self.process.pid
        self.name = Path(f"/proc/{self.pid}/comm").read_text().removesuffix("\n")

    def append_and_close(self, lines: list[bytes]) -> None:
        self.process.communicate(b"".join(lines), timeout=30)
        assert self.process.returncode == 0

    def refusal(self, session: Path) -> str:
        return (
            f"sessionfix: error: {session}: open for writing by pid {self.pid} ({self.name}); "
            "an agent may still append to it (--force to rewrite anyway)\n"
        )


@pytest.fixture
def holders() -> Iterator[Callable[..., Holder]]:
    started: list[Holder] = []

    def hold(path: Path, mode: str, *name: str) -> Holder:
        started.append(Holder(path, mode, *name))
        return started[-1]

    yield hold
    for holder in started:
        holder.process.kill()
        holder.process.wait()


@needs_proc
def test_a_session_open_for_writing_is_refused_and_its_later_lines_kept(
    session: Path, holders: Callable[..., Holder]
) -> None:
    """An agent keeps the session open: a rewrite would leave what it appends afterwards
    in the backup only. Refused, one line naming the process, nothing changed; every
    line it appends then is in the session, and the next run repairs it."""
    agent = holders(session, "ab")
    before = tree_state(session.parent)
    refused = run("repair", "--in-place", "--quiescence", "0", session)
    assert refused.exit_code == 2
    assert refused.stderr == agent.refusal(session)
    assert tree_state(session.parent) == before
    lines = [appended(n) for n in range(20)]
    agent.append_and_close(lines)
    assert session.read_bytes() == CLONES.read_bytes() + b"".join(lines)
    repaired = run("repair", "--in-place", "--quiescence", "0", session)
    assert repaired.exit_code == 0, repaired.stderr
    assert session.read_bytes() == REPAIRED.read_bytes() + b"".join(lines)


@needs_proc
def test_a_restore_over_a_session_open_for_writing_is_refused(
    session: Path, holders: Callable[..., Holder]
) -> None:
    repair_in_place(session, AT_REST)
    agent = holders(session, "r+b")
    before = tree_state(session.parent)
    refused = run("restore", "--quiescence", "0", session)
    assert refused.exit_code == 2
    assert refused.stderr == agent.refusal(session)
    assert tree_state(session.parent) == before
    forced = run("restore", "--quiescence", "0", "--force", session)
    assert forced.exit_code == 0, forced.stderr
    assert session.read_bytes() == CLONES.read_bytes()


@needs_proc
def test_the_writers_name_is_shown_on_one_line(
    session: Path, holders: Callable[..., Holder]
) -> None:
    """A process names itself as it likes: control characters in it are escaped."""
    agent = holders(session, "ab", "ag\nent\x1b[2J")
    assert agent.name == "ag\nent\x1b[2J"
    refused = run("repair", "--in-place", "--quiescence", "0", session)
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1
    assert f"by pid {agent.pid} (ag\\u000aent\\u001b[2J);" in refused.stderr
    assert session.read_bytes() == CLONES.read_bytes()


@needs_proc
def test_a_reader_does_not_hold_a_rewrite_back(
    session: Path, holders: Callable[..., Holder]
) -> None:
    holders(session, "rb")
    assert run("repair", "--in-place", "--quiescence", "0", session).exit_code == 0
    assert session.read_bytes() == REPAIRED.read_bytes()
    holders(session, "rb")
    assert run("restore", "--quiescence", "0", session).exit_code == 0
    assert session.read_bytes() == CLONES.read_bytes()


@needs_proc
def test_a_writer_that_opens_the_session_during_the_repair_stops_the_swap(
    session: Path, holders: Callable[..., Holder], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked again just before the swap: no backup, no temp file, the session as it was."""
    started: list[Holder] = []

    def open_it() -> Iterator[None]:
        started.append(holders(session, "ab"))
        yield

    _during_verification(monkeypatch, open_it())
    result = run("repair", "--in-place", "--quiescence", "0", session)
    assert result.exit_code == 2
    assert result.stderr == started[0].refusal(session.resolve())
    assert session.read_bytes() == CLONES.read_bytes()
    assert _listing(session.parent) == ["s.jsonl"]


@needs_proc
def test_force_rewrites_a_session_open_for_writing(
    session: Path, holders: Callable[..., Holder]
) -> None:
    """Then what the writer appends goes to the replaced file, kept as the backup."""
    agent = holders(session, "ab")
    forced = run("repair", "--in-place", "--quiescence", "0", "--force", session)
    assert forced.exit_code == 0, forced.stderr
    assert session.read_bytes() == REPAIRED.read_bytes()
    agent.append_and_close([appended(0)])
    (backup,) = [p for p in session.parent.iterdir() if ".sessionfix-bak-" in p.name]
    assert backup.read_bytes() == CLONES.read_bytes() + appended(0)


# ---- a file that changes while it is repaired ---------------------------------------------------


def test_a_file_that_grew_is_repaired_again_with_the_appended_lines(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = appended(0)

    def append_once() -> Iterator[None]:
        with open(session, "ab") as out:
            out.write(line)
        yield

    _during_verification(monkeypatch, append_once())
    result = repair_in_place(session, AT_REST)
    assert result.redone == 1
    assert session.read_bytes() == REPAIRED.read_bytes() + line
    assert result.backup is not None
    assert result.backup.read_bytes() == CLONES.read_bytes() + line
    assert _listing(session.parent) == ["s.jsonl", result.backup.name]


def test_a_file_changed_otherwise_is_left_as_it_now_is(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes changed before the end (not an append): nothing is written, no redo."""
    edited = CLONES.read_bytes().replace(b"notes.txt", b"NOTES.txt", 1) + appended(0)

    def rewrite() -> Iterator[None]:
        with open(session, "r+b") as out:
            out.write(edited)
        yield

    _during_verification(monkeypatch, rewrite())
    with pytest.raises(FileChanged, match="changed while being repaired; left untouched"):
        repair_in_place(session, AT_REST)
    assert session.read_bytes() == edited
    assert _listing(session.parent) == ["s.jsonl"]


def test_a_file_that_keeps_growing_is_given_up_untouched(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [appended(n) for n in range(10)]

    def append_each_time() -> Iterator[None]:
        for line in lines:
            with open(session, "ab") as out:
                out.write(line)
            yield

    _during_verification(monkeypatch, append_each_time())
    result = run("repair", "--in-place", "--quiescence", "0", session)
    assert result.exit_code == 2
    assert "kept growing while being repaired (4 tries)" in result.stderr
    assert session.read_bytes() == CLONES.read_bytes() + b"".join(lines[:4])
    assert _listing(session.parent) == ["s.jsonl"]


def test_lines_appended_during_the_swap_are_carried_over(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write after the last check reaches the replaced inode: it is carried over to the
    repaired file, and the result is repaired again."""
    line = appended(0)
    replace = os.replace
    calls: list[Path] = []

    def late_append(source: str | Path, target: str | Path) -> None:
        if Path(target) == session and not calls:
            calls.append(Path(target))
            with open(session, "ab") as out:
                out.write(line)
        replace(source, target)

    monkeypatch.setattr(os, "replace", late_append)
    result = repair_in_place(session, AT_REST)
    assert result.carried_over == len(line)
    assert result.redone == 1
    assert result.unsettled is None
    assert session.read_bytes() == REPAIRED.read_bytes() + line
    assert result.backup is not None
    assert result.backup.read_bytes() == CLONES.read_bytes() + line
    assert _listing(session.parent) == ["s.jsonl", result.backup.name]  # one backup


def _append_during_the_first_swap(
    monkeypatch: pytest.MonkeyPatch, session: Path, line: bytes
) -> None:
    replace = os.replace
    done: list[bool] = []

    def late_append(source: str | Path, target: str | Path) -> None:
        if Path(target) == session and not done:
            done.append(True)
            with open(session, "ab") as out:
                out.write(line)
        replace(source, target)

    monkeypatch.setattr(os, "replace", late_append)


def test_without_backup_the_appended_lines_are_still_kept(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--no-backup: a backup is kept until the carried lines are in, then removed."""
    line = appended(0)
    _append_during_the_first_swap(monkeypatch, session, line)
    result = repair_in_place(session, AT_REST, backup=False)
    assert session.read_bytes() == REPAIRED.read_bytes() + line
    assert result.backup is None
    assert _listing(session.parent) == ["s.jsonl"]


def test_a_failed_check_of_carried_lines_is_a_warning_not_untouched(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file already holds the repair when the check of the carried lines fails: the
    run says so (a warning, exit 0 or 1), it does not claim the file is untouched."""
    line = b"\xef\xbb\xbf" + appended(0)  # with a BOM: the check repairs it (SF005)
    _append_during_the_first_swap(monkeypatch, session, line)
    verify = verification.verify
    calls: list[int] = []

    def second_fails(planned: PlannedRepair, written: Path, filename: str):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            raise VerificationFailed(f"{filename}: the check failed; nothing was written")
        return verify(planned, written, filename)

    monkeypatch.setattr(verification, "verify", second_fails)
    result = run("repair", "--in-place", "--quiescence", "0", session)
    assert len(calls) == 2
    assert result.exit_code in (0, 1)
    assert "left untouched" not in result.stderr
    assert "nothing was written" not in result.stderr
    warning = f"sessionfix: warning: {session}: repaired, but {session}: the check failed\n"
    assert result.stderr.endswith(warning)
    assert session.read_bytes() == REPAIRED.read_bytes() + line
    backups = [n for n in _listing(session.parent) if ".sessionfix-bak-" in n]
    assert len(backups) == 1
    assert (session.parent / backups[0]).read_bytes() == CLONES.read_bytes() + line


def test_an_agent_appending_meanwhile_loses_no_line(session: Path) -> None:
    """A writer appends bursts of lines by path (as `appendFileSync` does) while repairs
    run; whether a repair lands or gives up, every appended line is there once."""
    lines = [appended(n) for n in range(120)]
    done = threading.Event()

    def agent() -> None:
        for start in range(0, len(lines), 6):
            for line in lines[start : start + 6]:
                with open(session, "ab") as out:
                    out.write(line)
            time.sleep(0.03)
        done.set()

    writer = threading.Thread(target=agent)
    writer.start()
    outcomes: list[str] = []
    while not done.is_set():
        try:
            result = repair_in_place(session, AT_REST)
        except FileChanged:
            outcomes.append("gave up")
        else:
            outcomes.append("repaired" if result.changed else "clean")
    writer.join()
    content = session.read_bytes()
    wrong = {n: content.count(line) for n, line in enumerate(lines) if content.count(line) != 1}
    assert not wrong, f"appended line -> times in the session: {wrong}; runs: {outcomes}"
    assert content.startswith((REPAIRED.read_bytes(), CLONES.read_bytes()))
    assert "repaired" in outcomes or "gave up" in outcomes
    assert not [n for n in _listing(session.parent) if "sessionfix-tmp" in n]


TERMINATED_MIDWAY = """
import signal, sys, time
# As an interactive shell starts it: SIGINT interrupts, even when this suite runs with
# it ignored (in the background, under some CI runners), which the child would inherit.
signal.signal(signal.SIGINT, signal.default_int_handler)
from sessionfix.repair import verification
verify = verification.verify
def slow(planned, written, filename):
    print("writing", flush=True)
    time.sleep(60)
    return verify(planned, written, filename)
verification.verify = slow
sys.argv = ["sessionfix", "repair", "--in-place", "--quiescence", "0", sys.argv[1]]
from sessionfix.entry import run
run()
"""


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_terminated_run_cleans_up(openclaw_session: Path, signal_name: str) -> None:
    """Stopped while its temp file and the lock exist: both go, the session stays."""
    child = subprocess.Popen(
        [sys.executable, "-c", TERMINATED_MIDWAY, str(openclaw_session)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "writing\n"
        assert any("sessionfix-tmp" in n for n in _listing(openclaw_session.parent))
        child.send_signal(getattr(signal, signal_name))
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 2
    assert stderr == "sessionfix: error: interrupted\n"
    assert openclaw_session.read_bytes() == CLONES.read_bytes()
    assert _listing(openclaw_session.parent) == [openclaw_session.name]


def test_a_second_repair_is_not_held_back_by_the_first_ones_write(session: Path) -> None:
    """Right after a repair, the session holds what sessionfix wrote: running repair
    again (or naming the file twice) is not refused by the quiescence window. Once an
    agent has written to it, the window applies again."""
    first = run("repair", "--in-place", "--quiescence", "0", session)
    assert first.exit_code == 0, first.stderr
    repaired = session.read_bytes()
    again = run("repair", "--in-place", session, session.parent / "." / session.name)
    assert again.exit_code == 0, again.stderr
    assert "quiescence" not in again.stderr
    assert session.read_bytes() == repaired
    with open(session, "ab") as handle:
        handle.write(appended(0))
    refused = run("repair", "--in-place", session)
    assert refused.exit_code == 2
    assert "quiescence" in refused.stderr
    assert session.read_bytes() == repaired + appended(0)
