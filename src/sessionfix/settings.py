"""Options shared by every command: rule selection, fix safety overrides, rule options."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable

from msgspec import Struct

from sessionfix.diagnostics import Severity
from sessionfix.errors import UsageError
from sessionfix.formats import Format

DEFAULT_QUIESCENCE = 10.0
DEFAULT_MAX_RECORD_SIZE = 256 * 1024
SLIM_PROTECTED_TURNS = 2
"""User turns at the end of a session that `slim` leaves whole unless told otherwise."""
_SELECTOR = re.compile(r"^(ALL|SF\d{0,3})$")


class Settings(Struct, frozen=True):
    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    fail_on: Severity = Severity.WARNING
    unsafe_fixes: bool = False
    extend_safe_fixes: tuple[str, ...] = ()
    extend_unsafe_fixes: tuple[str, ...] = ()
    format: Format = Format.AUTO
    protect: tuple[str, ...] = ()
    """Globs of paths whose stale reads are kept."""
    protect_last_turns: int = 0
    """Keep stale reads within the last N user turns."""
    quiescence: float = DEFAULT_QUIESCENCE
    """Seconds since the last modification after which a file is considered at rest."""
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    """Records larger than this many bytes are reported."""
    cwd: str | None = None
    """Working directory for a rebuilt pi header."""
    prune_to_leaf: bool = False
    """Let `repair` drop every entry off the active path (the fix is unsafe)."""
    jobs: int | None = None
    """Worker processes for reading a large file; None picks by file size and cores."""
    sessions: tuple[str, ...] = ()
    """In a session store: the sessions to read (all when empty)."""
    budget: int | None = None
    """Tokens the agent may load from a repaired session: a repair also slims it under
    them (`sessionfix.slim`); None: no budget."""
    max_size: int | None = None
    """Bytes the repaired session may take: a repair also slims it under them by what
    the agent keeps but never sends (`sessionfix.slim`); None: no limit."""

    def __post_init__(self) -> None:
        for selector in (
            *self.select,
            *self.ignore,
            *self.extend_select,
            *self.extend_safe_fixes,
            *self.extend_unsafe_fixes,
        ):
            if not _SELECTOR.match(selector):
                raise UsageError(
                    f"invalid rule selector {selector!r} (expected a rule code, SF and "
                    "three digits, a prefix of one, or ALL)"
                )
        if self.protect_last_turns < 0:
            raise UsageError("--protect-last-turns must be 0 or more")
        if not math.isfinite(self.quiescence) or self.quiescence < 0:
            raise UsageError("--quiescence must be a number of seconds, 0 or more")
        if self.jobs is not None and self.jobs < 1:
            raise UsageError("--jobs must be 1 or more")
        if self.budget is not None and self.budget <= 0:
            raise UsageError("--budget must be a positive number of tokens")
        if self.max_size is not None and self.max_size <= 0:
            raise UsageError("--max-size must be a positive number of bytes")
        if self.max_record_size <= 0:
            raise UsageError("--max-record-size must be positive")

    @property
    def slims(self) -> bool:
        """A repair with a budget of tokens or bytes: a slim."""
        return self.budget is not None or self.max_size is not None

    def enabled(self, codes: Iterable[str]) -> frozenset[str]:
        """Codes switched on: the most specific matching selector wins; ignore wins ties."""
        return _enabled((*self.select, *self.extend_select), self.ignore, tuple(codes))

    def named(self, codes: Iterable[str]) -> frozenset[str]:
        """Enabled codes that a selector names in full (not through ALL or a prefix)."""
        spelled = {*self.select, *self.extend_select}
        return frozenset(code for code in self.enabled(codes) if code in spelled)

    def promoted_to_safe(self, code: str) -> bool:
        return _specificity(code, self.extend_safe_fixes) > _specificity(
            code, self.extend_unsafe_fixes
        )

    def demoted_to_unsafe(self, code: str) -> bool:
        return _specificity(code, self.extend_unsafe_fixes) >= 0 and _specificity(
            code, self.extend_unsafe_fixes
        ) >= _specificity(code, self.extend_safe_fixes)


@functools.lru_cache(maxsize=64)
def _enabled(on: tuple[str, ...], off: tuple[str, ...], codes: tuple[str, ...]) -> frozenset[str]:
    """`Settings.enabled`, worked out once per selection (asked for every file of a walk)."""
    return frozenset(
        code
        for code in codes
        if (best_on := _specificity(code, on)) >= 0 and best_on > _specificity(code, off)
    )


def _specificity(code: str, selectors: Iterable[str]) -> int:
    """Length of the longest selector matching `code` (ALL counts 0), -1 for none."""
    best = -1
    for selector in selectors:
        if selector == "ALL":
            best = max(best, 0)
        elif code.startswith(selector):
            best = max(best, len(selector))
    return best
