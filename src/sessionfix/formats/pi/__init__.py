"""pi and OpenClaw session JSONL (spec: formats/pi-openclaw.md)."""

from sessionfix.formats.pi.decode import (
    CAPABILITIES,
    ENTRY_TYPES,
    FORMATS,
    HEADER_START,
    TREE_CAPABILITIES,
    VALID_VERSIONS,
    PiAdapter,
    PiContext,
    capabilities,
    detect,
    has_record_shape,
    is_sibling,
    make_adapter,
)
from sessionfix.formats.pi.edit import PiEditor

__all__ = [
    "CAPABILITIES",
    "ENTRY_TYPES",
    "FORMATS",
    "HEADER_START",
    "TREE_CAPABILITIES",
    "VALID_VERSIONS",
    "PiAdapter",
    "PiContext",
    "PiEditor",
    "capabilities",
    "detect",
    "has_record_shape",
    "is_sibling",
    "make_adapter",
]
