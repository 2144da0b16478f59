"""Deterministic ids for records sessionfix inserts (rules.md §9.3).

An id depends only on the session, the record the insertion follows and the rule,
so a repair is a pure function of its input.
"""

from __future__ import annotations

from collections.abc import Callable

import xxhash


def generate_entry_id(
    header_id: str, anchor_id: str, rule_code: str, taken: Callable[[str], bool]
) -> str:
    """8 lowercase hex digits, like pi's own ids; `n` advances past collisions."""
    n = 0
    while True:
        material = f"{header_id}\0{anchor_id}\0{rule_code}\0{n}".encode("utf-8", "surrogatepass")
        candidate = f"{xxhash.xxh3_64_intdigest(material):016x}"[:8]
        if not taken(candidate):
            return candidate
        n += 1
