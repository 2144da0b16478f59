"""What a repair or a preview of one comes to: its exit code (cli-and-safety.md §2)
and the line it ends with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sessionfix.engine import EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS
from sessionfix.rules.base import Counted
from sessionfix.units import human_bytes

if TYPE_CHECKING:
    from sessionfix.repair.planned import RepairResult


def preview_exit_code(changed: int, errors: bool, exit_zero: bool) -> int:
    """A `--diff`: 2 on any error; 1 when a file would change, unless `exit_zero`."""
    if errors:
        return EXIT_ERROR
    return EXIT_PROBLEMS if changed and not exit_zero else EXIT_OK


def preview_note(problems: int, changed: int, errors: bool) -> str | None:
    """What a `--diff` would fix."""
    noun = "problem" if problems == 1 else "problems"
    files_noun = "file" if changed == 1 else "files"
    if changed:
        return f"Would fix {problems} {noun} in {changed} {files_noun}."
    return None if errors else "No fixes."


def repair_note(results: Sequence[RepairResult], *, in_place: bool) -> str:
    """One line: what the repairs changed, what they saved."""
    changed = [r for r in results if r.changed]
    moved = _moved_aside(results)
    if not changed:
        return f"{moved[2].upper()}{moved[3:]}." if moved else "Nothing to repair."
    files = "file" if len(changed) == 1 else "files"
    verb = "Repaired" if in_place else "Wrote the repair of"
    parts = []
    dropped = sum(r.dropped_entries for r in changed)
    inserted = sum(r.inserted_records for r in changed)
    if dropped:
        parts.append(f"{dropped} entr{'y' if dropped == 1 else 'ies'} dropped")
    for what in Counted:
        count = sum(r.counted(what) for r in changed)
        if count:
            parts.append(what.phrase(count))
    if inserted:
        parts.append(f"{inserted} record{'s' if inserted != 1 else ''} inserted")
    saved = sum(r.bytes_saved for r in changed)
    tokens = sum(r.tokens_saved for r in changed)
    note = f"{verb} {len(changed)} {files}"
    if parts:
        note += ": " + ", ".join(parts)
    if saved > 0:
        note += f"; {human_bytes(saved)} saved" + (f" (~{tokens:,} tokens)" if tokens else "")
    elif saved < 0:
        note += f"; {human_bytes(-saved)} added"
    backups = [r.backup for r in changed if r.backup is not None]
    if len(backups) == 1:
        note += f"; backup: {backups[0]}"
    elif backups:
        note += f"; {len(backups)} backups beside the files"
    return note + moved + "."


def _moved_aside(results: Sequence[RepairResult]) -> str:
    """`; moved aside: <file> (kept as <backup name>)`, for the files beside the sessions
    an in-place repair moved out of their agent's way; empty when there are none."""
    moved = [pair for result in results for pair in result.set_aside]
    if not moved:
        return ""
    kept = ", ".join(f"{path} (kept as {backup.name})" for path, backup in moved)
    return f"; moved aside: {kept}"
