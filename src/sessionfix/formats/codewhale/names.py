"""What CodeWhale names the folders and files it keeps sessions in (spec §1)."""

from __future__ import annotations

from typing import Final

SESSIONS: Final = "sessions"
CHECKPOINTS: Final = "checkpoints"
RUNTIME_LOCK: Final = ("runtime", "runtime-process.owner.lock")
"""Under `<sessions>/<id>/`: the lock CodeWhale 0.9.12+ holds for a session's process."""
HOME: Final = ".codewhale"
LEGACY_HOME: Final = ".deepseek"
