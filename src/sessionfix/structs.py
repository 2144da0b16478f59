"""Record classes are msgspec Structs: a Struct class is built at import some thirty times
faster than a dataclass, and made, pickled and hashed several times faster."""

from __future__ import annotations

from typing import Any, ClassVar


class PartlyCompared:
    """For a Struct some of whose fields (closures, caches, what a report only shows) take
    no part in its equality and hash: they are named in `uncompared`."""

    __slots__ = ()
    uncompared: ClassVar[frozenset[str]] = frozenset()
    __struct_fields__: ClassVar[tuple[str, ...]]
    __struct_config__: ClassVar[Any]

    def _compared(self) -> tuple[object, ...]:
        skip = self.uncompared
        return tuple(getattr(self, name) for name in self.__struct_fields__ if name not in skip)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, PartlyCompared)
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        if not self.__struct_config__.frozen:
            raise TypeError(f"unhashable type: {type(self).__name__!r}")
        return hash(self._compared())
