"""The `sessionfix` command line: a thin layer over the library.

Exit codes (cli-and-safety.md §2): 0 nothing at or above `--fail-on`; 1 problems
found; 2 usage error, unreadable input or internal error. Every exception is caught
here and reported as one line on stderr.

Annotations here are evaluated when each command is defined, not postponed: typer reads
the signature of the command run (`_app_for`) on each run, and evaluating strings then
costs more.
"""

import copy
import enum
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, BinaryIO, NamedTuple

import msgspec
import typer
from msgspec import Struct

from sessionfix import containers, stores
from sessionfix.diagnostics import Diagnostic, Severity
from sessionfix.discovery import agent_folders, is_directory, shown
from sessionfix.engine import (
    EXIT_ERROR,
    EXIT_OK,
    NOT_A_SESSION,
    FixDescriber,
    check_run,
    select_files,
)
from sessionfix.errors import OutputError, SessionfixError, UsageError, described
from sessionfix.escapes import escape
from sessionfix.formats import Format, format_named
from sessionfix.report import render
from sessionfix.report.render import OutputFormat
from sessionfix.rules import RULES, get_rule
from sessionfix.settings import DEFAULT_QUIESCENCE, SLIM_PROTECTED_TURNS, Settings
from sessionfix.version import __version__

if TYPE_CHECKING:
    from rich.console import Console

    from sessionfix.repair.planned import RepairResult


app = typer.Typer(
    name="sessionfix",
    help="Find and repair corruption in the sessions coding agents persist (pi, OpenClaw, "
    "Claude Code, Codex, opencode, CodeWhale, open-webui).",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

MAX_DIFF_CONTEXT = 1 << 30
"""More context than any file has lines: the whole file is one hunk."""


class FailOn(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class RuleOutput(enum.Enum):
    TEXT = "text"
    JSON = "json"


# ---- shared options ----------------------------------------------------------------------

SelectOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--select",
        help="Rules to enable: codes (SFnnn), their prefixes or ALL; repeatable, comma-separated.",
    ),
]
ExtendSelectOpt = Annotated[
    list[str] | None,
    typer.Option("--extend-select", help="Rules to enable on top of --select."),
]
IgnoreOpt = Annotated[
    list[str] | None, typer.Option("--ignore", help="Rules to disable (codes or prefixes).")
]
OutputFormatOpt = Annotated[
    OutputFormat | None,
    typer.Option(
        "--output-format",
        envvar="SESSIONFIX_OUTPUT_FORMAT",
        help="How to print diagnostics (default: full).",
        case_sensitive=False,
    ),
]
OutputFileOpt = Annotated[
    Path | None,
    typer.Option("--output-file", help="Write diagnostics to this file instead of stdout."),
]
StatisticsOpt = Annotated[
    bool, typer.Option("--statistics", help="Print counts per rule instead of each diagnostic.")
]
FailOnOpt = Annotated[
    FailOn | None,
    typer.Option(
        "--fail-on",
        help="Lowest severity that makes the exit code 1 (default: warning).",
        case_sensitive=False,
    ),
]
ExitZeroOpt = Annotated[
    bool, typer.Option("--exit-zero", help="Exit 0 even when problems are found (errors exit 2).")
]
UnsafeFixesOpt = Annotated[
    bool | None,
    typer.Option("--unsafe-fixes/--no-unsafe-fixes", help="Count unsafe fixes as available."),
]
ExtendSafeOpt = Annotated[
    list[str] | None,
    typer.Option("--extend-safe-fixes", help="Treat these rules' unsafe fixes as safe."),
]
ExtendUnsafeOpt = Annotated[
    list[str] | None,
    typer.Option("--extend-unsafe-fixes", help="Treat these rules' safe fixes as unsafe."),
]


def _format_name(value: str | None) -> str | None:
    """`--format`: auto, or a format a registered package reads (in any case)."""
    if value is None:
        return None
    from sessionfix.config import format_name

    try:
        return format_name(value)
    except (TypeError, ValueError) as exc:
        raise typer.BadParameter(str(exc)) from None


FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        metavar="FORMAT",
        help="Session format: auto (the default) detects it per file; or a format's name "
        "(a name no format has lists them).",
        callback=_format_name,
    ),
]
ProtectOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--protect",
        help="Keep stale reads of paths matching this glob (** crosses directories).",
    ),
]
ProtectTurnsOpt = Annotated[
    int | None,
    typer.Option("--protect-last-turns", help="Keep stale reads within the last N user turns."),
]
QuiescenceOpt = Annotated[
    float | None,
    typer.Option(
        "--quiescence",
        help="Seconds since the last change after which a file is at rest (default 10).",
    ),
]
MaxRecordOpt = Annotated[
    int | None,
    typer.Option(
        "--max-record-size",
        help="Report records larger than this (bytes; default 256 KiB).",
    ),
]
CwdOpt = Annotated[
    str | None, typer.Option("--cwd", help="Working directory for a rebuilt pi header.")
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Rewrite anyway a hard-linked file (its other names keep the old bytes) or one "
        "another process holds open for writing (what it writes later reaches only the backup).",
    ),
]
FollowSymlinksOpt = Annotated[
    bool,
    typer.Option(
        "--follow-symlinks", help="Rewrite the file a symbolic link names (else refused)."
    ),
]
BreakStaleLockOpt = Annotated[
    bool,
    typer.Option("--break-stale-lock", help="Remove an OpenClaw write lock whose owner is gone."),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only diagnostics and errors.")]
NoProgressOpt = Annotated[bool, typer.Option("--no-progress", help="Never show a progress bar.")]
SessionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--session",
        help="In a session store (OpenClaw's openclaw-agent.sqlite): only this session "
        "(repeatable; default every session).",
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="A JSONL file whose first records no format reads is an error (exit 2), not skipped.",
    ),
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        help="Worker processes: many files are shared among them, a large file is read by "
        "them in parallel (default: one per core, up to 8).",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Read settings from this file (pyproject.toml or sessionfix.toml) instead of "
        "the one found from the current directory upwards.",
    ),
]
IsolatedOpt = Annotated[bool, typer.Option("--isolated", help="Ignore every configuration file.")]


def _configured(options: dict[str, Any]) -> dict[str, Any]:
    """A command's options with the configuration file filling in those not given:
    command line, then environment, then file, then the default."""
    from sessionfix import config

    found = config.load(
        Path.cwd(), explicit=options.pop("config"), isolated=options.pop("isolated")
    )
    resolved = config.resolve(options, found)
    resolved["fail_on"] = FailOn(resolved["fail_on"])
    resolved["output_format"] = OutputFormat(resolved["output_format"])
    return resolved


def _show_version(value: bool) -> None:
    """`--version`: print the version and stop before any command runs."""
    if not value:
        return
    try:
        out = _stdout()
        with _writing("to standard output"):
            out.write(f"sessionfix {__version__}\n".encode())
            out.flush()
    except SessionfixError as exc:
        print_error(str(exc))
        raise typer.Exit(EXIT_ERROR) from None
    raise typer.Exit(EXIT_OK)


@app.callback(invoke_without_command=True)
def _main_options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_show_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Options of the program itself, before the command. With no command, `scan` the
    sessions of every agent installed for the user."""
    if ctx.invoked_subcommand is None:
        scan()


class Presentation(Struct, frozen=True):
    output_format: OutputFormat
    output_file: Path | None
    statistics: bool
    quiet: bool
    no_progress: bool
    exit_zero: bool
    fixed: int | None = None
    """After a repair: how many problems were fixed (for the footer)."""
    to_stderr: bool = False
    """Diagnostics go to stderr because stdout carries another product (a diff, a file)."""
    report: BinaryIO | None = None
    """`output_file`, opened before any work (see `_open_report`)."""


def _split(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return ()
    return tuple(
        part.strip().upper() for value in values for part in value.split(",") if part.strip()
    )


def _check_selectors(selectors: Sequence[str]) -> None:
    codes = [rule.code for rule in RULES]
    for selector in selectors:
        if selector != "ALL" and not any(code.startswith(selector) for code in codes):
            raise UsageError(f"unknown rule selector {selector!r}")


def _settings(
    *,
    select: list[str] | None,
    extend_select: list[str] | None,
    ignore: list[str] | None,
    fail_on: FailOn,
    unsafe_fixes: bool,
    extend_safe_fixes: list[str] | None,
    extend_unsafe_fixes: list[str] | None,
    session_format: str,
    protect: list[str] | None,
    protect_last_turns: int,
    quiescence: float,
    max_record_size: int,
    cwd: str | None,
    jobs: int | None,
    session: list[str] | None = None,
) -> Settings:
    selected = _split(select) or ("ALL",)
    others = (
        _split(extend_select),
        _split(ignore),
        _split(extend_safe_fixes),
        _split(extend_unsafe_fixes),
    )
    settings = Settings(
        select=selected,
        extend_select=others[0],
        ignore=others[1],
        fail_on=Severity.parse(fail_on.value),
        unsafe_fixes=unsafe_fixes,
        extend_safe_fixes=others[2],
        extend_unsafe_fixes=others[3],
        format=format_named(session_format),
        protect=tuple(protect or ()),
        protect_last_turns=protect_last_turns,
        quiescence=quiescence,
        max_record_size=max_record_size,
        cwd=cwd,
        jobs=jobs,
        sessions=tuple(session or ()),
    )
    _check_selectors([*selected, *(s for group in others for s in group)])
    return settings


# ---- output plumbing ---------------------------------------------------------------------


def _stderr_console() -> "Console":
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _warning(message: str) -> None:
    _to_stderr(f"sessionfix: warning: {escape(message)}\n")


def print_error(message: str) -> None:
    _to_stderr(f"sessionfix: error: {escape(message)}\n")


def _to_stderr(line: str) -> None:
    """Logs are best effort: a closed or full stderr must not turn into a traceback."""
    stream = sys.stderr
    if stream is None:
        return
    with suppress(OSError, ValueError):
        stream.write(line)
        stream.flush()


def _stdout() -> BinaryIO:
    """Standard output as bytes; a command that prints its product there refuses to start
    when it is closed (`>&-`), before it does any work."""
    stream = sys.stdout
    if stream is None:
        raise OutputError("cannot write to standard output (it is closed)")
    return stream.buffer


@contextmanager
def _writing(what: str) -> Iterator[None]:
    """Turn a failed write of a command's product into one error line (exit 2). A reader
    that went away (`| head`) is not an error: BrokenPipeError passes through."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError(f"cannot write {what} ({described(exc)})") from None


def _open_report(path: Path, files: Sequence[Path]) -> BinaryIO:
    """Open --output-file before any work, so that a path it cannot take fails first: never
    one of the files the command reads or writes (the report would replace it), never a
    FIFO that no process reads (the write would wait for ever)."""
    from sessionfix.replacing import cannot_write, open_for_writing
    from sessionfix.safety.writing import same_file

    for other in files:
        if same_file(path, other) or os.path.realpath(path) == os.path.realpath(other):
            raise UsageError(f"{path}: is a file the command reads or writes (--output-file)")
    try:
        return open_for_writing(path, os.O_CREAT | os.O_TRUNC)
    except OSError as exc:
        raise OutputError(f"cannot write {path} ({cannot_write(exc)})") from None


def _with_report(presentation: Presentation, files: Sequence[Path]) -> Presentation:
    """The presentation with its --output-file opened (see `_open_report`)."""
    if presentation.output_file is None:
        return presentation
    report = _open_report(presentation.output_file, files)
    return msgspec.structs.replace(presentation, report=report)


@contextmanager
def _output(presentation: Presentation) -> Iterator[IO[bytes]]:
    path, to_stderr = presentation.output_file, presentation.to_stderr
    if path is None:
        if to_stderr:
            if sys.stderr is None:
                yield open(os.devnull, "wb")  # noqa: SIM115 - nothing to keep open
                return
            stream = sys.stderr.buffer
        else:
            stream = _stdout()
        with _writing("to standard error" if to_stderr else "to standard output"):
            yield stream
            stream.flush()
        return
    handle = presentation.report or _open_report(path, ())
    with _writing(str(path)), handle:
        yield handle


def _progress_enabled(presentation: Presentation) -> bool:
    if presentation.quiet or presentation.no_progress:
        return False
    if not presentation.output_format.is_human and presentation.output_file is None:
        return False
    if os.environ.get("TERM", "") in ("dumb", "unknown") or sys.stderr is None:
        return False
    return sys.stderr.isatty()


@contextmanager
def _progress(enabled: bool, total: int) -> Iterator[Callable[[int], None] | None]:
    if not enabled:
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from sessionfix.report.progress import BinarySpeedColumn

    progress = Progress(
        TextColumn("scanning"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        BinarySpeedColumn(),
        TimeRemainingColumn(),
        console=_stderr_console(),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
        refresh_per_second=5,
    )
    with progress:
        task = progress.add_task("scan", total=total)
        yield lambda advance: progress.advance(task, advance)


def _write_report(
    diagnostics: list[Diagnostic], presentation: Presentation, settings: Settings, unreadable: int
) -> None:
    """Print the report. A reader that stops reading (`| head`) ends the printing, not
    the run: the exit code still says what was found."""
    try:
        _print_report(diagnostics, presentation, settings, unreadable)
    except BrokenPipeError:
        if presentation.output_file is not None:
            raise
        _discard_stdout()


def _discard_stdout() -> None:
    """Point stdout at the null device, so that nothing left in its buffers fails again."""
    with suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _print_report(
    diagnostics: list[Diagnostic], presentation: Presentation, settings: Settings, unreadable: int
) -> None:
    with _output(presentation) as out:
        render.write_report(
            diagnostics,
            out,
            presentation.output_format,
            as_statistics=presentation.statistics,
            color=presentation.output_format.is_human and _wants_color(out, presentation),
            unsafe_fixes=settings.unsafe_fixes,
            quiet=presentation.quiet,
            unreadable=unreadable,
            fixed=presentation.fixed,
        )


def _wants_color(stream: IO[bytes], presentation: Presentation) -> bool:
    """Colour only on a terminal that supports it, and never under NO_COLOR (rich decides)."""
    if presentation.output_file is not None or not stream.isatty():
        return False
    import io

    from rich.console import Console

    text = io.TextIOWrapper(stream, encoding="utf-8")
    try:
        console = Console(file=text)
        return console.is_terminal and not console.no_color and console.color_system is not None
    finally:
        text.detach()


def _guard(action: Callable[[], int]) -> int:
    """Run a command body; every failure becomes one line on stderr and exit 2."""
    try:
        return action()
    except SessionfixError as exc:
        print_error(str(exc))
    except KeyboardInterrupt:
        print_error("interrupted")
    except BrokenPipeError:
        # The reader of stdout went away (e.g. `| head`): silence the final flush.
        with suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except Exception as exc:
        print_error(f"internal error: {type(exc).__name__}: {exc}")
    return EXIT_ERROR


def _run_check(
    paths: Sequence[Path],
    settings: Settings,
    presentation: Presentation,
    *,
    walk: bool,
    strict: bool = False,
) -> int:
    home = Path.home()
    looked: list[Path] = []
    if walk and not paths:
        # No path: every installed agent's session folders.
        paths, looked = agent_folders(os.environ, home)
    sniff = settings.format is Format.AUTO
    selection = select_files(paths, walk=walk, sniff=sniff, strict=strict)
    selection.origins = [shown(path, home) for path in paths] if looked else []
    for path in selection.foreign:
        _warning(f"{path}: {NOT_A_SESSION}; skipped (--format FORMAT reads it as a session)")
    presentation = _with_report(presentation, selection.files)
    with _progress(_progress_enabled(presentation) and walk, selection.size) as advance:
        edits = presentation.output_format in (OutputFormat.JSON, OutputFormat.JSON_LINES)
        excerpts = render.shows_excerpts(
            presentation.output_format, as_statistics=presentation.statistics
        )
        run = check_run(
            selection,
            settings,
            progress=advance,
            edits=edits,
            excerpts=excerpts,
            describe=_fix_describer(edits),
        )
    _write_report(run.diagnostics, presentation, settings, len(run.errors))
    for line in run.notices:
        _warning(line)
    for message in run.errors:
        print_error(message)
    if not presentation.quiet and walk:
        if looked and not paths:
            looked_in = ", ".join(shown(path, home) for path in looked)
            _note(f"No agent session folders found (looked in {looked_in})")
        else:
            _note(run.note())
    return run.exit_code(settings, presentation.exit_zero)


def _fix_describer(edits: bool) -> FixDescriber | None:
    """What completes each fix's edits for a report that lists them: the repair's plan,
    loaded only then."""
    if not edits:
        return None
    from sessionfix.repair.plan import described_fixes

    return described_fixes


# ---- commands ----------------------------------------------------------------------------


@app.command()
def scan(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Session files or directories to search for *.jsonl (default: every "
            "installed agent's session folders).",
            readable=False,
            show_default=False,
        ),
    ] = None,
    select: SelectOpt = None,
    extend_select: ExtendSelectOpt = None,
    ignore: IgnoreOpt = None,
    output_format: OutputFormatOpt = None,
    output_file: OutputFileOpt = None,
    statistics: StatisticsOpt = False,
    fail_on: FailOnOpt = None,
    exit_zero: ExitZeroOpt = False,
    unsafe_fixes: UnsafeFixesOpt = None,
    extend_safe_fixes: ExtendSafeOpt = None,
    extend_unsafe_fixes: ExtendUnsafeOpt = None,
    session_format: FormatOpt = None,
    protect: ProtectOpt = None,
    protect_last_turns: ProtectTurnsOpt = None,
    quiescence: QuiescenceOpt = None,
    max_record_size: MaxRecordOpt = None,
    cwd: CwdOpt = None,
    quiet: QuietOpt = False,
    no_progress: NoProgressOpt = False,
    session: SessionOpt = None,
    jobs: JobsOpt = None,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
    strict: StrictOpt = False,
) -> None:
    """Find session files under PATHS (default: the agents' session folders) and report
    every problem. Never changes a file."""
    options = locals()
    options["paths"] = paths or []
    raise typer.Exit(_guard(lambda: _check_command(walk=True, **_configured(options))))


@app.command()
def check(
    files: Annotated[list[Path], typer.Argument(help="Session files to check.", readable=False)],
    select: SelectOpt = None,
    extend_select: ExtendSelectOpt = None,
    ignore: IgnoreOpt = None,
    output_format: OutputFormatOpt = None,
    output_file: OutputFileOpt = None,
    statistics: StatisticsOpt = False,
    fail_on: FailOnOpt = None,
    exit_zero: ExitZeroOpt = False,
    unsafe_fixes: UnsafeFixesOpt = None,
    extend_safe_fixes: ExtendSafeOpt = None,
    extend_unsafe_fixes: ExtendUnsafeOpt = None,
    session_format: FormatOpt = None,
    protect: ProtectOpt = None,
    protect_last_turns: ProtectTurnsOpt = None,
    quiescence: QuiescenceOpt = None,
    max_record_size: MaxRecordOpt = None,
    cwd: CwdOpt = None,
    quiet: QuietOpt = False,
    no_progress: NoProgressOpt = False,
    session: SessionOpt = None,
    jobs: JobsOpt = None,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
    strict: StrictOpt = False,
) -> None:
    """Report problems in explicit session FILES (for CI and pre-commit). Never changes a file."""
    options = locals()
    paths = options.pop("files")
    raise typer.Exit(
        _guard(lambda: _check_command(walk=False, paths=paths, **_configured(options)))
    )


def _check_command(
    *,
    walk: bool,
    paths: list[Path],
    output_format: OutputFormat,
    output_file: Path | None,
    statistics: bool,
    quiet: bool,
    no_progress: bool,
    exit_zero: bool,
    strict: bool,
    **rule_options: Any,
) -> int:
    settings = _settings(**rule_options)
    if output_file is None:
        _stdout()
    presentation = Presentation(
        output_format=output_format,
        output_file=output_file,
        statistics=statistics,
        quiet=quiet,
        no_progress=no_progress,
        exit_zero=exit_zero,
    )
    return _run_check(paths, settings, presentation, walk=walk, strict=strict)


@app.command()
def repair(
    files: Annotated[list[Path], typer.Argument(help="Session files to repair.", readable=False)],
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", help="Write the repaired copy here (- for stdout); one input file."
        ),
    ] = None,
    in_place: Annotated[
        bool,
        typer.Option("--in-place", help="Rewrite each file atomically, keeping a backup."),
    ] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="Change nothing; print a unified diff of the repair.")
    ] = False,
    select: SelectOpt = None,
    extend_select: ExtendSelectOpt = None,
    ignore: IgnoreOpt = None,
    output_format: OutputFormatOpt = None,
    output_file: OutputFileOpt = None,
    statistics: StatisticsOpt = False,
    fail_on: FailOnOpt = None,
    exit_zero: ExitZeroOpt = False,
    exit_non_zero_on_fix: Annotated[
        bool, typer.Option("--exit-non-zero-on-fix", help="Exit 1 when a file was changed.")
    ] = False,
    unsafe_fixes: Annotated[
        bool | None,
        typer.Option("--unsafe-fixes/--no-unsafe-fixes", help="Also apply unsafe fixes."),
    ] = None,
    extend_safe_fixes: ExtendSafeOpt = None,
    extend_unsafe_fixes: ExtendUnsafeOpt = None,
    session_format: FormatOpt = None,
    protect: ProtectOpt = None,
    protect_last_turns: ProtectTurnsOpt = None,
    quiescence: QuiescenceOpt = None,
    max_record_size: MaxRecordOpt = None,
    cwd: CwdOpt = None,
    prune_to_leaf: Annotated[
        bool,
        typer.Option(
            "--prune-to-leaf",
            help="Drop every entry off the active path (unsafe; /tree history is lost).",
        ),
    ] = False,
    backup: Annotated[
        bool,
        typer.Option("--backup/--no-backup", help="Keep the original as NAME.sessionfix-bak-*."),
    ] = True,
    force: ForceOpt = False,
    follow_symlinks: FollowSymlinksOpt = False,
    break_stale_lock: BreakStaleLockOpt = False,
    diff_context: Annotated[
        int, typer.Option("--diff-context", help="Lines of context around each change.")
    ] = 3,
    diff_full_lines: Annotated[
        bool,
        typer.Option(
            "--diff-full-lines",
            help="On a terminal, do not shorten lines over 4 KiB (a diff written to a pipe "
            "or a file always holds the exact lines, for patch).",
        ),
    ] = False,
    quiet: QuietOpt = False,
    no_progress: NoProgressOpt = False,
    session: SessionOpt = None,
    jobs: JobsOpt = None,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
) -> None:
    """Repair session FILES: to a new file (-o), in place (--in-place) or as a diff (--diff).

    Safe fixes are applied by default; unsafe ones with --unsafe-fixes. Every result is
    verified before it is written.
    """
    options = locals()
    raise typer.Exit(_guard(lambda: _repair_command(**_configured(options))))


class RepairTarget(Struct, frozen=True):
    """Where a repair goes: one of a new file, stdout, the file itself, or a diff."""

    output: str | None
    in_place: bool
    diff: bool
    backup: bool
    force: bool
    follow_symlinks: bool
    break_stale_lock: bool
    diff_context: int
    diff_full_lines: bool
    exit_non_zero_on_fix: bool


def _repair_command(
    *,
    files: list[Path],
    output: str | None,
    in_place: bool,
    diff: bool,
    backup: bool,
    force: bool,
    follow_symlinks: bool,
    break_stale_lock: bool,
    diff_context: int,
    diff_full_lines: bool,
    exit_non_zero_on_fix: bool,
    output_format: OutputFormat,
    output_file: Path | None,
    statistics: bool,
    quiet: bool,
    no_progress: bool,
    exit_zero: bool,
    prune_to_leaf: bool,
    budget: int | None = None,
    max_size: int | None = None,
    **rule_options: Any,
) -> int:
    chosen = (output is not None) + in_place + diff
    if chosen != 1:
        raise UsageError("choose exactly one of -o/--output, --in-place and --diff")
    if output is not None and len(files) != 1:
        raise UsageError("-o/--output takes exactly one input file")
    if exit_zero and exit_non_zero_on_fix:
        raise UsageError("--exit-zero and --exit-non-zero-on-fix cannot be combined")
    if diff_context < 0:
        raise UsageError("--diff-context must be 0 or more")
    diff_context = min(diff_context, MAX_DIFF_CONTEXT)
    settings = msgspec.structs.replace(
        _settings(**rule_options), prune_to_leaf=prune_to_leaf, budget=budget, max_size=max_size
    )
    if output_file is None or diff or output == "-":
        _stdout()
    presentation = Presentation(
        output_format=output_format,
        output_file=output_file,
        statistics=statistics,
        quiet=quiet,
        no_progress=no_progress,
        exit_zero=exit_zero,
        to_stderr=output == "-" or diff,
    )
    target = RepairTarget(
        output=output,
        in_place=in_place,
        diff=diff,
        backup=backup,
        force=force,
        follow_symlinks=follow_symlinks,
        break_stale_lock=break_stale_lock,
        diff_context=diff_context,
        diff_full_lines=diff_full_lines,
        exit_non_zero_on_fix=exit_non_zero_on_fix,
    )
    command = "slim" if settings.slims else "repair"
    if settings.slims and output_format in (OutputFormat.GITHUB, OutputFormat.SARIF):
        raise UsageError("slim prints its plan as full, concise, json or json-lines")
    for path in files:
        if is_directory(path):
            raise UsageError(f"{path}: is a directory ({command} takes session files)")
    from sessionfix.safety.writing import same_file

    if output not in (None, "-") and same_file(Path(output), files[0]):
        raise UsageError(f"{output}: is the input file (use --in-place to rewrite it)")
    written = [Path(output)] if output not in (None, "-") else []
    if not (diff and output_format.is_human):  # a diff as text prints no report
        presentation = _with_report(presentation, [*files, *written])
    if diff:
        return _run_diff(files, settings, presentation, target)
    return _run_repair(files, settings, presentation, target)


def _run_diff(
    files: list[Path], settings: Settings, presentation: Presentation, target: RepairTarget
) -> int:
    from sessionfix.repair.runs import PreviewRun
    from sessionfix.report.diff import write_diff

    out = _stdout()
    exact = not out.isatty()
    with PreviewRun(files, settings) as run:
        if presentation.output_format.is_human:
            for preview in run.diffs():
                _show_slim(preview.result, presentation)
                with _writing("to standard output"):
                    write_diff(
                        preview,
                        out,
                        str(preview.path),
                        context=target.diff_context,
                        full_lines=target.diff_full_lines,
                        exact=exact,
                    )
        elif settings.slims:
            plans = [preview.result for preview in run.diffs()]
            _write_plans(plans, msgspec.structs.replace(presentation, to_stderr=False))
        else:
            _write_report(
                run.plan(),
                msgspec.structs.replace(presentation, to_stderr=False),
                settings,
                len(run.errors),
            )
        with _writing("to standard output"):
            out.flush()
    for line in run.notices:
        _warning(line)
    for message in run.errors:
        print_error(message)
    note = run.note()
    if not presentation.quiet and note is not None:
        _note(note)
    return run.exit_code(presentation.exit_zero)


def _run_repair(
    files: list[Path], settings: Settings, presentation: Presentation, target: RepairTarget
) -> int:
    from sessionfix.repair.runs import repair_paths

    run = repair_paths(
        files,
        settings,
        in_place=target.in_place,
        output=Path(target.output) if target.output not in (None, "-") else None,
        stream=_stdout() if target.output == "-" else None,
        backup=target.backup,
        force=target.force,
        follow_symlinks=target.follow_symlinks,
        break_stale_lock=target.break_stale_lock,
        keep_stopped=True,
    )
    for result in run.results:
        _show_slim(result, presentation)
    fixed = msgspec.structs.replace(presentation, fixed=run.fixed)
    # A slim's findings are repair's: it shows its plan instead, in words or as data.
    if settings.slims:
        if not presentation.output_format.is_human:
            _write_plans(run.results, presentation)
    elif not run.ended_early or run.results or run.errors:
        _write_report(run.remaining, fixed, settings, len(run.errors))
    for line in run.notices:
        _warning(line)
    for message in run.errors:
        print_error(message)
    note = run.note(in_place=target.in_place)
    if not presentation.quiet and note is not None:
        _note(note)
    for line in run.unsettled:
        _warning(line)
    if not presentation.quiet:
        for line in run.rewrite_notes:
            _note(line)
    for line in run.repaired_before_stop:
        _warning(line)
    if run.stopped is not None:
        raise run.stopped  # reported as it would have been had it not waited
    return run.exit_code(
        settings, exit_zero=presentation.exit_zero, exit_on_fix=target.exit_non_zero_on_fix
    )


def _write_plans(results: "list[RepairResult]", presentation: Presentation) -> None:
    """Slims' plans as machine output: a JSON array of them, or a line each."""
    plans = [r.slimmed.as_json(r.filename) for r in results if r.slimmed is not None]
    if presentation.output_format is OutputFormat.JSON_LINES:
        text = b"".join(msgspec.json.encode(plan) + b"\n" for plan in plans)
    else:
        text = msgspec.json.format(msgspec.json.encode(plans), indent=2) + b"\n"
    try:
        with _output(presentation) as out:
            out.write(text)
    except BrokenPipeError:
        if presentation.output_file is not None:
            raise
        _discard_stdout()


def _show_slim(result: "RepairResult", presentation: Presentation) -> None:
    """A slim's plan in words, to stderr: what goes, what each step saves, what remains."""
    if result.slimmed is None or presentation.quiet or not presentation.output_format.is_human:
        return
    for line in result.slimmed.lines(result.filename):
        _note(line)


def _note(message: str) -> None:
    """A summary line, plain: importing rich to print it took longer than some scans."""
    _to_stderr(f"{escape(message)}\n")


@app.command()
def slim(
    files: Annotated[list[Path], typer.Argument(help="Session files to slim.", readable=False)],
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help="Tokens the agent may load: a count (150000, 150k) or a share of --model's "
            "context window (80%).",
        ),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option(
            "--max-size",
            help="Bytes the session may take (100MB, 1.5GiB): met by dropping what the agent "
            "keeps but never sends.",
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="The model whose published context window --budget % is of."),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", help="Write the slimmed copy here (- for stdout); one input file."
        ),
    ] = None,
    in_place: Annotated[
        bool,
        typer.Option("--in-place", help="Rewrite each file atomically, keeping a backup."),
    ] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="Change nothing; print the plan and a unified diff.")
    ] = False,
    protect: ProtectOpt = None,
    protect_last_turns: Annotated[
        int,
        typer.Option(
            "--protect-last-turns",
            help="Leave the last N user turns whole (stale reads in them too).",
        ),
    ] = SLIM_PROTECTED_TURNS,
    session_format: FormatOpt = None,
    quiescence: QuiescenceOpt = None,
    output_format: OutputFormatOpt = None,
    output_file: OutputFileOpt = None,
    backup: Annotated[
        bool,
        typer.Option("--backup/--no-backup", help="Keep the original as NAME.sessionfix-bak-*."),
    ] = True,
    force: ForceOpt = False,
    follow_symlinks: FollowSymlinksOpt = False,
    break_stale_lock: BreakStaleLockOpt = False,
    quiet: QuietOpt = False,
    no_progress: NoProgressOpt = False,
    session: SessionOpt = None,
    jobs: JobsOpt = None,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
) -> None:
    """Bring what the agent loads from each session FILE under a token budget, and its
    bytes under a size: repair it, then cut old tool outputs to a head and a tail,
    replace old inline media and, last, leave out the oldest turns a compaction keeps,
    until it fits the budget; then drop what the agent keeps but never sends until it
    fits the size. To a new file (-o), in place (--in-place) or as a diff.

    The plan (each step and the tokens and bytes it saves) goes to stderr, or to stdout
    as JSON with --output-format json.
    The result is counted again and must be within both, or nothing is written.
    A session already within them is left as it is.
    """
    options = locals()
    budget_text, model_name = options.pop("budget"), options.pop("model")
    size_text = options.pop("max_size")
    options.update(
        select=None,
        extend_select=None,
        ignore=None,
        fail_on=None,
        unsafe_fixes=None,
        extend_safe_fixes=None,
        extend_unsafe_fixes=None,
        max_record_size=None,
        cwd=None,
        statistics=False,
        exit_zero=True,
    )

    def run() -> int:
        from sessionfix.slim import budget_tokens, size_bytes

        if budget_text is None and size_text is None:
            raise UsageError("slim needs --budget, --max-size or both")
        if budget_text is None and model_name is not None:
            raise UsageError("--model goes with --budget")
        return _repair_command(
            **_configured(options),
            diff_context=3,
            diff_full_lines=False,
            exit_non_zero_on_fix=False,
            prune_to_leaf=False,
            budget=None if budget_text is None else budget_tokens(budget_text, model_name),
            max_size=None if size_text is None else size_bytes(size_text),
        )

    raise typer.Exit(_guard(run))


@app.command()
def context(
    files: Annotated[
        list[Path],
        typer.Argument(help="Session files or stores to measure.", readable=False),
    ],
    output_format: Annotated[
        RuleOutput,
        typer.Option("--output-format", help="text or json.", case_sensitive=False),
    ] = RuleOutput.TEXT,
    after_repair: Annotated[
        bool,
        typer.Option(
            "--after-repair",
            help="Measure the file repair would write (the session is not changed), beside "
            "what it holds now.",
        ),
    ] = False,
    after_slim: Annotated[
        bool,
        typer.Option(
            "--after-slim",
            help="Measure the file slim would write to fit --budget and --max-size (the "
            "session is not changed), beside what it holds now.",
        ),
    ] = False,
    budget: Annotated[
        str | None,
        typer.Option("--budget", help="With --after-slim: the budget, as slim takes it."),
    ] = None,
    max_size: Annotated[
        str | None,
        typer.Option("--max-size", help="With --after-slim: the size, as slim takes it."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="With --after-slim: the model a --budget % is of."),
    ] = None,
    select: SelectOpt = None,
    extend_select: ExtendSelectOpt = None,
    ignore: IgnoreOpt = None,
    unsafe_fixes: UnsafeFixesOpt = None,
    extend_safe_fixes: ExtendSafeOpt = None,
    extend_unsafe_fixes: ExtendUnsafeOpt = None,
    session_format: FormatOpt = None,
    protect: ProtectOpt = None,
    protect_last_turns: ProtectTurnsOpt = None,
    max_record_size: MaxRecordOpt = None,
    cwd: CwdOpt = None,
    session: SessionOpt = None,
    jobs: JobsOpt = None,
    config: ConfigOpt = None,
    isolated: IsolatedOpt = False,
) -> None:
    """Show what the agent loads when it resumes each session (messages by role and an
    estimate of their tokens) and where the file's bytes go. Never changes a file.

    Tokens are estimated: a token for every 4 bytes of message JSON, 1,600 for an
    inline image.
    """
    options = locals()
    paths = options.pop("files")
    shown_as = options.pop("output_format")
    after = options.pop("after_repair")
    slimmed = SlimLimits(
        options.pop("after_slim"),
        options.pop("budget"),
        options.pop("max_size"),
        options.pop("model"),
    )
    if slimmed.after_slim and options["protect_last_turns"] is None:
        options["protect_last_turns"] = SLIM_PROTECTED_TURNS
    options.update(fail_on=None, quiescence=None, output_format=None)
    raise typer.Exit(
        _guard(lambda: _context_command(paths, shown_as, after, _configured(options), slimmed))
    )


class SlimLimits(NamedTuple):
    """`context --after-slim`'s options, as given: the budget, the size and the model."""

    after_slim: bool = False
    budget: str | None = None
    max_size: str | None = None
    model: str | None = None


def _context_command(
    paths: list[Path],
    output_format: RuleOutput,
    after_repair: bool,
    options: dict[str, Any],
    slimmed: SlimLimits | None = None,
) -> int:
    from sessionfix.context import SessionContext, contexts
    from sessionfix.report import context as report

    for name in ("output_format", "output_file", "statistics", "exit_zero", "strict"):
        options.pop(name, None)
    options["quiescence"] = 0.0
    settings = _settings(**options)
    slimmed = slimmed or SlimLimits()
    limited = slimmed.budget is not None or slimmed.max_size is not None
    if limited != slimmed.after_slim:
        raise UsageError("--after-slim goes with --budget, --max-size or both")
    if slimmed.budget is None and slimmed.model is not None:
        raise UsageError("--model goes with --budget")
    if limited:
        from sessionfix.slim import budget_tokens, size_bytes

        if after_repair:
            raise UsageError("choose one of --after-repair and --after-slim")
        settings = msgspec.structs.replace(
            settings,
            budget=None if slimmed.budget is None else budget_tokens(slimmed.budget, slimmed.model),
            max_size=None if slimmed.max_size is None else size_bytes(slimmed.max_size),
        )
        after_repair = True
    out = _stdout()
    measured: list[tuple[SessionContext, SessionContext | None]] = []
    failed = 0
    for path in paths:
        try:
            measured.extend(contexts([path], settings, after_repair=after_repair))
        except SessionfixError as exc:
            print_error(str(exc))
            failed += 1
    if settings.sessions and not any(containers.is_store(path) for path in paths):
        for line in stores.unmatched_sessions(settings.sessions, ()):
            print_error(line)
            failed += 1
    shown_first = [after or now for now, after in measured]
    befores = [now if after is not None else None for now, after in measured]
    render = report.render_json if output_format is RuleOutput.JSON else report.render_all_text
    with _writing("to standard output"):
        out.write(render(shown_first, befores))
        out.flush()
    return EXIT_ERROR if failed else EXIT_OK


@app.command()
def restore(
    session: Annotated[
        Path, typer.Argument(help="The session file to put a backup back into.", readable=False)
    ],
    backup: Annotated[
        str | None,
        typer.Option("--backup", help="The backup to restore (its file name); default newest."),
    ] = None,
    list_only: Annotated[
        bool,
        typer.Option(
            "--list",
            help="Show the session's backups, newest first, each verified against its record.",
        ),
    ] = False,
    output_format: Annotated[
        RuleOutput,
        typer.Option("--output-format", help="text or json (with --list).", case_sensitive=False),
    ] = RuleOutput.TEXT,
    keep: Annotated[
        bool,
        typer.Option(
            "--backup-current/--no-backup-current",
            help="Keep the version being replaced as a backup.",
        ),
    ] = True,
    quiescence: QuiescenceOpt = DEFAULT_QUIESCENCE,
    break_stale_lock: BreakStaleLockOpt = False,
    force: ForceOpt = False,
    follow_symlinks: FollowSymlinksOpt = False,
    quiet: QuietOpt = False,
    store_session: Annotated[
        str | None,
        typer.Option(
            "--session",
            help="In a session store: the session whose backup to list or put back "
            "(needed when the store holds several).",
        ),
    ] = None,
) -> None:
    """Put back a backup that repair --in-place kept (the newest, or --backup NAME).

    Only a backup that holds the bytes its name records is restored by default; a damaged
    one never. The version it replaces is kept as a backup in its turn, so a restore can
    be undone.
    """
    options = locals()
    raise typer.Exit(_guard(lambda: _restore_command(**options)))


def _restore_command(
    *,
    session: Path,
    backup: str | None,
    list_only: bool,
    output_format: RuleOutput,
    keep: bool,
    quiescence: float,
    break_stale_lock: bool,
    force: bool,
    follow_symlinks: bool,
    quiet: bool,
    store_session: str | None,
) -> int:
    from sessionfix.report import backups
    from sessionfix.safety.restoring import BackupListing, RestoreRequest, run_restore

    if quiescence < 0:
        raise UsageError("--quiescence must be 0 or more")
    done = run_restore(
        RestoreRequest(
            session,
            store_session=store_session,
            backup=backup,
            list_only=list_only,
            keep_current=keep,
            quiescence=quiescence,
            force=force,
            follow_symlinks=follow_symlinks,
            break_stale_lock=break_stale_lock,
        )
    )
    if isinstance(done, BackupListing):
        out = _stdout()
        with _writing("to standard output"):
            out.write(backups.backup_listing(done, as_json=output_format is RuleOutput.JSON))
            out.flush()
        note = backups.listing_note(done)
        if note is not None and not quiet:
            _note(note)
        return EXIT_OK
    warning = backups.restore_warning(done)
    if warning is not None:
        _warning(warning)
    if not quiet:
        _note(backups.restore_note(done))
    return EXIT_OK


@app.command()
def rule(
    code: Annotated[
        str | None, typer.Argument(help="Rule code (SFnnn) or name, as `rule --all` lists them.")
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show every rule.")] = False,
    output_format: Annotated[
        RuleOutput, typer.Option("--output-format", help="text or json.", case_sensitive=False)
    ] = RuleOutput.TEXT,
) -> None:
    """Show the documentation of a rule (or of every rule with --all)."""
    raise typer.Exit(_guard(lambda: _rule_command(code, show_all, output_format)))


def _rule_command(code: str | None, show_all: bool, output_format: RuleOutput) -> int:
    if show_all == (code is not None):
        raise UsageError("give a rule code or --all (not both)")
    if code is not None:
        found = get_rule(code)
        if found is None:
            raise UsageError(f"unknown rule {code!r}")
        chosen = [found]
    else:
        chosen = list(RULES)
    out = _stdout()
    text = render.rules_text(chosen, as_json=output_format is RuleOutput.JSON, listing=show_all)
    with _writing("to standard output"):
        out.write(text)
        out.flush()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default: sys.argv[1:]) and return its exit code.

    A usage error (a missing argument, a bad option value, from the command line or the
    environment) is one line and exit 2, like every other error; so is an abort."""
    from typer.exceptions import TyperException

    args = list(argv) if argv is not None else sys.argv[1:]
    if sys.stdout is None and any(arg in ("-h", "--help") for arg in args):
        print_error("cannot write to standard output (it is closed)")
        return EXIT_ERROR
    try:
        code = _app_for(args)(
            args=args,
            prog_name="sessionfix",
            standalone_mode=False,
        )
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return EXIT_OK
        return code if isinstance(code, int) else EXIT_ERROR
    except TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()  # type: ignore[attr-defined] # prints the help, as asked
        else:
            print_error(_usage_line(exc))
        return EXIT_ERROR
    except (typer.Abort, KeyboardInterrupt):
        print_error("interrupted")
        return EXIT_ERROR
    except Exception as exc:
        print_error(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_ERROR
    if code == TYPER_INTERRUPTED:
        print_error("interrupted")
        return EXIT_ERROR
    return code if isinstance(code, int) else EXIT_OK


TYPER_INTERRUPTED = 130
"""What typer returns, saying nothing, for an interrupt outside a command's body (while
it reads the options); no command of sessionfix exits with it."""


def _app_for(args: Sequence[str]) -> typer.Typer:
    """The app with only the command `args` start with: typer builds each command's
    options from its signature, which for every command takes as long as checking a
    small file. Help, a global option first, or an unknown command get the whole app."""
    if not args or args[0].startswith("-"):
        return app
    from typer.main import get_command_name

    named = [
        command
        for command in app.registered_commands
        if command.callback is not None
        and (command.name or get_command_name(command.callback.__name__)) == args[0]
    ]
    if not named:
        return app
    only = copy.copy(app)
    only.registered_commands = named
    return only


def _usage_line(error: Exception) -> str:
    """A usage error on one line, with where to find help."""
    message = getattr(error, "format_message", lambda: str(error))()
    text = "; ".join(part.strip() for part in str(message).splitlines() if part.strip())
    text = text[:1].lower() + text[1:].rstrip(".")
    context = getattr(error, "ctx", None)
    command = getattr(context, "command_path", None)
    return f"{text} (see '{command} --help')" if command else text
