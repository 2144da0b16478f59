"""Claude Code transcripts: `~/.claude/projects/<slug>/<sessionId>.jsonl` and sub-agent
files (spec: formats/claude-code.md)."""

from sessionfix.formats.claude.decode import (
    CAPABILITIES,
    CONVERSATION_TYPES,
    METADATA_TYPES,
    ClaudeAdapter,
    ClaudeContext,
)
from sessionfix.formats.claude.edit import ClaudeEditor

__all__ = [
    "CAPABILITIES",
    "CONVERSATION_TYPES",
    "METADATA_TYPES",
    "ClaudeAdapter",
    "ClaudeContext",
    "ClaudeEditor",
]
