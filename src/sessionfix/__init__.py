"""sessionfix: find and repair corruption in persisted agent-session JSONL files.

The library API is independent of the command line::

    from sessionfix import check_file
    for diagnostic in check_file("session.jsonl"):
        print(diagnostic.row, diagnostic.code, diagnostic.message)
"""

from __future__ import annotations

__version__ = "0.1.0"

from sessionfix.diagnostics import Applicability, Diagnostic, Edit, EditOp, Fix, Severity
from sessionfix.engine import FileReport, check_file, check_paths
from sessionfix.errors import InputError, SessionfixError, UsageError
from sessionfix.formats import Format
from sessionfix.rules import RULES, Rule, get_rule
from sessionfix.scanner import read_session
from sessionfix.settings import Settings

__all__ = [
    "RULES",
    "Applicability",
    "Diagnostic",
    "Edit",
    "EditOp",
    "FileReport",
    "Fix",
    "Format",
    "InputError",
    "Rule",
    "SessionfixError",
    "Settings",
    "Severity",
    "UsageError",
    "__version__",
    "check_file",
    "check_paths",
    "get_rule",
    "read_session",
]
