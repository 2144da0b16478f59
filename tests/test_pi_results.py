"""pi tool results: whether a result's text is worth replacing (SF301) agrees with a
decode-everything reference, whatever content shape and escapes the writer used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sessionfix.rules.sf301_stale_file_read import MARKER
from sessionfix.scan.scanner import read_session
from tests.sessions import BASE_MS, Session

texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet='ab\n"\\/\u00e9\u2028\U0001f600', max_size=400),
    st.builds(lambda tail: MARKER + tail, st.text(max_size=30)),
    st.builds(lambda n: MARKER + "y" * n, st.integers(0, 2000)),
    st.builds(lambda n: "x" * n, st.integers(0, 2000)),
    # Escapes past the first few characters.
    st.builds(
        lambda n, tail: "x" * n + tail,
        st.integers(12, 60),
        st.text(alphabet='\n"\\\u00e9\U0001f600', min_size=1, max_size=400),
    ),
)
parts = st.one_of(
    st.builds(lambda text: {"type": "text", "text": text}, texts),
    st.just({"type": "text"}),
    st.just({"type": "text", "text": None}),
    st.just({"type": "text", "text": 7}),
    st.just({"type": "image", "data": "aGk=", "mimeType": "image/png"}),
    st.just({"text": "no type"}),
)
contents = st.one_of(texts, st.lists(parts, max_size=3), st.none(), st.just({"text": "x"}))


def _text_of(content: Any) -> str | None:
    """Decode-everything reference: the joined text of text-only content."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or any(part.get("type") != "text" for part in content):
        return None
    return "".join(part["text"] for part in content if isinstance(part.get("text"), str))


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=300)
@example(  # a placeholder whose first character a writer escaped
    content=[{"type": "text", "text": MARKER + "y" * 1000}],
    limit=10,
    near_size=False,
    ascii_only=False,
    escaped=True,
)
@example(  # escapes that make the raw text longer than the limit, the text not
    content=[{"type": "text", "text": "x" * 20 + "\n" * 300}],
    limit=320,
    near_size=False,
    ascii_only=False,
    escaped=False,
)
@given(
    content=contents,
    limit=st.integers(0, 1200),
    near_size=st.booleans(),
    ascii_only=st.booleans(),
    escaped=st.booleans(),
)
def test_text_size_shortcut_agrees_with_the_decoded_text(
    tmp_path_factory: Any,
    content: Any,
    limit: int,
    near_size: bool,
    ascii_only: bool,
    escaped: bool,
) -> None:
    text = _text_of(content)
    if near_size and text is not None:
        limit = max(0, _size(text) + limit % 7 - 3)
    session = Session()
    message = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "read",
        "content": content,
        "isError": False,
        "timestamp": BASE_MS,
    }
    record = {"type": "message", "id": "a0000001", "parentId": None, "message": message}
    line = json.dumps(record, ensure_ascii=ascii_only, separators=(",", ":"))
    if escaped:  # escapes a writer may use where JSON.stringify does not
        line = line.replace("/", "\\/").replace('"[sessionfix:', '"\\u005bsessionfix:')
    session.lines.append(line)
    path = Path(tmp_path_factory.mktemp("s")) / "s.jsonl"
    path.write_text(session.text(), encoding="utf-8", errors="surrogatepass")
    view = read_session(path).view
    assert view.result_text_exceeds is not None
    expected = text is not None and not text.startswith(MARKER) and _size(text) > limit
    assert view.result_text_exceeds(1, limit, MARKER) is expected
    assert view.entry_id(1) == "a0000001"
