"""Where OpenClaw keeps its transcripts."""

from __future__ import annotations

import os
from pathlib import Path


def is_openclaw_location(path: Path) -> bool:
    """OpenClaw keeps transcripts under `…/agents/<agentId>/sessions/`: where the file
    really lies, links followed, however it is named."""
    parts = Path(os.path.realpath(path)).parts
    return len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"
