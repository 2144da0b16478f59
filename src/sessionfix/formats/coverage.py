"""Which formats provide which capabilities: what a file of a format lets rules see, what
it lacks of a rule's needs, and which formats a rule covers."""

from __future__ import annotations

from collections.abc import Iterable

from sessionfix.formats import Format, all_formats, package_of
from sessionfix.formats.capabilities import Capability


def provided(fmt: Format, *, tree: bool) -> frozenset[Capability]:
    """What a file of `fmt` provides; `tree`: its entries are linked by id."""
    return package_of(fmt).capabilities(fmt, tree)


def missing(requires: Iterable[Capability], fmt: Format, *, tree: bool) -> list[Capability]:
    """What a file of `fmt` lacks of `requires`, in declaration order."""
    have = provided(fmt, tree=tree)
    wanted = set(requires)
    return [capability for capability in Capability if capability in wanted - have]


def coverage(requires: frozenset[Capability]) -> tuple[list[Format], bool]:
    """The formats some of whose files provide `requires`, and whether only their
    id-linked (tree) files do."""
    formats = [f for f in all_formats() if requires <= provided(f, tree=True)]
    tree_only = any(not requires <= provided(f, tree=False) for f in formats)
    return formats, tree_only
