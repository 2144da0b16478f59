"""Progress-bar columns in the binary units (KiB, MiB) every other size is printed in.

rich's own transfer-speed column has decimal units only, so a bar said "327.1 MB" of a
file the summary calls "312.0 MiB"."""

from __future__ import annotations

from rich.progress import ProgressColumn, Task
from rich.text import Text

from sessionfix.units import human_bytes


class BinarySpeedColumn(ProgressColumn):
    """Bytes per second, as `human_bytes` prints sizes ("12.3 MiB/s")."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if speed is None:
            return Text("?", style="progress.data.speed")
        return Text(f"{human_bytes(speed)}/s", style="progress.data.speed")
