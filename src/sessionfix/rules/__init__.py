"""The rule registry, in catalogue order (rules.md §0).

Each rule lives in its own module as `RULE`; its documentation is
`sessionfix/docs/rules/<name>.md`.
"""

from __future__ import annotations

from sessionfix.rules import (
    sf001_glued_records,
    sf002_torn_final_line,
    sf003_undefined_line,
    sf004_nul_bytes,
    sf005_byte_order_mark,
    sf006_crlf_line_ending,
    sf007_blank_line,
    sf008_unparsable_line,
    sf009_no_final_newline,
    sf101_invalid_header,
    sf102_duplicate_header,
    sf103_dangling_parent,
    sf104_duplicate_entry_id,
    sf105_parent_cycle,
    sf106_missing_entry_id,
    sf107_unexpected_root,
    sf108_dangling_reference,
    sf109_missing_ordinal,
    sf110_foreign_session_record,
    sf111_stale_leaf_metadata,
    sf112_empty_message,
    sf113_unread_session,
    sf114_message_order,
    sf115_stale_child_list,
    sf116_stale_leaf_pointer,
    sf117_store_divergence,
    sf118_missing_role,
    sf201_overflow_clone_message,
    sf202_cloned_compaction,
    sf203_replayed_uuid,
    sf205_abandoned_branch_bloat,
    sf206_repeated_metadata,
    sf301_stale_file_read,
    sf401_orphan_tool_result,
    sf402_missing_tool_result,
    sf403_duplicate_tool_result,
    sf404_displaced_tool_result,
    sf405_duplicate_tool_call_id,
    sf501_broken_first_kept_reference,
    sf502_broken_preserved_segment,
    sf503_compaction_loop,
    sf504_dead_replacement_history,
    sf505_empty_compaction_summary,
    sf506_stale_compression_boundary,
    sf601_leaked_partial_json,
    sf602_invalid_tool_name,
    sf603_oversized_record,
    sf604_oversized_inline_media,
    sf605_empty_text_block,
    sf606_invalid_thinking_signature,
    sf701_session_index_drift,
    sf702_undiscoverable_session,
    sf705_event_log_bloat,
)
from sessionfix.rules.base import Rule

RULES: tuple[Rule, ...] = (
    sf001_glued_records.RULE,
    sf002_torn_final_line.RULE,
    sf003_undefined_line.RULE,
    sf004_nul_bytes.RULE,
    sf005_byte_order_mark.RULE,
    sf006_crlf_line_ending.RULE,
    sf007_blank_line.RULE,
    sf008_unparsable_line.RULE,
    sf009_no_final_newline.RULE,
    sf101_invalid_header.RULE,
    sf102_duplicate_header.RULE,
    sf103_dangling_parent.RULE,
    sf104_duplicate_entry_id.RULE,
    sf105_parent_cycle.RULE,
    sf106_missing_entry_id.RULE,
    sf107_unexpected_root.RULE,
    sf108_dangling_reference.RULE,
    sf109_missing_ordinal.RULE,
    sf110_foreign_session_record.RULE,
    sf111_stale_leaf_metadata.RULE,
    sf112_empty_message.RULE,
    sf113_unread_session.RULE,
    sf114_message_order.RULE,
    sf115_stale_child_list.RULE,
    sf116_stale_leaf_pointer.RULE,
    sf117_store_divergence.RULE,
    sf118_missing_role.RULE,
    sf201_overflow_clone_message.RULE,
    sf202_cloned_compaction.RULE,
    sf203_replayed_uuid.RULE,
    sf205_abandoned_branch_bloat.RULE,
    sf206_repeated_metadata.RULE,
    sf301_stale_file_read.RULE,
    sf401_orphan_tool_result.RULE,
    sf402_missing_tool_result.RULE,
    sf403_duplicate_tool_result.RULE,
    sf404_displaced_tool_result.RULE,
    sf405_duplicate_tool_call_id.RULE,
    sf501_broken_first_kept_reference.RULE,
    sf502_broken_preserved_segment.RULE,
    sf503_compaction_loop.RULE,
    sf504_dead_replacement_history.RULE,
    sf505_empty_compaction_summary.RULE,
    sf506_stale_compression_boundary.RULE,
    sf601_leaked_partial_json.RULE,
    sf602_invalid_tool_name.RULE,
    sf603_oversized_record.RULE,
    sf604_oversized_inline_media.RULE,
    sf605_empty_text_block.RULE,
    sf606_invalid_thinking_signature.RULE,
    sf701_session_index_drift.RULE,
    sf702_undiscoverable_session.RULE,
    sf705_event_log_bloat.RULE,
)

_BY_CODE = {rule.code: rule for rule in RULES}
_BY_NAME = {rule.name: rule for rule in RULES}


def rule_of(code: str) -> Rule | None:
    """The rule a diagnostic's code names (exactly as a diagnostic spells it)."""
    return _BY_CODE.get(code)


def get_rule(code_or_name: str) -> Rule | None:
    """Look a rule up by code (`SF201`, any case) or name (`overflow-clone-message`)."""
    return _BY_CODE.get(code_or_name.upper()) or _BY_NAME.get(code_or_name.lower())


__all__ = ["RULES", "Rule", "get_rule", "rule_of"]
