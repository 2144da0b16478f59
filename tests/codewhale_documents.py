"""Hand-made CodeWhale 0.9.10 session documents, following spec formats/codewhale.md §2:
the cases the tests and the golden fixtures (`tests/fixtures/*-codewhale-*`) are made of."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

CREATED: Final = "2026-08-20T10:00:00Z"
UPDATED: Final = "2026-08-20T11:30:00Z"


def text(role: str, body: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": body}]}


def call(call_id: str, name: str = "read_file", path: str = "src/a.rs") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"running {name}"},
            {"type": "tool_use", "id": call_id, "name": name, "input": {"path": path}},
        ],
    }


def result(*call_ids: str, body: str = "ok") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": c, "content": body} for c in call_ids],
    }


def entry(entry_id: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {"id": entry_id}
    if parent is not None:
        found["parent_id"] = parent
    found.update(kind="message", message=message, created_at=CREATED, spawn_depth=0)
    return found


def chain(messages: list[dict[str, Any]], prefix: str = "e") -> list[dict[str, Any]]:
    """One unbranched chain of entries `e1`, `e2`, … holding `messages`."""
    return [
        entry(f"{prefix}{n}", f"{prefix}{n - 1}" if n > 1 else None, message)
        for n, message in enumerate(messages, start=1)
    ]


def document(
    entries: list[dict[str, Any]] | None,
    leaf: str | None,
    messages: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    """A document as CodeWhale saves one (serde order); `entries` None: no journal."""
    value: dict[str, Any] = {
        "schema_version": 1,
        "metadata": {
            "id": "s",
            "title": "fix the parser",
            "created_at": CREATED,
            "updated_at": UPDATED,
            "message_count": len(messages),
            "total_tokens": 1200,
            "model": "deepseek-v4",
            "model_provider": "deepseek",
            "workspace": "/home/u/proj",
            "mode": None,
            "cost": {"input_tokens": 1000, "output_tokens": 200},
            "cumulative_turn_secs": 12,
            "spawn_depth": 0,
        },
        "messages": messages,
    }
    if entries is not None:
        journal: dict[str, Any] = {"entries": entries}
        if leaf is not None:
            journal["leaf_id"] = leaf
        journal.update(schema_version=1, spawn_depth=0)
        value["journal"] = journal
        if leaf is not None:
            value["leaf_id"] = leaf
    value["system_prompt"] = "You are CodeWhale."
    value.update(extra)
    return value


def saved(value: dict[str, Any]) -> bytes:
    """As CodeWhale writes it: `to_string_pretty`, no final newline."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2)


HI: Final = text("user", "fix the parser")
DONE: Final = text("assistant", "done")


def clean() -> bytes:
    messages = [HI, call("c1"), result("c1"), DONE]
    return saved(document(chain(messages), "e4", messages))


def crashed_call() -> bytes:
    messages = [HI, call("c1"), DONE]
    return saved(document(chain(messages), "e3", messages))


def crashed_at_the_end() -> bytes:
    """The process died while the tool ran: the call is the last message."""
    messages = [HI, call("c1")]
    return saved(document(chain(messages), "e2", messages))


def one_of_two_answered() -> bytes:
    messages = [HI, call("c1"), result("c1"), DONE]
    messages[1] = {
        "role": "assistant",
        "content": [
            *messages[1]["content"],
            {"type": "tool_use", "id": "c2", "name": "bash", "input": {"cmd": "make"}},
        ],
    }
    return saved(document(chain(messages), "e4", messages))


def duplicate_result() -> bytes:
    messages = [HI, call("c1"), result("c1"), result("c1", body="again"), DONE]
    return saved(document(chain(messages), "e5", messages))


def repeat_in_one_message() -> bytes:
    repeated = result("c1")
    repeated["content"] += result("c1", body="again")["content"]
    messages = [HI, call("c1"), repeated, DONE]
    return saved(document(chain(messages), "e4", messages))


def orphan_result() -> bytes:
    messages = [HI, text("assistant", "thinking"), result("c9"), DONE]
    return saved(document(chain(messages), "e4", messages))


def late_result() -> bytes:
    messages = [HI, call("c1"), text("assistant", "moving on"), result("c1"), DONE]
    return saved(document(chain(messages), "e5", messages))


def missing_parent() -> bytes:
    messages = [HI, DONE, text("user", "next"), text("assistant", "sure")]
    entries = chain(messages)
    entries[2]["parent_id"] = "gone"
    return saved(document(entries, "e4", messages))


def duplicate_entry() -> bytes:
    messages = [HI, DONE]
    entries = chain(messages)
    entries.append(dict(entries[1]))
    return saved(document(entries, "e2", messages))


def different_duplicate() -> bytes:
    messages = [HI, DONE]
    entries = chain(messages)
    other = dict(entries[1])
    other["message"] = text("assistant", "other")
    entries.append(other)
    return saved(document(entries, "e2", messages))


def parent_cycle() -> bytes:
    messages = [HI, DONE]
    entries = chain(messages)
    entries[0]["parent_id"] = "e2"
    return saved(document(entries, "e2", messages))


def abandoned_branch() -> bytes:
    old = [HI, call("c1"), result("c1"), DONE]
    entries = chain(old)
    entries.append(entry("b1", "e1", text("assistant", "redo")))
    return saved(document(entries, "b1", [HI, text("assistant", "redo")]))


def read_then_written() -> bytes:
    """A file read, then wholly rewritten (the read is stale), then the session goes on."""
    messages = [
        HI,
        call("r1", "read_file", "src/a.rs"),
        result("r1", body="fn a() {}\n" * 40),
        call("w1", "write_file", "src/a.rs"),
        result("w1", body="wrote src/a.rs"),
        text("assistant", "rewrote it"),
        *(m for n in range(3) for m in (text("user", f"turn {n}"), text("assistant", "ok"))),
    ]
    return saved(document(chain(messages), f"e{len(messages)}", messages))


def write_confirmed_twice() -> bytes:
    """The same long confirmation of two writes: never a stale read (nor deduplicated)."""
    body = "wrote src/a.rs\n" * 80
    messages = [
        HI,
        call("w1", "write_file", "src/a.rs"),
        result("w1", body=body),
        call("w2", "write_file", "src/a.rs"),
        result("w2", body=body),
        *(m for n in range(3) for m in (text("user", f"turn {n}"), text("assistant", "ok"))),
    ]
    return saved(document(chain(messages), f"e{len(messages)}", messages))


def dangling_leaf() -> bytes:
    messages = [HI, DONE]
    return saved(document(chain(messages), "lost", messages))


def schema_two() -> bytes:
    messages = [HI, DONE]
    value = document(chain(messages), "e2", messages)
    value["schema_version"] = 2
    return saved(value)


def unknown_kind() -> bytes:
    messages = [HI, DONE]
    entries = chain(messages)
    entries[1]["kind"] = "checkpoint"
    return saved(document(entries, "e2", messages))


def with_bom() -> bytes:
    return b"\xef\xbb\xbf" + clean()


def nul_filled() -> bytes:
    return b"\x00" * len(clean())


def nul_run_before() -> bytes:
    return b"\x00" * 64 + clean()


def empty() -> bytes:
    return b""


def torn() -> bytes:
    data = clean()
    return data[: len(data) // 2]


CASES: Final[dict[str, Callable[[], bytes]]] = {
    "SF402-codewhale-crashed-tool-call": crashed_call,
    "SF402-trap-codewhale-answered-call": clean,
    "SF402-codewhale-crash-mid-call": crashed_at_the_end,
    "SF402-codewhale-one-of-two-calls-answered": one_of_two_answered,
    "SF403-codewhale-duplicate-result": duplicate_result,
    "SF403-codewhale-repeat-in-one-message": repeat_in_one_message,
    "SF403-trap-codewhale-one-result": clean,
    "SF401-codewhale-orphan-result": orphan_result,
    "SF401-trap-codewhale-answered-result": clean,
    "SF401-codewhale-result-after-next-turn": late_result,
    "SF404-trap-codewhale-result-after-next-turn": late_result,
    "SF103-codewhale-missing-parent": missing_parent,
    "SF103-trap-codewhale-root-entry": clean,
    "SF104-codewhale-repeated-entry": duplicate_entry,
    "SF104-codewhale-different-entry-same-id": different_duplicate,
    "SF104-trap-codewhale-distinct-ids": clean,
    "SF105-codewhale-parent-cycle": parent_cycle,
    "SF105-trap-codewhale-chain": clean,
    "SF205-codewhale-abandoned-branch": abandoned_branch,
    "SF108-codewhale-dangling-leaf": dangling_leaf,
    "SF301-codewhale-read-before-write": read_then_written,
    "SF301-trap-codewhale-write-confirmations": write_confirmed_twice,
    "SF108-trap-codewhale-leaf-names-entry": clean,
    "SF205-trap-codewhale-one-branch": clean,
    "SF101-codewhale-schema-v2": schema_two,
    "SF101-codewhale-unknown-entry-kind": unknown_kind,
    "SF101-codewhale-empty-document": empty,
    "SF101-trap-codewhale-schema-v1": clean,
    "SF005-codewhale-bom": with_bom,
    "SF005-trap-codewhale-no-bom": clean,
    "SF008-codewhale-torn-document": torn,
    "SF004-codewhale-nul-filled-copy": nul_filled,
    "SF004-codewhale-nul-run-before-document": nul_run_before,
    "SF004-trap-codewhale-no-nul": clean,
    "SF008-trap-codewhale-whole-document": clean,
}
"""Fixture name → the document it holds."""

DESCRIPTIONS: Final[dict[str, str]] = {
    "SF403-codewhale-repeat-in-one-message": (
        "A CodeWhale result message answering one call twice: CodeWhale quarantines the "
        "repeat and keeps the first result (the message stays)."
    ),
    "SF101-codewhale-empty-document": (
        "An empty CodeWhale document: CodeWhale fails to load it (nothing to read as a "
        "damaged line, nothing to fix)."
    ),
    "SF402-codewhale-crashed-tool-call": (
        "A CodeWhale document whose read_file call got no result before the next "
        "assistant turn: CodeWhale's resume gives it a crashed result right after the "
        "call."
    ),
    "SF402-trap-codewhale-answered-call": (
        "A clean CodeWhale document: the call is answered in the next message of its group."
    ),
    "SF402-codewhale-crash-mid-call": (
        "A CodeWhale document that ends with a call the process died running: CodeWhale's"
        " resume takes it for crashed."
    ),
    "SF402-codewhale-one-of-two-calls-answered": (
        "A CodeWhale document whose assistant made two calls, one answered: the other's "
        "crashed result goes right after the call message, before the answer."
    ),
    "SF403-codewhale-duplicate-result": (
        "A CodeWhale document with a second result for one call in the same group: "
        "CodeWhale quarantines the repeat."
    ),
    "SF403-trap-codewhale-one-result": ("A clean CodeWhale document: one result per call."),
    "SF401-codewhale-orphan-result": (
        "A CodeWhale document with a result naming no call of its group: CodeWhale "
        "quarantines the orphan."
    ),
    "SF401-trap-codewhale-answered-result": (
        "A clean CodeWhale document: every result answers a call of its group."
    ),
    "SF401-codewhale-result-after-next-turn": (
        "A CodeWhale document whose result comes after the next assistant turn: "
        "CodeWhale's repair counts it an orphan, and its call crashed."
    ),
    "SF404-trap-codewhale-result-after-next-turn": (
        "The same document: CodeWhale never counts a result after its group displaced "
        "(SF401 and SF402 instead)."
    ),
    "SF103-codewhale-missing-parent": (
        "A CodeWhale document whose entry names a parent that is no entry: the walk from "
        "the leaf stops there, and the first turns are lost."
    ),
    "SF103-trap-codewhale-root-entry": (
        "A clean CodeWhale document: its first entry is a root without parent_id."
    ),
    "SF104-codewhale-repeated-entry": (
        "A CodeWhale document whose journal holds one entry twice, byte for byte."
    ),
    "SF104-codewhale-different-entry-same-id": (
        "A CodeWhale document with two different entries under one id: CodeWhale follows the later."
    ),
    "SF104-trap-codewhale-distinct-ids": ("A clean CodeWhale document: every entry id is its own."),
    "SF105-codewhale-parent-cycle": (
        "A CodeWhale document whose first entry names the second as its parent: "
        "CodeWhale's walk stops at the repeat."
    ),
    "SF105-trap-codewhale-chain": ("A clean CodeWhale document: one chain from a root."),
    "SF205-codewhale-abandoned-branch": (
        "A CodeWhale document rebranched after its first message: the old branch stays in"
        " the journal."
    ),
    "SF205-trap-codewhale-one-branch": ("A clean CodeWhale document: one branch."),
    "SF108-codewhale-dangling-leaf": (
        "A CodeWhale document whose leaf_id names no entry: CodeWhale loads its messages "
        "array instead."
    ),
    "SF108-trap-codewhale-leaf-names-entry": (
        "A clean CodeWhale document: leaf_id names its last entry."
    ),
    "SF301-codewhale-read-before-write": (
        "A CodeWhale document whose file read is followed by a whole write of the file: "
        "reported, never edited (the journal is append-only)."
    ),
    "SF301-trap-codewhale-write-confirmations": (
        "A CodeWhale document with two identical long write confirmations: never stale reads."
    ),
    "SF101-codewhale-schema-v2": (
        "A CodeWhale document of schema_version 2: CodeWhale 0.9.10 refuses to load it."
    ),
    "SF101-codewhale-unknown-entry-kind": (
        "A CodeWhale document with a journal entry of an unknown kind: the whole load fails."
    ),
    "SF101-trap-codewhale-schema-v1": ("A clean CodeWhale document of schema_version 1."),
    "SF005-codewhale-bom": (
        "A CodeWhale document that starts with a UTF-8 byte-order mark: serde refuses it whole."
    ),
    "SF005-trap-codewhale-no-bom": ("A clean CodeWhale document without a byte-order mark."),
    "SF008-codewhale-torn-document": (
        "A CodeWhale document cut off halfway: CodeWhale loads none of it."
    ),
    "SF008-trap-codewhale-whole-document": ("A clean CodeWhale document, whole."),
    "SF004-codewhale-nul-filled-copy": (
        "A CodeWhale document that is NUL bytes only (a zero-filled copy): nothing to "
        "recover from it."
    ),
    "SF004-codewhale-nul-run-before-document": (
        "A CodeWhale document after a run of NUL bytes: stripped, it loads."
    ),
    "SF004-trap-codewhale-no-nul": ("A clean CodeWhale document without NUL bytes."),
}
"""Fixture name → its `case.json` description."""
