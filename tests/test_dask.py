"""The cluster check (`sessionfix.distributed`): a Dask bag of per-file results that
equal, file for file, what `check_paths` finds, on every local scheduler."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dask.bag as db
import fsspec
import pytest

from sessionfix import Settings, check_paths
from sessionfix.distributed import (
    FileResult,
    check_bag,
    file_results,
    object_results,
    summarise,
)
from sessionfix.repair.plan import described_fixes
from sessionfix.report.render import diagnostic_json

from .conftest import CORPUS, ROOT
from .test_fixtures import CASES, _settings

AT_REST = Settings(quiescence=0.0)
SCHEDULERS = ("synchronous", "threads", "processes")


def _samples(tmp_path: Path) -> dict[Settings, list[Path]]:
    """Every sample file, by the settings it is checked under: each fixture's input
    (named and configured as its case.json says), the examples and the corpus."""
    groups: dict[Settings, list[Path]] = {}
    for case in CASES:
        spec_file = case / "case.json"
        spec = json.loads(spec_file.read_text()) if spec_file.exists() else {}
        target = tmp_path / case.name / spec.get("filename", "session.jsonl")
        target.parent.mkdir(parents=True)
        shutil.copyfile(case / "input.jsonl", target)
        groups.setdefault(_settings(spec), []).append(target)
    shared = sorted((ROOT / "examples" / "sessions").glob("*.jsonl"))
    shared += sorted(CORPUS.rglob("*.jsonl"))
    groups.setdefault(AT_REST, []).extend(shared)
    return groups


def _as_checked(result: FileResult) -> tuple[Any, ...]:
    return (
        result["path"],
        result["filename"],
        result["session_id"],
        result["format"],
        result["size"],
        result["error"],
        result["diagnostics"],
        result["notices"],
    )


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[Settings, list[Path]]:
    if not CORPUS.is_dir():
        pytest.fail(f"sample corpus not found at {CORPUS}: clone ../shared beside the checkout")
    return _samples(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def expected(samples: dict[Settings, list[Path]]) -> list[tuple[Any, ...]]:
    """What the library's own check finds in the samples, group after group."""
    return [
        (
            str(report.path),
            report.filename,
            report.session_id,
            report.format,
            report.size,
            report.error,
            [diagnostic_json(d) for d in report.diagnostics],
            [str(notice) for notice in report.inapplicable],
        )
        for settings, paths in samples.items()
        for report in check_paths(paths, settings, describe=described_fixes)
    ]


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    """The processes scheduler's workers, shut down with the module's tests (Dask's own
    pool would outlive them, as processes of this one)."""
    executor = ProcessPoolExecutor(max_workers=2)
    yield executor
    executor.shutdown(wait=True)


@pytest.fixture(scope="module")
def threads() -> Iterator[ThreadPoolExecutor]:
    """The threads scheduler's threads, likewise: threads left running would take the
    signals that later tests hold back in their main thread."""
    executor = ThreadPoolExecutor(max_workers=2)
    yield executor
    executor.shutdown(wait=True)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_bag_finds_what_check_paths_finds(
    samples: dict[Settings, list[Path]],
    expected: list[tuple[Any, ...]],
    scheduler: str,
    pool: ProcessPoolExecutor,
    threads: ThreadPoolExecutor,
) -> None:
    bag = db.concat(
        [check_bag(paths, settings, npartitions=4) for settings, paths in samples.items()]
    )
    executors: dict[str, Any] = {"processes": pool, "threads": threads}
    results = bag.compute(scheduler=scheduler, pool=executors.get(scheduler))
    assert [_as_checked(result) for result in results] == expected
    assert len(results) == sum(len(paths) for paths in samples.values())
    assert len(samples) > 1
    assert sum(len(result["diagnostics"]) for result in results) > len(CASES)


def test_unreadable_paths_give_error_results(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    session = ROOT / "examples" / "sessions" / "torn-and-glued.jsonl"
    missing = tmp_path / "gone.jsonl"
    paths = [missing, session, tmp_path]
    results = check_bag(paths, AT_REST).compute(scheduler="processes", pool=pool)
    assert [result["path"] for result in results] == [str(path) for path in paths]
    gone, read, folder = results
    for unreadable, path in ((gone, missing), (folder, tmp_path)):
        assert unreadable["error"] is not None
        assert unreadable["error"].startswith(f"{path}: ")
        assert unreadable["diagnostics"] == []
    assert read["error"] is None
    assert read["diagnostics"]


def test_results_are_plain_data() -> None:
    paths = sorted((ROOT / "examples" / "sessions").glob("*.jsonl"))
    results = check_bag(paths, AT_REST).compute(scheduler="synchronous")
    assert all(type(result) is dict for result in results)
    assert json.loads(json.dumps(results)) == results
    assert pickle.loads(pickle.dumps(results)) == results


def test_summary_counts_results_errors_and_rules(tmp_path: Path, pool: ProcessPoolExecutor) -> None:
    paths = [*sorted((ROOT / "examples" / "sessions").glob("*.jsonl")), tmp_path / "gone.jsonl"]
    bag = check_bag(paths, AT_REST, npartitions=3)
    results = bag.compute(scheduler="synchronous")
    codes = Counter(d["code"] for result in results for d in result["diagnostics"])
    summary = summarise(bag).compute(scheduler="processes", pool=pool)
    assert summary == {
        "results": len(paths),
        "errors": 1,
        "diagnostics": codes.total(),
        "rules": dict(sorted(codes.items())),
    }
    assert len(summary["rules"]) > 1


def test_takes_a_bag_of_paths_and_partitions_a_sequence() -> None:
    paths = [str(path) for path in sorted((ROOT / "examples" / "sessions").glob("*.jsonl"))]
    assert check_bag(paths, npartitions=3).npartitions == 3
    from_bag = check_bag(db.from_sequence(paths, npartitions=2), AT_REST)
    assert from_bag.compute(scheduler="synchronous") == [
        result for path in paths for result in file_results(path, AT_REST)
    ]


def test_a_copy_reports_under_the_name_it_is_given(tmp_path: Path) -> None:
    """How an object downloaded to a temporary file is reported: by its own URL."""
    copy = tmp_path / "torn-and-glued.jsonl"
    shutil.copyfile(ROOT / "examples" / "sessions" / copy.name, copy)
    url = "s3://bucket/sessions/torn-and-glued.jsonl"
    [result] = file_results(copy, AT_REST, filename=url)
    assert result["path"] == str(copy)
    assert result["filename"] == url
    assert result["diagnostics"]
    assert {d["filename"] for d in result["diagnostics"]} == {url}


def test_objects_are_checked_from_a_local_copy_and_reported_by_url(tmp_path: Path) -> None:
    """The object-store recipe, on fsspec's in-memory filesystem: list the keys under a
    prefix, check each object, get what checking the same bytes locally gives (alone in
    a folder: an object comes without the files beside it, such as the sessions index
    of a Claude Code project folder)."""
    fs = fsspec.filesystem("memory")
    local = sorted((ROOT / "examples" / "sessions").glob("*.jsonl"))
    for number, path in enumerate(local):
        fs.pipe_file(f"/archive/sessions/{number % 3}/{path.name}", path.read_bytes())
    try:
        urls = sorted(f"memory://{key}" for key in fs.glob("/archive/sessions/**/*.jsonl"))
        bag = db.from_sequence([*urls, "memory://archive/sessions/gone.jsonl"], npartitions=4)
        results = bag.map(object_results, AT_REST).flatten().compute(scheduler="synchronous")
    finally:
        fs.rm("/archive", recursive=True)
    *found, gone = results
    by_name = {path.name: path for path in local}
    assert len(found) == len(local)
    for number, (url, result) in enumerate(zip(urls, found, strict=True)):
        name = url.rpartition("/")[2]
        alone = tmp_path / str(number) / name
        alone.parent.mkdir()
        shutil.copyfile(by_name[name], alone)
        [expected] = file_results(alone, AT_REST, filename=url)
        assert result == {**expected, "path": url}
    assert sum(len(result["diagnostics"]) for result in found) > len(local)
    assert gone["path"] == gone["filename"] == "memory://archive/sessions/gone.jsonl"
    assert gone["error"] is not None
    assert gone["error"].startswith("memory://archive/sessions/gone.jsonl: cannot download it")
    assert gone["diagnostics"] == []


def test_without_dask_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.bag", None)
    monkeypatch.setitem(sys.modules, "fsspec.core", None)
    with pytest.raises(ImportError, match=r"pip install 'sessionfix\[dask\]'"):
        check_bag([])
    with pytest.raises(ImportError, match=r"pip install 'sessionfix\[dask\]'"):
        object_results("s3://bucket/sessions/a.jsonl")


def test_importing_sessionfix_does_not_import_dask() -> None:
    probe = "import sys, sessionfix, sessionfix.distributed; print('dask' in sys.modules)"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "False"
