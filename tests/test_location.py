"""Locations and the records a message names: each container names them its own way, from
the same finding, and nothing is rewritten as text."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionfix import Settings
from sessionfix.containers import HeldSession
from sessionfix.diagnostics import Applicability, Diagnostic, Fix, Severity
from sessionfix.engine import check_held
from sessionfix.formats import Format
from sessionfix.location import (
    FILE_NAMES,
    Cited,
    RecordNames,
    Said,
    line,
    lines,
    on_its_line,
    on_line,
    said,
)
from sessionfix.report.render import OutputFormat, write_report
from sessionfix.stores import StoredSession, Transcript

from .conftest import ROOT

EXAMPLE = ROOT / "examples" / "sessions" / "openclaw-overflow-recovery.jsonl"

STORE = RecordNames("seq", "at", "s1", lambda number: number - 1)
"""A store whose rows are numbered from 0, one per line of the transcript."""

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
numbers = st.integers(min_value=1, max_value=10_000)
citations = st.one_of(
    numbers.map(line),
    numbers.map(on_line),
    st.lists(numbers, min_size=2, max_size=5).map(lines),
)
messages = st.lists(st.one_of(texts, citations), max_size=8).map(lambda parts: said(*parts))


def _file_words(part: Cited) -> str:
    noun = "line" if len(part.lines) == 1 else "lines"
    words = f"{noun} {', '.join(map(str, part.lines))}"
    return f"on {words}" if part.at else words


@given(messages)
def test_a_file_names_records_by_their_lines_and_a_store_by_their_keys(message: Said) -> None:
    """The text around references is kept as it is, whatever it holds (a quoted "line 3"
    of the session too); only the references are named, each in its container's words."""
    in_file = message.text(FILE_NAMES)
    in_store = message.text(STORE)
    expected_file = expected_store = ""
    for part in message.parts:
        if isinstance(part, str):
            expected_file += part
            expected_store += part
            continue
        expected_file += _file_words(part)
        keys = ", ".join(str(n - 1) for n in part.lines)
        noun = "seq" if len(part.lines) == 1 else "seqs"
        expected_store += f"at {noun} {keys}" if part.at else f"{noun} {keys}"
    assert (in_file, in_store) == (expected_file, expected_store)


def test_a_line_no_row_holds_keeps_its_line() -> None:
    names = RecordNames("seq", "at", "s1", lambda number: None if number > 3 else number - 1)
    assert said(on_line(3), " and ", line(4)).text(names) == "at seq 2 and line 4"


def test_the_record_a_message_is_about_is_named_in_its_place() -> None:
    """A refusal names the record it blames by its own key: its line in a file, the seq
    of its row in a store's transcript."""
    message = said("`targetId` 'x' ", on_its_line(3), " names no entry")
    transcript = Transcript(Path("t.jsonl"), StoredSession("s1"), rows=[4, 5, 9], key_noun="seq")
    assert message.text(FILE_NAMES) == "`targetId` 'x' on its line 3 names no entry"
    assert message.text(transcript.names()) == "`targetId` 'x' at seq 9 names no entry"


def test_a_message_naming_records_cannot_be_formatted_into_text() -> None:
    """A reference put in an f-string would print its repr in every container."""
    with pytest.raises(TypeError):
        f"{said('a ', line(3))}"
    with pytest.raises(TypeError):
        f"{line(3)}"


@given(messages, messages)
def test_a_finding_located_in_a_store_names_its_records_there(
    message: Said, fix_message: Said
) -> None:
    found = Diagnostic(
        "SF201",
        "overflow-clone-message",
        Severity.WARNING,
        message.text(),
        "transcript.jsonl",
        7,
        said=message,
        fix=Fix(Applicability.SAFE, fix_message.text(), (), fix_message),
    )
    stored = found.located("agent.sqlite", STORE)
    assert stored.message == message.text(STORE)
    assert stored.fix is not None
    assert stored.fix.message == fix_message.text(STORE)
    assert (stored.place, stored.row, stored.record_key) == ("agent.sqlite:s1:seq 6", 7, 6)
    assert found.place == "transcript.jsonl:7:1"


def test_a_container_keying_records_by_text_ids_names_them_so_in_every_output_format() -> None:
    """A container whose rows are text ids (opencode's `prt_…`) needs nothing but its
    names: the finding, the record it names and every output format follow them."""
    names = RecordNames("", "at", "ses_1", lambda number: f"prt_{number:04}")
    held = HeldSession(EXAMPLE, Path("opencode.db"), "opencode.db", names, format=Format.AUTO)
    found = check_held(held, Settings())[1]
    clone = found[0]
    assert (clone.code, clone.place) == ("SF201", "opencode.db:ses_1:prt_0007")
    assert "entry a0000005 at prt_0006 " in clone.message
    outputs = {}
    for output_format in OutputFormat:
        out = io.BytesIO()
        write_report(found, out, output_format)
        outputs[output_format] = out.getvalue().decode()
    assert "opencode.db:ses_1:prt_0007: SF201" in outputs[OutputFormat.FULL]
    assert " prt_0007 | " in outputs[OutputFormat.FULL]
    assert "opencode.db:ses_1:prt_0007: SF201" in outputs[OutputFormat.CONCISE]
    first = orjson.loads(outputs[OutputFormat.JSON])[0]
    assert first["record"] == {
        "session": "ses_1",
        "record_key": "prt_0007",
        "place": "opencode.db:ses_1:prt_0007",
    }
    assert "" not in first
    assert "opencode.db:ses_1:prt_0007: SF201" in outputs[OutputFormat.GITHUB]
    sarif = orjson.loads(outputs[OutputFormat.SARIF])["runs"][0]["results"][0]
    assert sarif["locations"][0]["logicalLocations"][1]["name"] == "prt_0007"
