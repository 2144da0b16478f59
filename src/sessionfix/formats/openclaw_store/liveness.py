"""Whether OpenClaw is running on a store: a rewrite is refused while it is.

OpenClaw's gateway (and its destructive doctor modes) hold an exclusive transaction on
a coordinator database, `/tmp/openclaw-state-locks-<uid>/gateway-lifecycle.<h>.lock.sqlite`
with `<h>` the first 8 hex digits of the SHA-256 of the real path of
`<state>/state/openclaw.sqlite`, and record their pid in
`<state>/tmp/openclaw-<uid>/gateway*.lock` (a JSON payload) or hold
`gateway*.lock.sqlite` there the same way. Any one live is a refusal. The
coordinator is probed as OpenClaw probes it for a shared hold (`BEGIN` and one read,
busy timeout 0): that never blocks the gateway and never writes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import apsw
import orjson

from sessionfix.stores import StoreRefused


class OpenClawRunning(StoreRefused):
    """OpenClaw holds the store (its gateway or a maintenance command is running)."""


def state_folder(store: Path) -> Path | None:
    """`<state>` of `<state>/agents/<id>/agent/openclaw-agent.sqlite`, if laid out so."""
    parts = store.absolute().parents
    if len(parts) >= 4 and parts[0].name == "agent" and parts[2].name == "agents":
        return parts[3]
    return None


def coordinator_path(state: Path, runtime: Path = Path("/tmp")) -> Path:
    database = os.path.realpath(state / "state" / "openclaw.sqlite")
    # As Node names it: bytes of the path that are not UTF-8 read as U+FFFD.
    named = os.fsencode(database).decode("utf-8", "replace")
    digest = hashlib.sha256(named.encode()).hexdigest()[:8]
    folder = runtime / f"openclaw-state-locks-{os.getuid()}"
    return folder / f"gateway-lifecycle.{digest}.lock.sqlite"


def check_not_running(store: Path) -> None:
    """Raise `OpenClawRunning` if OpenClaw's gateway holds the state folder of `store`."""
    state = state_folder(store)
    if state is None:
        return
    coordinator = coordinator_path(state)
    if coordinator.exists() and _held(coordinator):
        raise OpenClawRunning(
            f"{store}: OpenClaw's gateway (or an OpenClaw maintenance command) is running "
            f"on this state folder ({coordinator} is held); stop it and run again"
        )
    locks = state / "tmp" / f"openclaw-{os.getuid()}"
    try:
        names = sorted(p for p in locks.iterdir() if p.name.startswith("gateway."))
    except OSError:
        names = []
    for lock in names:
        if lock.name.endswith(".lock.sqlite"):
            if _held(lock):
                raise OpenClawRunning(
                    f"{store}: OpenClaw's gateway is running on this state folder ({lock} "
                    "is held); stop it and run again"
                )
            continue
        if not lock.name.endswith(".lock"):
            continue
        pid = _recorded_pid(lock)
        if pid is not None and _alive(pid):
            raise OpenClawRunning(
                f"{store}: OpenClaw's gateway is running (pid {pid}, recorded in {lock}); "
                "stop it and run again"
            )


def _held(coordinator: Path) -> bool:
    try:
        connection = apsw.Connection(str(coordinator), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error:
        return False
    try:
        connection.set_busy_timeout(0)
        connection.execute("BEGIN; SELECT rootpage FROM sqlite_schema LIMIT 1").fetchall()
        connection.execute("ROLLBACK")
        return False
    except apsw.BusyError:
        return True
    except apsw.Error:
        return False
    finally:
        connection.close()


def _recorded_pid(lock: Path) -> int | None:
    try:
        payload = orjson.loads(lock.read_bytes()[: 1 << 16])
    except (OSError, orjson.JSONDecodeError):
        return None
    pid = payload.get("pid") if isinstance(payload, dict) else None
    return pid if isinstance(pid, int) and pid > 0 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
