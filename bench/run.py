"""`make bench`: sessionfix scan and repair on a generated >= 1 GiB pi session and on
>= 300 MiB Claude Code, Codex and pi sessions built from the real samples, next to a floor;
beside repair, `slim -o` to a budget halfway between what the agent loads and what every
reduction leaves (no row where no reduction applies).

Sizes and throughput are binary, as sessionfix prints them (MiB, MiB/s; sizes given
as `--…-mb` are MiB too).

The floor is a plain loop of `orjson.loads` over the file's lines, measured on the
same file in the same run. Each command runs in its own process, several times,
alternating; the best and the median time of each are printed; peak memory is the largest total
proportional set size (PSS) of the command's process tree, sampled in a run of its own
before the timed ones (reading a process's memory map takes CPU that the workers of a
parallel run would otherwise have).

The Claude Code file gets the same table, with the peak RSS of the largest process
and the targets beside each figure (scan at most 1.0 times the floor, repair at most
1.5 times, both below 256 MiB), what `sessionfix scan` says of it, and the time, peak
memory and output of `cozempic diagnose` on it: cozempic (pinned) is installed by the
bench into a virtual environment of its own in `.bench/`, and runs with a temporary
home directory and its update checks, counters and hook set-up turned off.

The Codex rollout (>= 300 MiB, built from the real samples; most of its bytes in
compactions whose replacement histories repeat the same inline images) gets the same
table and targets, and a check that the scan finds exactly the defects planted in it.

The pi session built from the real samples (>= 300 MiB: the pi-mono sessions, v1 ones
migrated to v3, and two small fixtures, over and over as one chain) gets the same
table with `scan --jobs 1` too; the bytes an entry of `check` on it against the index's
target of 64, less a `check` of a header-only file (all a check holds, buffers too) and
less a `check` of the same built to half the size (what grows with the entries); the
bytes an entry of the index alone and of the rules' findings, traced in one process on
the half-size file; and a check that the scan finds exactly the defects planted in it
plus the samples' own findings.

The generated pi session stays: it is the size test (over 1 GiB, four times the real-
shaped files), and it plants what the real-shaped one does not (a torn last line,
duplicated results, calls left unanswered in the current context window). Its entries
are invented, though, so the real-shaped pi session is the throughput figure to trust.

Then memory next to its targets: the index's bytes per entry (`check` of millions of
tiny entries, less a `check` of a header-only file), at most 64; and the peak of a
`check` of a file holding one huge line (a valid record, and garbage), at most 1.5
times the line plus 64 MiB.

Generated files are kept in `.bench/` and reused while their generator is unchanged.

    python bench/run.py [--size-mb 1100] [--runs 5] [--tiny-entries N] [--huge-line-mb N]
                        [--claude-size-mb 300] [--cozempic-runs 1] [--codex-size-mb 300]
    python bench/run.py --memory-only
    python bench/run.py --claude-only
    python bench/run.py --codex-only
    python bench/run.py --pi-only [--pi-size-mb 300]
    python bench/run.py --directory-only
    python bench/run.py --generated-only [--size-mb 1100]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from generate import TINY_HEADER, generate_huge_line, generate_tiny
from generate_claude import SAMPLES, fingerprint, generate_claude
from generate_codex import SAMPLES as CODEX_SAMPLES
from generate_codex import fingerprint as codex_fingerprint
from generate_codex import generate_codex
from generate_pi import SAMPLES as PI_SAMPLES
from generate_pi import fingerprint as pi_fingerprint
from generate_pi import generate_pi

from sessionfix import Settings
from sessionfix.repair.planned import plan_repair
from sessionfix.settings import SLIM_PROTECTED_TURNS
from sessionfix.slim import DoesNotFit
from sessionfix.units import human_bytes

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / ".bench"
FLOOR_NAME = "orjson.loads loop (floor)"
COZEMPIC = "cozempic==1.8.39"
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
    """Sampled peak of the process tree's total PSS."""
    returncode: int
    largest_bytes: int
    """Peak resident size of the largest single process (wait4's ru_maxrss), if asked."""
    stderr: bytes = b""
    timed: bool = True
    """Counts for time: not a run whose memory was sampled (the sampling takes CPU that
    the workers of a parallel run would use)."""


def _tree(pid: int) -> list[int]:
    """A process and its descendants."""
    found = [pid]
    for current in found:
        try:
            with open(f"/proc/{current}/task/{current}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def _tree_pss(pid: int) -> int | None:
    """Total PSS of a process and its descendants (shared pages counted once, in shares),
    or None when a process started or ended meanwhile: a page a fork had just shared
    would be counted once whole and once in shares."""
    before = _tree(pid)
    total = sum(map(_pss, before))
    return total if _tree(pid) == before else None


LAUNCHER = """
import os, subprocess, sys, time
with open(sys.argv[1], "wb") as output:
    started = time.perf_counter()
    process = subprocess.Popen(sys.argv[2:], stdout=output)
    print(process.pid, flush=True)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024, elapsed, flush=True)
"""
"""Runs a command with its output to a file, printing its pid, then its exit code, peak
resident size and time. The peak a process reports includes that of the process it
was forked from (recorded at exec), so the command is forked from this small one
rather than from the bench; the time is from that fork to the command's end."""


def measure(
    command: list[str],
    *,
    largest: bool = False,
    output: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    check: bool = True,
    sample: bool = True,
) -> Measure:
    """Time and peak memory of a command, its output to `output` (else discarded); with
    `largest`, also the peak RSS of its largest process, through `LAUNCHER`; without
    `sample`, no PSS sampling (peak 0), so the time is the command's alone. Unless
    `check` is false, an exit code other than 0 or 1 ends the bench."""
    peak = 0
    sink = str(output) if output is not None else os.devnull
    started = time.perf_counter()
    if largest:
        process = subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, sink, *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
    else:
        with open(sink, "wb") as stdout:
            process = subprocess.Popen(
                command, stdout=stdout, stderr=subprocess.PIPE, env=env, cwd=cwd
            )
    pid = process.pid
    if largest:
        assert process.stdout is not None
        pid = int(process.stdout.readline())
    done = threading.Event()

    def sampled() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_pss(pid) or 0)
            done.wait(0.02)

    sampler = threading.Thread(target=sampled, daemon=True)
    if sample:
        sampler.start()
    out, stderr = process.communicate()
    elapsed = time.perf_counter() - started
    done.set()
    if sample:
        sampler.join()
    code, maxrss = process.returncode, 0
    if largest:
        fields = out.split()
        code, maxrss, elapsed = int(fields[0]), int(fields[1]), float(fields[2])
    if code not in (0, 1) and check:
        sys.stderr.write(stderr.decode(errors="replace"))
        raise SystemExit(f"{command[0]} failed with exit code {code}")
    return Measure(elapsed, peak, code, maxrss, stderr)


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
    print(f"generating {session.relative_to(ROOT)} ({size_mb} MiB)...", flush=True)
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


def slim_budget(session: Path) -> int | None:
    """A budget `slim` must take several reductions to meet: halfway from what the
    agent loads of `session` to what every reduction leaves (None: none applies)."""
    settings = Settings(budget=1, protect_last_turns=SLIM_PROTECTED_TURNS, quiescence=0.0)
    try:
        plan_repair(session, settings).close()
    except DoesNotFit as unreachable:
        plan = unreachable.plan
        return (plan.before + plan.after) // 2 if plan.after < plan.before else None
    return None


def measured_commands(
    session: Path, repaired: Path, *, one_job: bool = False
) -> dict[str, list[str]]:
    """The floor, scan (also on one core with `one_job`), `repair -o` and `slim -o` of
    one file (the slim to `slim_budget`, when a reduction applies)."""
    sessionfix = str(Path(sys.executable).with_name("sessionfix"))
    scan = [sessionfix, "scan", str(session), "--statistics", "--no-progress"]
    commands = {FLOOR_NAME: [sys.executable, "-c", FLOOR, str(session)], "sessionfix scan": scan}
    if one_job:
        commands["sessionfix scan --jobs 1"] = [*scan, "--jobs", "1"]
    commands["sessionfix repair -o"] = [
        sessionfix,
        "repair",
        str(session),
        "-o",
        str(repaired),
        "--no-progress",
        "--quiet",
        "--output-format",
        "concise",
    ]
    budget = slim_budget(session)
    if budget is not None:
        commands["sessionfix slim -o"] = [
            sessionfix,
            "slim",
            str(session),
            "-o",
            str(repaired),
            "--budget",
            str(budget),
            "--no-progress",
            "--quiet",
        ]
    return commands


def print_planted_found(
    planted: dict[str, int], counts: dict[str, int], *, others: bool = False
) -> None:
    """One line: whether the scan found each planted defect as often as it was planted
    (with `others`, also what it found that was not planted)."""
    mismatches = {
        code: (want, counts.get(code, 0))
        for code, want in planted.items()
        if counts.get(code, 0) != want
    }
    extra = {code: n for code, n in counts.items() if code not in planted} if others else {}
    print(
        "planted defects found:",
        "all" if not mismatches else f"MISMATCH (planted, found) {mismatches}",
        f"({', '.join(f'{k} {v}' for k, v in sorted(planted.items()))})"
        + (f"; also found {extra}" if extra else ""),
    )


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


def ensure_file(
    name: str, make: Callable[[Path], object], generator: str = "generate.py", key: str = ""
) -> Path:
    """`.bench/NAME`, made by `make` unless a copy from the same `bench/GENERATOR` (and
    the same `key`, which names what else it is made from) is there."""
    BENCH_DIR.mkdir(exist_ok=True)
    path = BENCH_DIR / name
    stamp = path.with_name(path.name + ".stamp")
    made_by = str((ROOT / "bench" / generator).stat().st_mtime_ns) + (f" {key}" if key else "")
    if path.exists() and stamp.exists() and stamp.read_text() == made_by:
        return path
    print(f"generating {path.relative_to(ROOT)}...", flush=True)
    make(path)
    stamp.write_text(made_by)
    return path


def count(path: Path, *needles: bytes) -> list[int]:
    """How many times each of `needles` (none holding a newline) occurs in the file."""
    counts = [0] * len(needles)
    rest = b""
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 24), b""):
            lines = rest + chunk
            end = lines.rfind(b"\n") + 1
            rest = lines[end:]
            for index, needle in enumerate(needles):
                counts[index] += lines.count(needle, 0, end)
    for index, needle in enumerate(needles):
        counts[index] += rest.count(needle)
    return counts


def alternate(
    commands: dict[str, list[str]], runs: int, scratch: Path, *, largest: bool = False
) -> dict[str, list[Measure]]:
    """Each command once with its memory sampled, then `runs` times timed, in turn.
    `scratch`, a repair's output, is removed before each run and the disk synced, so
    that a run is not slowed by the previous repair's output still being written back."""
    results: dict[str, list[Measure]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, command in commands.items():
            scratch.unlink(missing_ok=True)
            os.sync()
            run = measure(command, largest=largest, sample=round_ == 0)
            run.timed = round_ > 0
            results[name].append(run)
    scratch.unlink(missing_ok=True)
    return results


@dataclass
class Target:
    ratio: float
    """The best time, at most this many times the floor's."""
    peak_bytes: int
    """Peak memory (of the tree and of the largest process), below this."""

    def met(self, ratio: float, peak_bytes: int) -> bool:
        return ratio <= self.ratio and peak_bytes < self.peak_bytes

    def __str__(self) -> str:
        return f"<= {self.ratio:.2f}x, < {self.peak_bytes >> 20} MiB"


def print_table(
    results: dict[str, list[Measure]], size: int, targets: dict[str, Target] | None = None
) -> None:
    """Best and median time of each command, against the floor's; peak memory; and
    with `targets`, each one's target and whether it was met."""
    floor_runs = [run.seconds for run in results[FLOOR_NAME] if run.timed]
    floor, floor_median = min(floor_runs), statistics.median(floor_runs)
    largest = any(run.largest_bytes for runs in results.values() for run in runs)
    header = (
        f"{'command':28s} {'time':>7s} {'MiB/s':>6s} {'vs floor':>9s} "
        f"{'median':>7s} {'vs floor':>9s} {'peak memory':>12s}"
    )
    print(header + (f" {'largest RSS':>12s}" if largest else "") + ("  target" if targets else ""))
    for name, runs in results.items():
        times = [run.seconds for run in runs if run.timed]
        best, median = min(times), statistics.median(times)
        peak = max(run.peak_bytes for run in runs)
        rss = max(run.largest_bytes for run in runs)
        row = (
            f"{name:28s} {best:6.2f}s {size / best / 2**20:6.0f} {best / floor:8.2f}x "
            f"{median:6.2f}s {median / floor_median:8.2f}x {peak / 2**20:8.0f} MiB"
        )
        if largest:
            row += f" {rss / 2**20:8.0f} MiB"
        target = (targets or {}).get(name)
        if target is not None:
            met = target.met(best / floor, max(peak, rss))
            row += f"  {target}: {'met' if met else 'MISSED'}"
        print(row)


def memory_report(tiny_entries: int, huge_mb: int) -> None:
    """The index's bytes per entry, and the peak for a file holding one huge line, next
    to their targets: at most 64 bytes an entry, and 1.5 times the line plus 64 MiB."""
    sessionfix = str(Path(sys.executable).with_name("sessionfix"))
    free = shutil.disk_usage(BENCH_DIR.parent).free
    while huge_mb > 64 and 2 * (huge_mb << 20) > free // 2:
        huge_mb //= 2
        print(f"(not enough free disk for the huge-line files: a {huge_mb} MiB line instead)")
    empty = ensure_file("header-only.jsonl", lambda out: out.write_bytes(TINY_HEADER + b"\n"))
    tiny = ensure_file(f"tiny-{tiny_entries}.jsonl", lambda out: generate_tiny(out, tiny_entries))
    huge = {
        kind: ensure_file(
            f"huge-line-{huge_mb}mb-{kind}.jsonl",
            lambda out, kind=kind: generate_huge_line(out, huge_mb << 20, record=kind == "record"),
        )
        for kind in ("record", "garbage")
    }

    def check(path: Path, *options: str) -> Measure:
        return measure(
            [sessionfix, "check", "-q", "--no-progress", *options, str(path)], largest=True
        )

    print(
        "memory: peak PSS of the process tree (sampled) and peak RSS of the largest process;"
        " index figures are less the same for a header-only file"
    )
    print(f"{'case':46s} {'PSS':>14s} {'largest':>14s} {'target':>14s}")
    for options in ((), ("--jobs", "1")):
        base = check(empty, *options)
        run = check(tiny, *options)
        pss = (run.peak_bytes - base.peak_bytes) / tiny_entries
        rss = (run.largest_bytes - base.largest_bytes) / tiny_entries
        label = f"index, check {tiny_entries:,} tiny entries {' '.join(options)}"
        print(f"{label:46s} {pss:8.1f} B/ent {rss:8.1f} B/ent {'<= 64 B/ent':>14s}")
    limit = (huge_mb << 20) * 3 // 2 + (64 << 20)
    for kind, path in huge.items():
        for options in ((), ("--jobs", "1")):
            run = check(path, *options)
            label = f"check, one {huge_mb} MiB line ({kind}) {' '.join(options)}"
            print(
                f"{label:46s} {run.peak_bytes >> 20:10,} MiB {run.largest_bytes >> 20:10,} MiB"
                f" {'<= ' + format(limit >> 20, ',') + ' MiB':>14s}"
            )


CLAUDE_TARGETS = {
    "sessionfix scan": Target(1.0, 256 << 20),
    "sessionfix repair -o": Target(1.5, 256 << 20),
}
COZEMPIC_QUIET = {
    "COZEMPIC_NO_AUTO_UPDATE": "1",
    "COZEMPIC_NO_TELEMETRY": "1",
    "COZEMPIC_NO_GLOBAL_INIT": "1",
    "COZEMPIC_NO_AUTO_INIT": "1",
}
"""cozempic checks PyPI for a newer version of itself (and installs it), pings usage
counters and wires hooks into Claude Code's settings when it runs; not here."""


def ensure_cozempic() -> Path | str:
    """cozempic's command, from a virtual environment of the bench's own in `.bench/`
    (never the one the tests use); or why there is none."""
    venv = BENCH_DIR / "cozempic-venv"
    command = venv / "bin" / "cozempic"
    stamp = venv / ".installed"
    if command.exists() and stamp.exists() and stamp.read_text() == COZEMPIC:
        return command
    print(f"installing {COZEMPIC} into {venv.relative_to(ROOT)}...", flush=True)
    steps = {
        "python -m venv": [sys.executable, "-m", "venv", "--clear", str(venv)],
        f"pip install {COZEMPIC}": [str(venv / "bin" / "python"), "-m", "pip", "install", COZEMPIC],
    }
    for step, command_line in steps.items():
        done = subprocess.run(command_line, capture_output=True, text=True)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"]
            return f"not run: {step} failed: {said[-1]}"
    stamp.write_text(COZEMPIC)
    return command


def run_cozempic(command: Path, session: Path, runs: int) -> tuple[list[Measure], str]:
    """`cozempic diagnose SESSION`, `runs` times, with a home directory of its own (it
    keeps state files there); its measures, and what it printed the last time."""
    before = session.stat()
    results = []
    with tempfile.TemporaryDirectory(prefix="cozempic-home-") as home:
        env = {**os.environ, "HOME": home, **COZEMPIC_QUIET}
        env.pop("CLAUDE_CONFIG_DIR", None)
        output = Path(home) / "diagnose.txt"
        for _ in range(runs):
            os.sync()
            results.append(
                measure(
                    [str(command), "diagnose", str(session)],
                    largest=True,
                    output=output,
                    env=env,
                    cwd=Path(home),
                    check=False,
                )
            )
        printed = output.read_text(errors="replace")
    after = session.stat()
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        session.with_name(session.name + ".stamp").unlink(missing_ok=True)
        printed += f"\n(cozempic changed {session.name}: it will be generated again)\n"
    return results, printed


def claude_report(size_mb: int, runs: int, *, cozempic_runs: int) -> None:
    """The Claude Code file: floor, scan and repair against their targets, what scan
    says, and cozempic diagnose beside them."""
    session = ensure_file(
        f"claude-{size_mb}mb.jsonl",
        lambda out: generate_claude(out, size_mb),
        generator="generate_claude.py",
        key=fingerprint(),
    )
    size = session.stat().st_size
    lines, compactions, calls = count(
        session, b"\n", b'"subtype":"compact_boundary"', b'"type":"tool_use"'
    )
    sessionfix = str(Path(sys.executable).with_name("sessionfix"))
    repaired = BENCH_DIR / "claude-repaired.jsonl"
    commands = measured_commands(session, repaired)
    results = alternate(commands, runs, repaired, largest=True)
    scan = subprocess.run(
        [sessionfix, "scan", str(session), "--no-progress", "--fail-on", "info"],
        capture_output=True,
        text=True,
    )
    cozempic = ensure_cozempic() if cozempic_runs else "not run (--cozempic-runs 0)"
    printed = ""
    if isinstance(cozempic, Path):
        name = "cozempic diagnose"
        results[name], printed = run_cozempic(cozempic, session, cozempic_runs)
        failed = [run for run in results[name] if run.returncode != 0]
        if failed:
            stderr = failed[0].stderr.decode(errors="replace").strip().splitlines() or ["nothing"]
            cozempic = f"failed: exit {failed[0].returncode}: {stderr[-1]}"
            del results[name]
    print(
        f"Claude Code file: {session.relative_to(ROOT)}  {human_bytes(size)}, {lines:,} lines, "
        f"{compactions} compactions, {calls:,} tool calls, from {len(SAMPLES)} samples; "
        f"{os.cpu_count()} CPUs, best (and median) of {runs} alternating runs"
        + (f", cozempic {cozempic_runs} after them" if isinstance(cozempic, Path) else "")
    )
    print_table(results, size, CLAUDE_TARGETS)
    scan_said = (scan.stdout + scan.stderr).strip().replace("\n", " | ")
    print(f"sessionfix scan --fail-on info: exit {scan.returncode}: {scan_said}")
    if isinstance(cozempic, Path):
        print(f"{COZEMPIC} diagnose printed:")
        for line in printed.strip("\n").splitlines():
            print(f"  | {line}".rstrip())
    else:
        print(f"{COZEMPIC} diagnose: {cozempic}")


CODEX_TARGETS = CLAUDE_TARGETS


def codex_report(size_mb: int, runs: int) -> None:
    """The Codex rollout: floor, scan and repair against their targets, and the defects
    planted in it next to those the scan finds."""

    def make(out: Path) -> None:
        stats = generate_codex(out, size_mb)
        out.with_name(out.name + ".stats.json").write_text(json.dumps(asdict(stats)))

    session = ensure_file(
        f"codex-{size_mb}mb.jsonl",
        make,
        generator="generate_codex.py",
        key=codex_fingerprint(),
    )
    stats = json.loads(session.with_name(session.name + ".stats.json").read_text())
    planted: dict[str, int] = stats["planted"]
    size = session.stat().st_size
    repaired = BENCH_DIR / "codex-repaired.jsonl"
    commands = measured_commands(session, repaired)
    results = alternate(commands, runs, repaired, largest=True)
    print(
        f"Codex file: {session.relative_to(ROOT)}  {human_bytes(size)}, {stats['records']:,} "
        f"records, {stats['turns']} turns, {stats['tool_calls']:,} tool calls, "
        f"{stats['compactions']} compactions holding {stats['compacted_bytes'] / size:.0%} of "
        f"the bytes (largest {human_bytes(stats['largest_history'])}), from "
        f"{len(CODEX_SAMPLES)} samples; {os.cpu_count()} CPUs, best (and median) of {runs} "
        "alternating runs"
    )
    print_table(results, size, CODEX_TARGETS)
    counts = found_counts(session)
    print_planted_found(planted, counts, others=True)


PI_TARGETS = CLAUDE_TARGETS
PI_ENTRY_BYTES = 64
"""The index's target, bytes an entry."""


def pi_session(size_mb: int) -> tuple[Path, dict[str, Any]]:
    """`.bench/pi-SIZEmb.jsonl`, built from the real pi samples, and what it holds."""

    def make(out: Path) -> None:
        stats = generate_pi(out, size_mb)
        out.with_name(out.name + ".stats.json").write_text(json.dumps(asdict(stats)))

    session = ensure_file(
        f"pi-{size_mb}mb.jsonl", make, generator="generate_pi.py", key=pi_fingerprint()
    )
    stats = json.loads(session.with_name(session.name + ".stats.json").read_text())
    return session, stats


def pi_report(size_mb: int, runs: int) -> None:
    """The pi session built from the real samples: floor, scan (also on one core) and
    repair against their targets, the memory held per entry, and the defects planted
    in it next to those the scan finds."""
    session, stats = pi_session(size_mb)
    size = session.stat().st_size
    repaired = BENCH_DIR / "pi-repaired.jsonl"
    commands = measured_commands(session, repaired, one_job=True)
    results = alternate(commands, runs, repaired, largest=True)
    print(
        f"pi file: {session.relative_to(ROOT)}  {human_bytes(size)}, {stats['entries']:,} "
        f"entries, {stats['copies']} copies of {len(PI_SAMPLES)} samples (v1 ones migrated "
        f"to v3), {stats['compactions']} compactions, {stats['tool_calls']:,} tool calls; "
        f"{os.cpu_count()} CPUs, best (and median) of {runs} alternating runs"
    )
    print_table(
        results, size, {**PI_TARGETS, "sessionfix scan --jobs 1": PI_TARGETS["sessionfix scan"]}
    )
    half, half_stats = pi_session(size_mb // 2)
    pi_entry_bytes((session, stats["entries"]), (half, half_stats["entries"]), runs)
    print(
        "the samples' own findings (their count grows with the copies): "
        + ", ".join(f"{code} {n}" for code, n in stats["inherent"].items())
    )
    print_planted_found(stats["expected"], found_counts(session), others=True)


def pi_entry_bytes(full: tuple[Path, int], half: tuple[Path, int], runs: int) -> None:
    """Bytes an entry of `check` (the best of `runs` peaks): on the pi file less on a
    header-only file, which counts all a check holds beyond its start, buffers too;
    and on the pi file less on one of half its size, which counts what grows with
    the entries (the index, and what the rules keep of each entry)."""
    sessionfix = str(Path(sys.executable).with_name("sessionfix"))
    empty = ensure_file("header-only.jsonl", lambda out: out.write_bytes(TINY_HEADER + b"\n"))
    print(f"{'bytes an entry, check':56s} {'PSS':>10s} {'largest':>10s}  target")
    for options in ((), ("--jobs", "1")):

        def peaks(path: Path, options: tuple[str, ...] = options) -> tuple[int, int]:
            command = [sessionfix, "check", "-q", "--no-progress", *options, str(path)]
            measures = [measure(command, largest=True) for _ in range(runs)]
            return min(m.peak_bytes for m in measures), min(m.largest_bytes for m in measures)

        top, middle, bottom = peaks(full[0]), peaks(half[0]), peaks(empty)
        for label, base, entries in (
            (f"{full[1]:,} entries less a header-only file", bottom, full[1]),
            (f"{full[1]:,} less {half[1]:,} entries", middle, full[1] - half[1]),
        ):
            pss, rss = ((top[n] - base[n]) / entries for n in (0, 1))
            met = "met" if max(pss, rss) <= PI_ENTRY_BYTES else "MISSED"
            row = f"{label} {' '.join(options)}".rstrip()
            print(f"{row:56s} {pss:10.1f} {rss:10.1f}  <= {PI_ENTRY_BYTES}: {met}")
    index, findings, count = traced_entry_bytes(half[0])
    met = "met" if index <= PI_ENTRY_BYTES else "MISSED"
    label = "traced in one process: the index"
    print(f"{label:56s} {index:10.1f} {'':10s}  <= {PI_ENTRY_BYTES}: {met}")
    print(f"{f'traced: the findings ({count:,} on {half[1]:,} entries)':56s} {findings:10.1f}")


TRACED = """
import gc, sys, tracemalloc
from pathlib import Path
from sessionfix.engine import run_rules
from sessionfix.formats import Format
from sessionfix.scan.scanner import read_session
from sessionfix.settings import Settings
gc.collect()
tracemalloc.start()
start = tracemalloc.get_traced_memory()[0]
scanned = read_session(Path(sys.argv[1]), Format.AUTO, None, 1)
gc.collect()
read = tracemalloc.get_traced_memory()[0]
found = run_rules(scanned, Settings(jobs=1), sys.argv[1])
gc.collect()
ruled = tracemalloc.get_traced_memory()[0]
entries = len(scanned.view.kinds)
print((read - start) / entries, (ruled - read) / entries, len(found))
"""
"""Bytes an entry that Python allocates for the index (the read) and for the rules'
findings, traced in one process."""


def traced_entry_bytes(path: Path) -> tuple[float, float, int]:
    """What `TRACED` prints for `path`: index and findings bytes an entry, findings."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    printed = subprocess.run(
        [sys.executable, "-c", TRACED, str(path)], env=env, capture_output=True, check=True
    ).stdout.split()
    return float(printed[0]), float(printed[1]), int(printed[2])


DIRECTORY_SESSIONS = 1000
DIRECTORY_TARGET = 1.7
"""Speed-up a directory scan should reach with 2 workers over 1."""


def directory_report(runs: int) -> None:
    """Directories of 1,000 sessions: copies of the real sessions of the corpus (beside
    the checkout), at their own sizes, and copies of the test fixtures and examples (a
    few KiB each, where the fixed cost of a run dominates). For each, the wall time of
    `scan DIR` with one worker and with two, and the speed-up."""
    corpus = ROOT.parent / "shared" / "corpus"
    real = sorted(path for path in corpus.rglob("*.jsonl") if path.is_file())
    small = sorted(
        [
            *(ROOT / "tests" / "fixtures").glob("*/input.jsonl"),
            *(ROOT / "examples" / "sessions").glob("*.jsonl"),
        ]
    )
    for name, samples in (("corpus", real), ("fixtures", small)):
        if samples:
            scan_directory(BENCH_DIR / f"directory-{name}-{DIRECTORY_SESSIONS}", samples, runs)


def scan_directory(folder: Path, samples: list[Path], runs: int) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for index in range(DIRECTORY_SESSIONS):
        sample = samples[index % len(samples)]
        shutil.copyfile(sample, folder / f"session-{index:04d}.jsonl")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    scan = [sys.executable, "-m", "sessionfix", "scan", str(folder), "--no-progress", "--quiet"]
    seconds: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(runs):
        for jobs in seconds:
            started = time.perf_counter()
            subprocess.run(
                [*scan, "--jobs", str(jobs)], env=env, stdout=subprocess.DEVNULL, check=False
            )
            seconds[jobs].append(time.perf_counter() - started)
    size = sum(path.stat().st_size for path in folder.iterdir())
    print(
        f"directory: {folder.relative_to(ROOT)}  {DIRECTORY_SESSIONS} sessions "
        f"(copies of {len(samples)} files), {human_bytes(size)}, {os.cpu_count()} CPUs, "
        f"best (and median) of {runs} alternating runs"
    )
    for jobs, times in seconds.items():
        print(f"  scan --jobs {jobs}: {min(times):.2f}s ({statistics.median(times):.2f}s)")
    best = min(seconds[1]) / min(seconds[2])
    median = statistics.median(seconds[1]) / statistics.median(seconds[2])
    print(f"  speed-up: {best:.2f}x ({median:.2f}x); target {DIRECTORY_TARGET}x")


STARTUP_RUNS = 30
"""Runs of each start-up command at least: each takes a tenth of a second, and the best
of many is what the machine's noise leaves of the cost itself."""


def startup_report(runs: int) -> None:
    """Start-up cost: `sessionfix check` of a few-KiB session beside `python -c pass`,
    best and median wall time of `runs` alternating runs, against the 100 ms target."""
    small = ROOT / "examples" / "sessions" / "windows-v1.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -m sessionfix check": [sys.executable, "-m", "sessionfix", "check", str(small)],
    }
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=False)
            seconds[name].append(time.perf_counter() - start)
    print(f"start-up: {small.relative_to(ROOT)}, best (and median) of {runs} runs, target 100 ms")
    for name, times in seconds.items():
        print(f"  {name:<28} {min(times) * 1000:6.0f} ms ({statistics.median(times) * 1000:.0f})")


def generated_report(size_mb: int, runs: int) -> None:
    """The generated pi session's table (floor, scan, repair, slim) and its planted defects."""
    session, expected = ensure_session(size_mb)
    size = session.stat().st_size
    (lines,) = count(session, b"\n")
    repaired = BENCH_DIR / "repaired.jsonl"
    commands = measured_commands(session, repaired, one_job=True)
    results = alternate(commands, runs, repaired)
    print(
        f"file: {session.relative_to(ROOT)}  {human_bytes(size)}, {lines:,} lines, "
        f"{os.cpu_count()} CPUs, best (and median) of {runs} alternating runs"
    )
    print_table(results, size)
    counts = found_counts(session)
    planted = {k: v for k, v in expected.items() if k.startswith("SF")}
    checks = {
        "SF402": int(planted.pop("SF402_error")) + int(planted.pop("SF402_info")),
        **{k: int(v) for k, v in planted.items()},
    }
    print_planted_found(checks, counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mb", type=int, default=1100, help="pi session size (MiB)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiny-entries", type=int, default=5_000_000)
    parser.add_argument("--huge-line-mb", type=int, default=1024, help="huge line size (MiB)")
    parser.add_argument(
        "--claude-size-mb", type=int, default=300, help="Claude Code session size (MiB)"
    )
    parser.add_argument(
        "--cozempic-runs", type=int, default=1, help="cozempic diagnose runs (0: none)"
    )
    parser.add_argument(
        "--memory-only", action="store_true", help="only the memory figures (no timings)"
    )
    parser.add_argument(
        "--claude-only", action="store_true", help="only the Claude Code file's figures"
    )
    parser.add_argument("--codex-size-mb", type=int, default=300, help="Codex rollout size (MiB)")
    parser.add_argument("--codex-only", action="store_true", help="only the Codex file's figures")
    parser.add_argument("--pi-size-mb", type=int, default=300, help="real-shaped pi size (MiB)")
    parser.add_argument("--pi-only", action="store_true", help="only the real-shaped pi figures")
    parser.add_argument(
        "--directory-only", action="store_true", help="only the directory scan's figures"
    )
    parser.add_argument("--startup-only", action="store_true", help="only the start-up figure")
    parser.add_argument(
        "--generated-only", action="store_true", help="only the generated pi session's figures"
    )
    args = parser.parse_args()
    if args.pi_only:
        compile_package()
        pi_report(args.pi_size_mb, args.runs)
        return
    if args.directory_only:
        directory_report(args.runs)
        return
    if args.startup_only:
        compile_package()
        startup_report(max(args.runs, STARTUP_RUNS))
        return
    if args.memory_only:
        compile_package()
        memory_report(args.tiny_entries, args.huge_line_mb)
        return
    if args.claude_only:
        compile_package()
        claude_report(args.claude_size_mb, args.runs, cozempic_runs=args.cozempic_runs)
        return
    if args.codex_only:
        compile_package()
        codex_report(args.codex_size_mb, args.runs)
        return
    compile_package()
    generated_report(args.size_mb, args.runs)
    if args.generated_only:
        return
    claude_report(args.claude_size_mb, args.runs, cozempic_runs=args.cozempic_runs)
    codex_report(args.codex_size_mb, args.runs)
    pi_report(args.pi_size_mb, args.runs)
    directory_report(args.runs)
    memory_report(args.tiny_entries, args.huge_line_mb)
    startup_report(max(args.runs, STARTUP_RUNS))


if __name__ == "__main__":
    main()
