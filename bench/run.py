"""`make bench`: sessionfix scan and repair on a generated >= 1 GB pi session, next to a floor.

The floor is a plain loop of `orjson.loads` over the file's lines, measured on the
same file in the same run. Each command runs in its own process, several times,
alternating; the best and the median time of each are printed; peak memory is the largest total
proportional set size (PSS) of the command's process tree, sampled while it runs.
The generated file is kept in `.bench/` and reused while its parameters match.

    python bench/run.py [--size-mb 1100] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / ".bench"
FLOOR = """
import sys, orjson
loads = orjson.loads
with open(sys.argv[1], "rb") as handle:
    for line in handle:
        try:
            loads(line)
        except orjson.JSONDecodeError:
            pass
"""


@dataclass
class Measure:
    seconds: float
    peak_bytes: int
    returncode: int


def _tree_pss(pid: int) -> int:
    """Total PSS of a process and its descendants (shared pages counted once, in shares)."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
            with open(f"/proc/{current}/task/{current}/children") as handle:
                pending.extend(int(child) for child in handle.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def measure(command: list[str]) -> Measure:
    peak = 0
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_pss(process.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = process.communicate()
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    if process.returncode not in (0, 1):
        sys.stderr.write(stderr.decode(errors="replace"))
        raise SystemExit(f"{command[0]} failed with exit code {process.returncode}")
    return Measure(elapsed, peak, process.returncode)


def ensure_session(size_mb: int) -> tuple[Path, dict[str, object]]:
    BENCH_DIR.mkdir(exist_ok=True)
    session = BENCH_DIR / f"session-{size_mb}mb.jsonl"
    meta = BENCH_DIR / f"session-{size_mb}mb.expected.json"
    generator = ROOT / "bench" / "generate.py"
    stamp = str(generator.stat().st_mtime_ns)
    if session.exists() and meta.exists():
        expected = json.loads(meta.read_text())
        if expected.get("generator") == stamp:
            return session, expected
    print(f"generating {session.relative_to(ROOT)} ({size_mb} MB)...", flush=True)
    output = subprocess.run(
        [sys.executable, str(generator), str(session), "--size-mb", str(size_mb)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    expected = json.loads(output)
    expected["generator"] = stamp
    meta.write_text(json.dumps(expected, indent=2))
    return session, expected


def compile_package() -> None:
    """Installed packages carry compiled bytecode; an editable checkout run with
    PYTHONDONTWRITEBYTECODE would recompile every module on every start instead."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)


def found_counts(session: Path) -> dict[str, int]:
    sessionfix = str(Path(sys.executable).with_name("sessionfix"))
    out = subprocess.run(
        [
            sessionfix,
            "scan",
            str(session),
            "--statistics",
            "--output-format",
            "json",
            "--no-progress",
            "-q",
            "--exit-zero",
        ],
        check=True,
        capture_output=True,
    ).stdout
    return {row["code"]: row["count"] for row in json.loads(out)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mb", type=int, default=1100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    session, expected = ensure_session(args.size_mb)
    compile_package()
    size = session.stat().st_size
    with open(session, "rb") as handle:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 24), b""))
    sessionfix = str(Path(sys.executable).with_name("sessionfix"))
    commands = {
        "orjson.loads loop (floor)": [sys.executable, "-c", FLOOR, str(session)],
        "sessionfix scan": [sessionfix, "scan", str(session), "--statistics", "--no-progress"],
        "sessionfix scan --jobs 1": [
            sessionfix,
            "scan",
            str(session),
            "--statistics",
            "--no-progress",
            "--jobs",
            "1",
        ],
        "sessionfix repair -o": [
            sessionfix,
            "repair",
            str(session),
            "-o",
            str(BENCH_DIR / "repaired.jsonl"),
            "--no-progress",
            "--quiet",
            "--output-format",
            "concise",
        ],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, int] = dict.fromkeys(commands, 0)
    repaired = BENCH_DIR / "repaired.jsonl"
    for _ in range(args.runs):
        for name, command in commands.items():
            # The previous repair's gigabyte is still being written back to disk: let it
            # land first, so that a run is not slowed by the one before it.
            repaired.unlink(missing_ok=True)
            os.sync()
            result = measure(command)
            times[name].append(result.seconds)
            peaks[name] = max(peaks[name], result.peak_bytes)
    repaired.unlink(missing_ok=True)
    floor = min(times["orjson.loads loop (floor)"])
    floor_median = statistics.median(times["orjson.loads loop (floor)"])
    print(
        f"file: {session.relative_to(ROOT)}  {size / 1e9:.2f} GB, {lines:,} lines, "
        f"{os.cpu_count()} CPUs, best (and median) of {args.runs} alternating runs"
    )
    print(
        f"{'command':28s} {'time':>7s} {'MB/s':>6s} {'vs floor':>9s} "
        f"{'median':>7s} {'vs floor':>9s} {'peak memory':>12s}"
    )
    for name, runs in times.items():
        best, median = min(runs), statistics.median(runs)
        print(
            f"{name:28s} {best:6.2f}s {size / best / 1e6:6.0f} {best / floor:8.2f}x "
            f"{median:6.2f}s {median / floor_median:8.2f}x {peaks[name] / 2**20:8.0f} MiB"
        )
    counts = found_counts(session)
    planted = {k: v for k, v in expected.items() if k.startswith("SF")}
    checks = {
        "SF402": int(planted.pop("SF402_error")) + int(planted.pop("SF402_info")),
        **{k: int(v) for k, v in planted.items()},
    }
    mismatches = {
        code: (want, counts.get(code, 0))
        for code, want in checks.items()
        if counts.get(code, 0) != want
    }
    print(
        "planted defects found:",
        "all" if not mismatches else f"MISMATCH {mismatches}",
        f"({', '.join(f'{k} {v}' for k, v in sorted(checks.items()))})",
    )


if __name__ == "__main__":
    main()
