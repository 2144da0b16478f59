"""Shared test setup: golden-file updates and the location of the shared corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="Rewrite tests/fixtures/*/diagnostics.json from the current output.",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The real sample sessions, read in place from ../shared (CI has it beside the checkout;
    without it the run does not start)."""
    return CORPUS


def pytest_sessionstart(session: pytest.Session) -> None:
    """Without the corpus, no run: modules read sample sessions as they are collected."""
    if not CORPUS.is_dir():
        pytest.exit(f"sample corpus not found at {CORPUS}: clone ../shared beside the checkout", 2)
