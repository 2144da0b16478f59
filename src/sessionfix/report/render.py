"""Rendering diagnostics: human formats, JSON, JSON lines, GitHub annotations, SARIF.

Machine formats are written as bytes with no header or footer. Human formats escape
every piece of session text (control characters, terminal escapes, markup) before
it reaches a terminal.
"""

from __future__ import annotations

import base64
import enum
import io
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Final
from urllib.parse import quote

import orjson
from msgspec import Struct

from sessionfix.diagnostics import Applicability, Diagnostic, Severity, WrittenLine
from sessionfix.escapes import escape, escape_surrogates
from sessionfix.rules import RULES, Rule, get_rule
from sessionfix.version import __version__


class OutputFormat(enum.Enum):
    FULL = "full"
    CONCISE = "concise"
    JSON = "json"
    JSON_LINES = "json-lines"
    GITHUB = "github"
    SARIF = "sarif"

    @property
    def is_human(self) -> bool:
        return self in (OutputFormat.FULL, OutputFormat.CONCISE)


class FixCounts(Struct, frozen=True):
    safe: int
    unsafe: int


def count_fixes(diagnostics: Iterable[Diagnostic]) -> FixCounts:
    safe = unsafe = 0
    for diagnostic in diagnostics:
        if diagnostic.fix is None:
            continue
        if diagnostic.fix.applicability is Applicability.SAFE:
            safe += 1
        else:
            unsafe += 1
    return FixCounts(safe, unsafe)


def _fix_marker(diagnostic: Diagnostic, unsafe_fixes: bool) -> str:
    fix = diagnostic.fix
    if fix is None:
        return ""
    if fix.applicability is Applicability.SAFE or unsafe_fixes:
        return "[*] "
    return ""


_SGR: Final = {
    "bold": "1",
    "dim": "2",
    "cyan": "36",
    "yellow": "33",
    "bold red": "1;31",
}
_SEVERITY_STYLE: Final = {
    Severity.ERROR: "bold red",
    Severity.WARNING: "yellow",
    Severity.INFO: "cyan",
}
_PRINT_BATCH: Final = 256
"""Diagnostics rendered per write."""


def _painter(color: bool) -> Callable[[str, str], str]:
    if not color:
        return lambda text, style: text
    return lambda text, style: f"\x1b[{_SGR[style]}m{text}\x1b[0m"


def render_human(
    diagnostics: Sequence[Diagnostic],
    out: IO[str],
    *,
    color: bool,
    concise: bool,
    unsafe_fixes: bool,
) -> None:
    """ruff-style text: a located first line per diagnostic and, unless `concise`, an
    excerpt of the record, its severity, name and entry, and the fix it proposes.
    Session text is escaped; styles are plain SGR codes, only when `color`."""
    paint = _painter(color)
    lines: list[str] = []
    for number, diagnostic in enumerate(diagnostics, 1):
        lines.append(_header_line(diagnostic, unsafe_fixes, paint))
        if not concise:
            lines.extend(_details(diagnostic, paint))
        if number % _PRINT_BATCH == 0 or number == len(diagnostics):
            lines.append("")
            out.write("\n".join(lines))
            lines = []


def _header_line(
    diagnostic: Diagnostic, unsafe_fixes: bool, paint: Callable[[str, str], str]
) -> str:
    marker = _fix_marker(diagnostic, unsafe_fixes)
    return "".join(
        (
            paint(escape(diagnostic.filename), "bold"),
            paint(escape(diagnostic.place[len(diagnostic.filename) :]) + ": ", "dim"),
            paint(diagnostic.code, _SEVERITY_STYLE[diagnostic.severity]),
            " ",
            paint(marker, "cyan") if marker else "",
            escape(diagnostic.message),
        )
    )


def _details(
    diagnostic: Diagnostic,
    paint: Callable[[str, str], str],
) -> list[str]:
    """The excerpt, the notes and the fix under a diagnostic's first line, then a blank line."""
    details: list[str] = []
    record = escape(diagnostic.location.record)
    gutter = " " * len(record)
    excerpt = diagnostic.excerpt
    if excerpt is not None:
        details.append(paint(f" {record} | ", "dim") + excerpt)
    notes = [diagnostic.severity.label, diagnostic.name]
    if diagnostic.entry_id is not None:
        notes.append(f"entry {escape(diagnostic.entry_id)}")
    details.append(paint(f" {gutter} = ", "dim") + paint(" · ".join(notes), "dim"))
    if diagnostic.fix is not None:
        fix = diagnostic.fix
        details.append(
            paint(f" {gutter} = ", "dim")
            + paint(f"fix ({fix.applicability.value}): ", "cyan")
            + escape(fix.message)
        )
    details.append("")
    return details


def footer(
    diagnostics: Sequence[Diagnostic],
    unsafe_fixes: bool,
    unreadable: int = 0,
    fixed: int | None = None,
) -> str:
    """ruff-style closing line: "Found N problems (M fixable ...)." or "All checks passed!".

    After a repair (`fixed` given): "Found N problems (F fixed, R remaining)." Files
    that could not be read (or repaired) are never "passed"."""
    if unreadable:
        files = "file" if unreadable == 1 else "files"
        found = footer(diagnostics, unsafe_fixes, fixed=fixed)
        if not diagnostics and not fixed:
            found = "No problems found"
        failed = "read" if fixed is None else "repaired"
        return f"{found.rstrip('.')}; {unreadable} {files} could not be {failed}."
    if fixed:
        total = fixed + len(diagnostics)
        noun = "problem" if total == 1 else "problems"
        return f"Found {total} {noun} ({fixed} fixed, {len(diagnostics)} remaining)."
    if not diagnostics:
        return "All checks passed!"
    total = len(diagnostics)
    counts = count_fixes(diagnostics)
    noun = "problem" if total == 1 else "problems"
    if unsafe_fixes:
        fixable, hidden = counts.safe + counts.unsafe, 0
    else:
        fixable, hidden = counts.safe, counts.unsafe
    if fixable and hidden:
        detail = f" ({fixable} fixable with sessionfix repair; {hidden} more with --unsafe-fixes)"
    elif fixable:
        suffix = " --unsafe-fixes" if unsafe_fixes and counts.unsafe else ""
        detail = f" ({fixable} fixable with sessionfix repair{suffix})"
    elif hidden:
        detail = f" ({hidden} fixable with sessionfix repair --unsafe-fixes)"
    else:
        detail = ""
    return f"Found {total} {noun}{detail}."


def diagnostic_json(diagnostic: Diagnostic) -> dict[str, Any]:
    fix = diagnostic.fix
    rule = get_rule(diagnostic.code)
    return {
        "code": diagnostic.code,
        "name": diagnostic.name,
        "severity": diagnostic.severity.label,
        "message": diagnostic.message,
        "filename": escape_surrogates(diagnostic.filename),
        "format": diagnostic.format,
        "location": {"row": diagnostic.row, "column": diagnostic.column},
        "end_location": {"row": diagnostic.end_row or diagnostic.row, "column": diagnostic.column},
        **(
            {"session_id": diagnostic.session_id, **_keyed(diagnostic)}
            if diagnostic.session_id
            else {}
        ),
        "record": _escaped(diagnostic.location.json()),
        "entry_id": diagnostic.entry_id,
        "fix": None
        if fix is None
        else {
            "applicability": fix.applicability.value,
            "message": fix.message,
            "edits": [_edit_json(edit) for edit in fix.edits],
        },
        "url": rule.url if rule is not None else None,
    }


def _keyed(diagnostic: Diagnostic) -> dict[str, Any]:
    """A store record's key under the name its store gives it (OpenClaw: `seq`), where
    it has one (a text id is its own name)."""
    return {diagnostic.key_noun: diagnostic.record_key} if diagnostic.key_noun else {}


def _escaped(data: dict[str, Any]) -> dict[str, Any]:
    return {k: escape_surrogates(v) if isinstance(v, str) else v for k, v in data.items()}


def _edit_json(edit: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"op": edit.op.value, "row": edit.row}
    if edit.end_row is not None:
        data["end_row"] = edit.end_row
    span = edit.byte_range
    if span is not None:
        # Byte columns, not characters: a range can split a character or hold no text.
        data["byte_column"], data["end_byte_column"] = span[0] + 1, span[1] + 1
    content = edit.content
    if content is not None:
        data["content"] = content
    if isinstance(edit, WrittenLine):
        raw = edit.raw()
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            # JSON text cannot hold the invalid bytes `content` shows as U+FFFD.
            data["content_base64"] = base64.b64encode(raw).decode("ascii")
        data["end"] = edit.end
    return data


def _dumps(value: Any, *, indent: bool = False) -> bytes:
    option = orjson.OPT_INDENT_2 if indent else 0
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        import json

        text = json.dumps(value, ensure_ascii=False, indent=2 if indent else None)
        return text.encode("utf-8", "replace")


def write_json(diagnostics: Sequence[Diagnostic], out: IO[bytes]) -> None:
    """A JSON array, written element by element so edits are produced one at a time."""
    if not diagnostics:
        out.write(b"[]\n")
        return
    out.write(b"[\n")
    for index, diagnostic in enumerate(diagnostics):
        if index:
            out.write(b",\n")
        out.write(b"  " + _dumps(diagnostic_json(diagnostic), indent=True).replace(b"\n", b"\n  "))
    out.write(b"\n]\n")


def write_json_lines(diagnostics: Iterable[Diagnostic], out: IO[bytes]) -> None:
    for diagnostic in diagnostics:
        out.write(_dumps(diagnostic_json(diagnostic)) + b"\n")


_GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


_LINE_BREAKS: Final = re.compile("([\r\n])")


def _github_data(text: str) -> str:
    """Session text as a workflow command's data: control characters, terminal escapes
    and bidi overrides escaped as the human formats escape them (a CI log acts on
    them), line breaks and `%` as GitHub decodes them."""
    text = "".join(
        piece if _LINE_BREAKS.fullmatch(piece) else escape(piece)
        for piece in _LINE_BREAKS.split(text)
    )
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def write_github(diagnostics: Iterable[Diagnostic], out: IO[bytes]) -> None:
    for d in diagnostics:
        title = _github_property(f"sessionfix ({d.code})")
        location = f"{d.place}: {d.code} {d.message}"
        filename = _github_property(d.filename)
        # A store is no text file: its records have no line an annotation could point at.
        region = "" if d.location.in_store else f",line={d.row},col={d.column}"
        line = (
            f"::{_GITHUB_LEVEL[d.severity]} title={title},file={filename}"
            f"{region}::{_github_data(location)}\n"
        )
        out.write(line.encode("utf-8", "replace"))


_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


SRCROOT: Final = "%SRCROOT%"
"""The base id SARIF URIs are relative to: the working directory of the run."""


def sarif_uri(filename: str, root: str) -> dict[str, str]:
    """A SARIF artifactLocation for `filename`: relative to the directory `root` (posix
    form, percent-encoded, with `uriBaseId`) when the file is inside it, else an
    absolute `file://` URI, so that code scanning maps results onto the checkout. A
    name's bytes that are not UTF-8 are percent-encoded as they are."""
    path = os.path.abspath(os.path.join(root, filename))
    relative = os.path.relpath(path, root)
    if relative == os.pardir or relative.startswith(os.pardir + os.sep) or os.path.isabs(relative):
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(os.fsencode(Path(relative).as_posix()), safe="/"), "uriBaseId": SRCROOT}


def _directory_uri(root: str) -> str:
    uri = Path(os.path.abspath(root)).as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    """A reportingDescriptor carrying the rule's documentation, so that a viewer needs no
    website; `helpUri` only when a real one is configured (`SESSIONFIX_DOCS_URL`)."""
    doc = rule.doc
    url = rule.url
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.what_it_does},
        "help": {"text": doc, "markdown": doc},
        **({"helpUri": url} if url else {}),
        "properties": {
            "name": rule.name,
            "kind": "problem",
            "problem.severity": _SARIF_LEVEL[rule.severity],
        },
    }


def _sarif_location(d: Diagnostic, root: str) -> dict[str, Any]:
    """A file's finding by its line and column; a store's by its session and record
    (a database has no lines a viewer could show)."""
    artifact = sarif_uri(d.filename, root)
    if not d.location.in_store:
        region = {
            "startLine": d.row,
            "startColumn": d.column,
            "endLine": d.end_row or d.row,
            "endColumn": d.column,
        }
        return {"physicalLocation": {"artifactLocation": artifact, "region": region}}
    record = d.location.record
    return {
        "physicalLocation": {"artifactLocation": artifact},
        "logicalLocations": [
            {"name": d.session_id, "kind": "session"},
            {"name": record, "fullyQualifiedName": f"{d.session_id}:{record}", "kind": "record"},
        ],
    }


def _store_properties(d: Diagnostic) -> dict[str, Any]:
    return {"session_id": d.session_id, **_keyed(d), "place": escape_surrogates(d.place)}


def write_sarif(diagnostics: Sequence[Diagnostic], out: IO[bytes], root: str | None = None) -> None:
    """A SARIF 2.1.0 log: every rule, and the results located by URIs relative to `root`
    (the working directory unless given), which `originalUriBaseIds` names."""
    root = os.getcwd() if root is None else root
    results = [
        {
            "ruleId": d.code,
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [_sarif_location(d, root)],
            **({"properties": _store_properties(d)} if d.session_id else {}),
        }
        for d in diagnostics
    ]
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "sessionfix",
                        "version": __version__,
                        "rules": [_sarif_rule(rule) for rule in RULES],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(root)}},
                "results": results,
            }
        ],
    }
    out.write(_dumps(document, indent=True) + b"\n")


def statistics(diagnostics: Iterable[Diagnostic]) -> list[dict[str, Any]]:
    """Per-code counts, most frequent first (ruff's `--statistics`)."""
    counts: Counter[str] = Counter()
    fixable: Counter[str] = Counter()
    names: dict[str, str] = {}
    for d in diagnostics:
        counts[d.code] += 1
        names[d.code] = d.name
        if d.fix is not None and d.fix.applicability is Applicability.SAFE:
            fixable[d.code] += 1
    return [
        {
            "code": code,
            "name": names[code],
            "count": count,
            "fixable": fixable[code] == count,
            "fixable_count": fixable[code],
        }
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def write_statistics_text(rows: Sequence[dict[str, Any]], out: IO[bytes]) -> None:
    width = max((len(str(row["count"])) for row in rows), default=1)
    for row in rows:
        marker = "[*]" if row["fixable"] else "[-]" if row["fixable_count"] else "[ ]"
        out.write(f"{row['count']:>{width}}\t{row['code']}\t{marker} {row['name']}\n".encode())


def write_report(
    diagnostics: list[Diagnostic],
    out: IO[bytes],
    output_format: OutputFormat,
    *,
    as_statistics: bool = False,
    color: bool = False,
    unsafe_fixes: bool = False,
    quiet: bool = False,
    unreadable: int = 0,
    fixed: int | None = None,
) -> None:
    """Write a report of `diagnostics` in `output_format` (or their per-rule statistics):
    the one entry point for every report a command prints. Human formats end with the
    footer unless `quiet`."""
    if as_statistics:
        rows = statistics(diagnostics)
        if output_format.is_human:
            write_statistics_text(rows, out)
        else:
            out.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2) + b"\n")
        return
    if output_format is OutputFormat.JSON:
        write_json(diagnostics, out)
    elif output_format is OutputFormat.JSON_LINES:
        write_json_lines(diagnostics, out)
    elif output_format is OutputFormat.GITHUB:
        write_github(diagnostics, out)
    elif output_format is OutputFormat.SARIF:
        write_sarif(diagnostics, out)
    else:
        text = io.TextIOWrapper(out, encoding="utf-8", errors="replace", write_through=False)
        try:
            render_human(
                diagnostics,
                text,
                color=color,
                concise=output_format is OutputFormat.CONCISE,
                unsafe_fixes=unsafe_fixes,
            )
            if not quiet:
                text.write(footer(diagnostics, unsafe_fixes, unreadable, fixed=fixed) + "\n")
            text.flush()
        finally:
            text.detach()


def shows_excerpts(output_format: OutputFormat, *, as_statistics: bool) -> bool:
    """Whether `write_report` prints the diagnostics' excerpts (a check that is not to
    print them need not read them)."""
    return output_format is OutputFormat.FULL and not as_statistics


def rules_text(rules: Sequence[Rule], *, as_json: bool, listing: bool) -> bytes:
    """Rule documentation: Markdown, or JSON (a list when `listing`, else one object)
    with the formats each rule covers."""
    if not as_json:
        return "\n\n".join(r.doc.rstrip() for r in rules).encode() + b"\n"
    data = [
        {
            "code": r.code,
            "name": r.name,
            "severity": r.severity.label,
            "fix": r.fix,
            "formats": sorted(f.value for f in r.formats),
            "summary": r.summary,
            "url": r.url,
            "doc": r.doc,
        }
        for r in rules
    ]
    return orjson.dumps(data if listing else data[0], option=orjson.OPT_INDENT_2) + b"\n"
