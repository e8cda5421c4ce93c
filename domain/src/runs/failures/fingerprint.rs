//! A failure's fingerprint: what failures of one cause share, so that an incident's
//! hundreds of failures are one group. The message is normalised (numbers, ids, hex and
//! quoted values replaced by placeholders, spaces collapsed), and the group is the
//! workflow, the error type, the agent (when known) and that text: its id is a hash of
//! them, so a failure finds its group without a lookup.

use sha2::{Digest, Sha256};
use shared::ids::{FailureGroupId, WorkflowId};

/// The longest normalised message kept, in characters (the rest does not tell groups
/// apart in practice, and a fingerprint stays small).
pub const FINGERPRINT_MAX: usize = 300;
/// The longest agent name a group keeps (its first characters): `details` may hold any
/// text, and a page of groups must fit Lambda's answer.
pub const AGENT_NAME_MAX: usize = 200;
/// The longest quoted value replaced by `<q>` (a longer "quote" is likely prose).
const QUOTE_MAX: usize = 200;

/// `message` with what varies between failures of one cause replaced: quoted values
/// (`'…'`, `"…"`, `` `…` ``) by `<q>`; UUIDs, prefixed ids (`exec_0193…`) and hex of 16
/// or more digits by `<id>`; numbers (also `0x…`, and the digits leading a token such
/// as `503ms` or a date) by `<n>`; runs of whitespace by one space. Words that merely
/// hold digits (`gpt4o`, `v2`, `utf-8`) stay.
#[must_use]
pub fn normalize(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::with_capacity(message.len().min(FINGERPRINT_MAX * 2));
    let mut i = 0;
    while i < chars.len() && out.chars().count() < FINGERPRINT_MAX {
        let c = chars[i];
        if matches!(c, '\'' | '"' | '`')
            && let Some(len) = quoted(&chars[i + 1..], c)
        {
            out.push_str("<q>");
            i += len + 2;
        } else if c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let len = chars[i..].iter().take_while(|&&t| t.is_alphanumeric() || t == '_' || t == '-').count();
            let token: String = chars[i..i + len].iter().collect();
            out.push_str(&token_shape(&token));
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    let trimmed = out.trim_end();
    trimmed.chars().take(FINGERPRINT_MAX).collect()
}

/// The length of a quoted value closed by `quote` on the same line, if any.
fn quoted(rest: &[char], quote: char) -> Option<usize> {
    rest.iter().take(QUOTE_MAX + 1).position(|&c| c == quote || c == '\n').filter(|&end| rest[end] == quote)
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_uuid(token: &str) -> bool {
    let parts: Vec<&str> = token.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12]) && parts.iter().all(|p| is_hex(p))
}

/// One token (letters, digits, `_` and `-`) as it stands in a fingerprint.
fn token_shape(token: &str) -> String {
    let lower = token.to_ascii_lowercase();
    let has_digit = token.bytes().any(|b| b.is_ascii_digit());
    if is_uuid(&lower) {
        return "<id>".to_owned();
    }
    // A prefixed id (`exec_0193…`, `req-8f2c…`): a word, then 8 or more hex digits.
    if let Some((_, tail)) = lower.rsplit_once(['_', '-'])
        && tail.len() >= 8
        && is_hex(tail)
        && tail.bytes().any(|b| b.is_ascii_digit())
    {
        return "<id>".to_owned();
    }
    if lower.len() >= 16 && is_hex(&lower) && has_digit {
        return "<id>".to_owned();
    }
    if lower.len() > 2 && lower.starts_with("0x") && is_hex(&lower[2..]) {
        return "<n>".to_owned();
    }
    if token.starts_with(|c: char| c.is_ascii_digit()) {
        // Digit runs become `<n>`: `503` -> `<n>`, `30s` -> `<n>s`, `2026-12-04` -> `<n>-<n>-<n>`.
        let mut shaped = String::new();
        let mut in_digits = false;
        for c in token.chars() {
            if c.is_ascii_digit() {
                if !in_digits {
                    shaped.push_str("<n>");
                }
                in_digits = true;
            } else {
                shaped.push(c);
                in_digits = false;
            }
        }
        return shaped;
    }
    token.to_owned()
}

/// The agent a failure's `details` name (`agent_name`, when a string), at most
/// [`AGENT_NAME_MAX`] characters.
#[must_use]
pub fn agent_of(details: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    details.get("agent_name").and_then(serde_json::Value::as_str).map(|a| a.chars().take(AGENT_NAME_MAX).collect())
}

/// The group of failures of `workflow` with this error type, agent (if known) and
/// normalised message: `fgrp_` and the first 32 hex digits of a SHA-256 of the four.
/// Workflow ids are unique across tenants, so no two tenants share a group.
#[must_use]
pub fn group_of(workflow: &WorkflowId, error_type: &str, agent: Option<&str>, fingerprint: &str) -> FailureGroupId {
    let mut hash = Sha256::new();
    for part in [workflow.as_str(), error_type, agent.unwrap_or(""), fingerprint] {
        hash.update(part.as_bytes());
        hash.update([0x1f]);
    }
    let hex: String = hash.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    FailureGroupId::parse(&format!("{}_{hex}", FailureGroupId::PREFIX)).unwrap_or_else(FailureGroupId::generate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_varies_between_failures_of_one_cause_is_replaced() {
        for (message, expected) in [
            (
                "the search API timed out after 30s (attempt 3 of 5)",
                "the search API timed out after <n>s (attempt <n> of <n>)",
            ),
            (
                "HTTP 503 from https://api.example.com/v1/search?q=42",
                "HTTP <n> from https://api.example.com/v1/search?q=<n>",
            ),
            ("tool 'web_search' failed: \"connection reset\"", "tool <q> failed: <q>"),
            ("execution exec_0193a6f21c2b7d3e8f000123456789ab not found", "execution <id> not found"),
            ("request 3f2b9c1e-7d4a-4b8e-9f00-1a2b3c4d5e6f rejected", "request <id> rejected"),
            ("digest deadbeefcafe0123456789 mismatch at 0x1f", "digest <id> mismatch at <n>"),
            ("rate limited   until\n2026-12-04 10:00:00", "rate limited until <n>-<n>-<n> <n>:<n>:<n>"),
            ("gpt4o and v2 over utf-8 stay", "gpt4o and v2 over utf-8 stay"),
            ("a 'quote that never closes", "a 'quote that never closes"),
            ("  ", ""),
        ] {
            assert_eq!(normalize(message), expected, "{message}");
        }
    }

    #[test]
    fn a_fingerprint_is_bounded_and_groups_are_stable_and_apart() {
        let long = normalize(&"word ".repeat(500)).chars().count();
        assert!((FINGERPRINT_MAX - 5..=FINGERPRINT_MAX).contains(&long), "{long}");
        let wf = WorkflowId::generate();
        let timeout = normalize("timed out after 30s");
        let a = group_of(&wf, "TOOL_ERROR", Some("researcher"), &timeout);
        assert_eq!(a, group_of(&wf, "TOOL_ERROR", Some("researcher"), &normalize("timed out after 45s")));
        assert!(a.as_str().starts_with("fgrp_"));
        for other in [
            group_of(&wf, "AGENT_ERROR", Some("researcher"), &timeout),
            group_of(&wf, "TOOL_ERROR", None, &timeout),
            group_of(&WorkflowId::generate(), "TOOL_ERROR", Some("researcher"), &timeout),
            group_of(&wf, "TOOL_ERROR", Some("researcher"), &normalize("connection reset")),
        ] {
            assert_ne!(a, other);
        }
    }
}
