"""The documentation site and the README that points into it: every command, setting and
rule has its page generated from the code, a rule's page is what `sessionfix rule` prints
and where its URL points, and the README stays short with every page one click away."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import pytest
from typer.testing import CliRunner

from sessionfix import RULES
from sessionfix.cli import app
from sessionfix.config import KEYS
from sessionfix.rules.base import docs_url

from .conftest import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
SECTIONS = {"What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"}
"""Sections every rule page has (some have References and Options too)."""


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sessionfix_docs_hooks", DOCS / "hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _written_pages() -> list[str]:
    """The pages written by hand, as paths under docs/."""
    return sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))


def test_readme_is_short_and_links_every_page() -> None:
    """Under 250 lines, and every page of the site written by hand (where the sections the
    README used to hold now live) is one click from it; no link points at nothing."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    linked = {target.split("#")[0] for target in re.findall(r"\]\((docs/[^)\s]+)\)", text)}
    assert {f"docs/{page}" for page in _written_pages()} <= linked
    assert all((ROOT / target).is_file() for target in linked), linked


def test_site_has_a_page_for_every_command_setting_and_rule(docs_site: Path) -> None:
    """The reference pages list what the code has, and every rule's page is built."""
    cli = (docs_site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in app.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.replace("_", "-")
        assert f"sessionfix {name}</code>" in cli, name
    settings = (docs_site / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    for key in KEYS:
        assert f"<code>{key}</code>" in settings, key
    index = (docs_site / "rules" / "index.html").read_text(encoding="utf-8")
    for rule in RULES:
        assert f'href="{rule.name}/"' in index, rule.code
        assert (docs_site / "rules" / rule.name / "index.html").is_file(), rule.code


def test_a_rule_page_is_what_sessionfix_rule_prints(docs_site: Path) -> None:
    """The site's page of a rule is the Markdown `sessionfix rule CODE` prints, and it
    renders as one title and its sections: no line of its prose becomes a heading."""
    pages = _hooks().rule_pages()
    runner = CliRunner()
    for rule in RULES:
        printed = runner.invoke(app, ["rule", rule.code], env={"NO_COLOR": "1"})
        assert printed.exit_code == 0, printed.output
        assert pages[f"rules/{rule.name}.md"] == printed.stdout, rule.code
        built = (docs_site / "rules" / rule.name / "index.html").read_text(encoding="utf-8")
        article = built.split("<article", 1)[1].split("</article>", 1)[0]
        assert article.count("<h1") == 1, rule.code
        headings = set(re.findall(r"<h2 id=\"[^\"]*\">(.*?)<a", article))
        assert SECTIONS <= headings <= {*SECTIONS, "References", "Options"}, rule.code


def test_a_rules_url_is_its_page_on_the_site(
    docs_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With SESSIONFIX_DOCS_URL naming the site's rule pages, JSON `url` and SARIF
    `helpUri` lead to the page the site serves for the rule."""
    monkeypatch.setenv("SESSIONFIX_DOCS_URL", "https://sessionfix.example.org/rules")
    for rule in RULES:
        url = docs_url(rule.code, rule.name)
        assert url is not None
        assert url == rule.url
        path = urlsplit(url).path.strip("/")
        assert (docs_site / path / "index.html").is_file(), url


def test_placeholder_pages_hold_the_nav_slots_of_pages_to_come() -> None:
    """The pages other changes fill in are in the nav already (a strict build needs them)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in ("agents/codewhale.md", "agents/open-webui.md", "slim.md"):
        assert (DOCS / page).is_file(), page
        assert page in nav, page
