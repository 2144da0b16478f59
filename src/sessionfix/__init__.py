"""sessionfix: find and repair corruption in persisted agent-session JSONL files.

The library API is independent of the command line: scanning (`check_file`,
`check_paths`), planning (`plan_repair`, `preview_repair`), repairing (`repair_to`,
`repair_to_stream`, `repair_in_place`, `repair_paths`) and restoring (`restore`,
`list_backups`). `check_paths` and `repair_paths` also take session stores (OpenClaw's
`openclaw-agent.sqlite`), which `open_store` opens for their sessions, backups and
restores::

    from sessionfix import check_file
    for diagnostic in check_file("session.jsonl"):
        print(diagnostic.row, diagnostic.code, diagnostic.message)
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False
"""Not typing's: the package imports nothing when it loads, so that the console entry
point (`sessionfix.entry`) handles an interrupt before any heavy module starts loading."""

if TYPE_CHECKING:
    from typing import Any

    from sessionfix.diagnostics import Applicability, Diagnostic, Edit, EditOp, Fix, Severity
    from sessionfix.engine import (
        CheckRun,
        FileReport,
        check_file,
        check_paths,
        check_run,
        select_files,
    )
    from sessionfix.errors import InputError, SessionfixError, UsageError
    from sessionfix.formats import Format
    from sessionfix.repair.planned import RepairResult, plan_repair
    from sessionfix.repair.preview import preview_repair
    from sessionfix.repair.runs import RepairRun, repair_paths
    from sessionfix.repair.targets import repair_in_place, repair_to, repair_to_stream
    from sessionfix.rules import RULES, Rule, get_rule
    from sessionfix.safety.backups import list_backups, restore
    from sessionfix.scan.scanner import read_session
    from sessionfix.settings import Settings
    from sessionfix.stores import SessionStore, StoredSession, open_store
    from sessionfix.version import __version__

_LAZY = {
    "Applicability": "diagnostics",
    "Diagnostic": "diagnostics",
    "Edit": "diagnostics",
    "EditOp": "diagnostics",
    "Fix": "diagnostics",
    "Severity": "diagnostics",
    "CheckRun": "engine",
    "FileReport": "engine",
    "check_file": "engine",
    "check_paths": "engine",
    "check_run": "engine",
    "select_files": "engine",
    "InputError": "errors",
    "SessionfixError": "errors",
    "UsageError": "errors",
    "Format": "formats",
    "RULES": "rules",
    "Rule": "rules",
    "get_rule": "rules",
    "read_session": "scan.scanner",
    "Settings": "settings",
    "SessionStore": "stores",
    "StoredSession": "stores",
    "open_store": "stores",
    "__version__": "version",
    "RepairResult": "repair.planned",
    "RepairRun": "repair.runs",
    "plan_repair": "repair.planned",
    "preview_repair": "repair.preview",
    "repair_in_place": "repair.targets",
    "repair_paths": "repair.runs",
    "repair_to": "repair.targets",
    "repair_to_stream": "repair.targets",
    "list_backups": "safety.backups",
    "restore": "safety.backups",
}
"""Each name of the API loads its module when first used: a check need not pay for
repairing, and the command line starts before any of it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sessionfix' has no attribute {name!r}")
    value = getattr(import_module(f"sessionfix.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "RULES",
    "Applicability",
    "CheckRun",
    "Diagnostic",
    "Edit",
    "EditOp",
    "FileReport",
    "Fix",
    "Format",
    "InputError",
    "RepairResult",
    "RepairRun",
    "Rule",
    "SessionStore",
    "SessionfixError",
    "Settings",
    "Severity",
    "StoredSession",
    "UsageError",
    "__version__",
    "check_file",
    "check_paths",
    "check_run",
    "get_rule",
    "list_backups",
    "open_store",
    "plan_repair",
    "preview_repair",
    "read_session",
    "repair_in_place",
    "repair_paths",
    "repair_to",
    "repair_to_stream",
    "restore",
    "select_files",
]
