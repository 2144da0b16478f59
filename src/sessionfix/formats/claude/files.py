"""Where Claude Code keeps transcripts, and the JSONL beside them that is not one."""

from __future__ import annotations

import os
from pathlib import Path

HOME_FOLDER = ".claude"
TRANSCRIPTS_FOLDER = "projects"


WORKFLOW_JOURNAL = "journal.jsonl"
"""A workflow agent's run log (`subagents/workflows/wf_<runId>/journal.jsonl`)."""


def is_sibling(path: Path) -> bool:
    """Under `~/.claude` only `projects/` holds transcripts (`<slug>/<sessionId>.jsonl`
    and sub-agents' `<sessionId>/subagents/agent-*.jsonl`); `history.jsonl` and the
    other JSONL files there are the agent's own state, not sessions. Nor is a
    workflow's journal, wherever it lies."""
    if path.name == WORKFLOW_JOURNAL:
        return True
    if not path.name.endswith(".jsonl"):
        return False
    if f"{os.sep}{HOME_FOLDER}{os.sep}" not in os.path.abspath(path):
        return False  # the common case, told without splitting the path
    parts = path.absolute().parts[:-1]
    if HOME_FOLDER not in parts:
        return False
    below = parts[len(parts) - parts[::-1].index(HOME_FOLDER) :]
    return not below or below[0] != TRANSCRIPTS_FOLDER
