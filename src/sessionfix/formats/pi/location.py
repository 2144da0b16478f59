"""Where OpenClaw keeps its transcripts."""

from __future__ import annotations

from pathlib import Path


def is_openclaw_location(path: Path) -> bool:
    """OpenClaw keeps transcripts under `…/agents/<agentId>/sessions/`."""
    parts = path.resolve().parts if not path.is_absolute() else path.parts
    return len(parts) >= 4 and parts[-2] == "sessions" and parts[-4] == "agents"
