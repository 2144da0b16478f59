"""Checking many session files on a cluster: the per-file check as plain data, mapped
over paths with a Dask bag (the optional extra `sessionfix[dask]`).

Each file's result is a dict of strings, numbers and lists (its diagnostics as the
JSON output format prints them), so results pickle cheaply between workers and can be
written as JSON lines or turned into a data frame. Dask is imported only here, when a
bag is built: `import sessionfix` does not need it.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypedDict

import msgspec

from sessionfix.engine import check_paths
from sessionfix.repair.plan import described_fixes
from sessionfix.report.render import diagnostic_json
from sessionfix.settings import Settings

if TYPE_CHECKING:
    from dask.bag import Bag, Item

MISSING_DASK = "sessionfix.distributed needs Dask: pip install 'sessionfix[dask]'"


class FileResult(TypedDict):
    """What checking one session file (or one session of a store) found, as plain data."""

    path: str
    """The file read."""
    filename: str
    """The name the diagnostics give the file (the path, unless told otherwise)."""
    session_id: str
    """In a session store: the session this result is of; else empty."""
    format: str
    size: int
    error: str | None
    """Why the file could not be read; then there are no diagnostics."""
    diagnostics: list[dict[str, Any]]
    """Each diagnostic as the JSON output format prints it."""
    notices: list[str]
    """Rules selected by code that the file's format cannot run."""


class Summary(TypedDict):
    """Counts over a bag of results."""

    results: int
    errors: int
    diagnostics: int
    rules: dict[str, int]
    """Diagnostics per rule code."""


def file_results(
    path: str | Path, settings: Settings | None = None, *, filename: str | None = None
) -> list[FileResult]:
    """Check one file as plain data: one result, or one per session of a store. An
    unreadable file gives a result with `error` set, not an exception. `filename`: the
    name to report (e.g. the object-store URL a local copy was downloaded from)."""
    path = Path(path)
    name = filename if filename is not None else str(path)
    return [
        FileResult(
            path=str(path),
            filename=report.filename,
            session_id=report.session_id,
            format=report.format,
            size=report.size,
            error=report.error,
            diagnostics=[diagnostic_json(d) for d in report.diagnostics],
            notices=[str(notice) for notice in report.inapplicable],
        )
        for report in check_paths(
            [path], settings, display=lambda _: name, describe=described_fixes
        )
    ]


def _per_task(settings: Settings | None) -> Settings:
    """`settings`, reading each file in the task's own process unless they say otherwise:
    a cluster's parallelism is across files, and a worker's threads share its cores."""
    settings = settings or Settings()
    if settings.jobs is None:
        return msgspec.structs.replace(settings, jobs=1)
    return settings


def object_results(url: str, settings: Settings | None = None) -> list[FileResult]:
    """Check one object of a remote store (an fsspec URL: `s3://…`, `gs://…`) as plain
    data, reported by its URL. sessionfix reads files by path with random access, so the
    object is downloaded whole into a temporary folder first, under its own name (formats
    and `.zst` go by it), and removed after; one that cannot be downloaded gives a result
    with `error` set. Unless `settings.jobs` says otherwise, the task's own process reads it."""
    try:
        from fsspec.core import url_to_fs
    except ImportError as exc:
        raise ImportError(MISSING_DASK) from exc
    fs, key = url_to_fs(url)
    with tempfile.TemporaryDirectory(prefix="sessionfix-") as folder:
        local = Path(folder) / (PurePosixPath(key).name or "session.jsonl")
        try:
            fs.get_file(key, str(local))
        except OSError as exc:
            return [
                FileResult(
                    path=url,
                    filename=url,
                    session_id="",
                    format="unknown",
                    size=0,
                    error=f"{url}: cannot download it ({exc})",
                    diagnostics=[],
                    notices=[],
                )
            ]
        results = file_results(local, _per_task(settings), filename=url)
    for result in results:
        result["path"] = url
    return results


def check_bag(
    paths: Iterable[str | Path] | Bag,
    settings: Settings | None = None,
    *,
    npartitions: int | None = None,
) -> Bag:
    """A lazy Dask bag of `FileResult`s, one per file of `paths` (a store: one per
    session), in their order. `paths` is a sequence or a bag of local paths;
    `npartitions` splits a sequence (a bag keeps its own partitions). Unless
    `settings.jobs` says otherwise, each file is read by the task's own process."""
    try:
        from dask.bag import Bag, from_sequence
    except ImportError as exc:
        raise ImportError(MISSING_DASK) from exc
    settings = _per_task(settings)
    if isinstance(paths, Bag):
        source = paths
    else:
        names = [str(path) for path in paths]
        parts = None if npartitions is None else max(1, min(npartitions, len(names)))
        source = from_sequence(names, npartitions=parts)
    results: Bag = source.map(file_results, settings).flatten()
    return results


def _summary_of(result: FileResult) -> Summary:
    codes = Counter(d["code"] for d in result["diagnostics"])
    return Summary(
        results=1,
        errors=int(result["error"] is not None),
        diagnostics=codes.total(),
        rules=dict(codes),
    )


def _combined(summaries: Iterable[Summary]) -> Summary:
    rules: Counter[str] = Counter()
    count = errors = 0
    for summary in summaries:
        count += summary["results"]
        errors += summary["errors"]
        rules.update(summary["rules"])
    return Summary(
        results=count, errors=errors, diagnostics=rules.total(), rules=dict(sorted(rules.items()))
    )


def _partition_summary(results: Iterable[FileResult]) -> Summary:
    return _combined(map(_summary_of, results))


def summarise(results: Bag) -> Item:
    """A lazy `Summary` of a bag of results: how many, how many unreadable, and the
    diagnostics per rule code. `.compute()` it with the bag's scheduler."""
    summary: Item = results.reduction(_partition_summary, _combined)
    return summary
