"""What opencode names its files and folders, for the package and its modules alike."""

from __future__ import annotations

from typing import Final

LEGACY_FOLDER: Final = "storage"
"""The folder of the data folder that holds opencode 1.1's JSON tree."""
