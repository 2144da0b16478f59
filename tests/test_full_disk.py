"""A full disk: the original stays as it was, the temp file goes, and the user reads one
clear line and exit 2. A real full tmpfs where the machine allows a private mount, the
real `/dev/full` for standard output, and an injected ENOSPC everywhere."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sessionfix.cli import app

from .test_kill_points import _session_bytes

LONG_AGO = 1_700_000_000
ENV = {"NO_COLOR": "1", "COLUMNS": "120"}

MOUNT_AND_REPAIR = r"""
set -u
mount -t tmpfs -o size=192k tmpfs "$DIR" || { echo "no-mount"; exit 0; }
cp "$SRC" "$DIR/s.jsonl" && touch -d @1700000000 "$DIR/s.jsonl"
"$PY" -m sessionfix repair --in-place --no-progress "$DIR/s.jsonl" 2>"$DIR/../stderr"
echo "rc=$?"
cmp -s "$SRC" "$DIR/s.jsonl" && echo "original-kept"
ls -A "$DIR"
"""


def _private_tmpfs() -> str | None:
    """Why this machine cannot mount a private tmpfs (None when it can), decided once at
    collection: `unshare` into a user and mount namespace and mount one."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "unshare(1) is not installed"
    probe = 'd=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" && umount "$d"; rmdir "$d"'
    try:
        done = subprocess.run(
            [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", probe],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError as exc:
        return f"unshare failed: {exc}"
    if done.returncode != 0:
        return f"no private tmpfs here: {done.stderr.strip()[:200]}"
    return None


NO_PRIVATE_TMPFS = _private_tmpfs()


@pytest.mark.skipif(NO_PRIVATE_TMPFS is not None, reason=str(NO_PRIVATE_TMPFS))
def test_a_real_full_filesystem_leaves_the_original(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    assert unshare is not None
    source = tmp_path / "source.jsonl"
    source.write_bytes(_session_bytes())
    assert source.stat().st_size < 192 * 1024 < 2 * source.stat().st_size  # fits once only
    mount = tmp_path / "mnt"
    mount.mkdir()
    env = {**os.environ, "DIR": str(mount), "SRC": str(source), "PY": sys.executable}
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", MOUNT_AND_REPAIR],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "no-mount" not in done.stdout, done.stderr
    lines = done.stdout.split()
    assert "rc=2" in lines
    assert "original-kept" in lines
    assert lines[-1] == "s.jsonl"  # nothing else on the full filesystem
    stderr = (tmp_path / "stderr").read_text()
    assert stderr.count("\n") == 1
    assert "no space left on device" in stderr
    assert "left untouched" in stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_standard_output_on_a_full_device(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes(_session_bytes())
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "sessionfix", "repair", "-o", "-", str(session)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2
    *report, footer, error = done.stderr.splitlines()  # the report goes to stderr with -o -
    assert footer.endswith("; 1 file could not be repaired.")
    assert report  # the problems the refused repair would have fixed
    assert "no space left on device" in error
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


class _Device:
    """A device that fills up after `room` bytes, whichever way they are written."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.files: set[int] = set()
        """Descriptors of the files written on it."""

    def take(self, size: int) -> None:
        if size > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= size


class _FullDisk:
    """A file handle on a `_Device`."""

    def __init__(self, handle: Any, device: _Device) -> None:
        self.handle = handle
        self.device = device
        device.files.add(handle.fileno())

    def write(self, data: bytes) -> int:
        self.device.take(len(data))
        written: int = self.handle.write(data)
        return written

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


@pytest.mark.parametrize("room", [0, 1000, 100_000])
@pytest.mark.parametrize("how", ["--in-place", "-o"])
def test_injected_enospc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, room: int, how: str
) -> None:
    session = tmp_path / "s.jsonl"
    original = _session_bytes()
    session.write_bytes(original)
    os.utime(session, (LONG_AGO, LONG_AGO))
    fdopen, write, copy_file_range = os.fdopen, os.write, os.copy_file_range
    device = _Device(room)

    def filling(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = fdopen(fd, mode, *args, **kwargs)
        return _FullDisk(handle, device) if "w" in mode else handle

    def writing(fd: int, data: Any) -> int:
        if fd in device.files:
            device.take(len(data))
        return write(fd, data)

    def copying(source: int, target: int, count: int, *args: Any) -> int:
        if target in device.files:
            device.take(count)
        return copy_file_range(source, target, count, *args)

    monkeypatch.setattr(os, "fdopen", filling)
    monkeypatch.setattr(os, "write", writing)
    monkeypatch.setattr(os, "copy_file_range", copying)
    args = ["repair", how, *([str(tmp_path / "out.jsonl")] if how == "-o" else []), str(session)]
    result = CliRunner().invoke(app, args, env=ENV, color=False)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "no space left on device" in result.stderr
    assert session.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
