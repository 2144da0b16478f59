"""What a session format lets rules see: rules require capabilities, formats provide them.

A rule runs on a file only when the file's format provides every capability it
requires; which formats a rule covers follows from the same sets (`coverage`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Capability(enum.Enum):
    """One kind of fact a format's adapter puts into the view."""

    LINES = "lines"
    """Physical lines and the records on them."""
    HEADER = "a session header"
    HEADER_REBUILD = "a session header sessionfix can rebuild"
    ENTRIES = "typed entries"
    """Records with a kind, a role and an id (messages, compactions, labels …)."""
    TREE = "an id-linked tree"
    """Entries linked to their parents by id (not by position)."""
    TOOL_CALLS = "tool calls"
    """Tool calls and their results, paired by call id."""
    BOUNDARIES = "compaction boundaries"
    """Compactions and resets, with the entry they keep from."""
    FILE_ACTIONS = "file actions"
    """Which tool calls read and which rewrite a file."""
    UNIQUE_IDS = "ids each record holds alone"
    """A repeated id is a second record, not a copy of the first (pi)."""
    ENTRY_LINKS = "an id and a parent link on every entry"
    """Every entry after the header takes part in the tree, from one root (pi v2/v3)."""
    RETRY_COPIES = "messages a retry re-appends"
    """Overflow recovery re-appends user messages and compactions with new ids."""
    BRANCHES = "abandoned branches kept as history"
    """Entries off the active path are history the user can return to (pi's /tree)."""
    STREAMING_STATE = "streaming state on tool calls"
    TURNS = "API messages spanning records"
    """One API message is several records sharing a key (Claude `message.id`)."""
    REPLAYED_IDS = "records replayed with their ids"
    """A repeated id is a copy of the same record written again (Claude)."""
    STATE_METADATA = "metadata readers take the last copy of"
    SESSION_STAMPS = "records stamped with their session"
    PRESERVED_SEGMENTS = "compactions that keep records verbatim"
    TOOL_NAMES = "tool names the provider checks"
    RESULT_REPAIRS = "tool-result repairs the agent's own loader also makes"
    """Dropping orphan or repeated results and adding a placeholder for a missing one
    change nothing the agent would not change in memory (pi, Claude)."""
    PRUNE_MARKS = "a pruned mark its loader sends a placeholder for"
    """A tool result can be marked pruned, kept for the agent's UI (opencode)."""
    RESULTS_IN_CALLS = "tool results kept in their call's own record"
    """A call without a result is the call's own state to settle (opencode)."""
    SUMMARY_REQUESTS = "summaries that name the compaction request they answer"
    """A compaction is a request and a summary answering it by id (opencode)."""
    TIME_ORDER = "messages ordered by the time stamped on them"
    """The agent sorts messages by a time it stamps (opencode), not by where they lie."""
    MESSAGE_PARTS = "messages made of records of their own"
    """A message's content is the records that follow it (opencode parts)."""
    UNREAD_SESSIONS = "sessions kept where their agent no longer reads them"
    """A store lists sessions its agent left behind (opencode 2's rows, 1.1's files)."""
    SESSION_INDEX = "an index of sessions its agent lists them by"
    """A record per session: the index's entry beside what the session's files hold
    (Codex's thread index)."""
    EVENT_LOG = "a log of every write, which the agent never loads"
    """opencode's `event` rows: the session's every object again, for workspace sync."""
    DISTINCT_CALL_IDS = "call ids the provider requires distinct"
    """Claude: within one API message; Codex: within the session."""
    SESSION_LISTING = "a list of sessions to resume its agent builds from the files"
    """The agent finds a session to offer for resuming by reading parts of its file and
    the files beside it (Claude Code's picker: the file's ends, an index of the folder)."""
    ORDINALS = "records numbered in sequence"
    THINKING_SIGNATURES = "thinking blocks signed by their provider"
    """Assistant records keep their thinking with the signature the provider checks when
    it is sent back (pi, OpenClaw, Claude Code)."""
    SUMMARIES = "compactions that hold their summary"
    """The compaction record holds the summary text that replaces the history (pi)."""
    LAST_ENTRY_LEAF = "a leaf that is the last entry written"
    """The agent resumes from whatever entry was appended last, of any kind (pi)."""
    CARRIED_HISTORIES = "compactions that carry the whole history they replace"
    INLINE_MEDIA = "images and documents held inline"
    """Base64 media in messages, measured against what the provider accepts."""
    BLANK_TEXT = "text blocks the provider refuses blank"
    """Empty or whitespace-only text blocks the agent sends as they are."""
    FIRST_LINE_BOM_TRIMMED = "a byte-order mark its loader trims off the first line"
    """The loader reads the first line without one (pi); a line reader still fails on it."""
    PAIRS_CHECKED_ON_SEND = "tool calls and results the agent drops when it sends them unpaired"
    """open-webui leaves a call without its result, and a result without its call, out of
    every request (`sanitize_tool_pairs`): reported as what the model does not get."""
    KEPT_LINKS = "links stored beside the parent links that the agent recomputes"
    """Each record's list of its children and a pointer to the leaf, which the agent
    rebuilds from the parent links when it reads the session (open-webui)."""
    STORED_TWICE = "records stored twice, one copy of which the agent reads"
    """open-webui keeps each message in the chat's document and in a row of its own."""
    COVERED_COUNTS = "summaries that cover the first messages by number"
    """A summary kept beside the session names how many messages it covers, not which
    (open-webui's async-context-compression filter)."""
    CRASHED_CALLS = "calls without a result its resume takes for crashed"
    """The agent's resume gives every call left without a result, at the end of the
    session too, a crashed result right after the call (CodeWhale): a fix does the same
    on disk, in the same place."""
    WHOLE_DOCUMENT = "a session its agent parses whole"
    """A damaged line is the whole session's bytes, which the agent then loads none of
    (CodeWhale's JSON document): dropping it would drop the session."""
    APPEND_ONLY = "an append-only journal its agent rebranches on any edit"
    """Changing an old record makes the agent append everything after it again as a new
    branch (CodeWhale): a fix that only trims weight off a record is not worth it."""
    VALUES_AS_ENTRIES = "any JSON value on a line kept as an entry"
    """What `JSON.parse` accepts is an entry to the loader, an object or not (pi)."""
    SHORTENED_RESULTS = "tool results whose text sessionfix can shorten"
    """A tool result's text can be cut to a head and a tail around a placeholder, the
    message it is part of otherwise as it was (`ResultText`; what `slim` does)."""


def listed(capabilities: Iterable[Capability]) -> str:
    """`tool calls and file actions`."""
    names = [capability.value for capability in capabilities]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
