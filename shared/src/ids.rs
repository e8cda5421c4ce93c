//! Identifiers: a type prefix plus a UUIDv7 in lowercase hex without dashes
//! (`wf_0193…`), so that ids sort by creation time and their type is readable.
//!
//! Parsing is strict: anything that is not exactly `<prefix>_<32 lowercase hex>` is
//! rejected, so a malformed id never reaches DynamoDB and is answered like an unknown one.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Length of the hex part of every id.
const HEX_LEN: usize = 32;

/// Defines an id newtype with its prefix.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// The type prefix, without the underscore.
            pub const PREFIX: &'static str = $prefix;

            /// A new, time-ordered id.
            #[must_use]
            pub fn generate() -> Self {
                Self(format!("{}_{}", $prefix, uuid::Uuid::now_v7().simple()))
            }

            /// A new id whose embedded time is `at` (the injectable clock's "now"), so
            /// that key ranges on ids are time ranges.
            #[must_use]
            pub fn generate_at(at: DateTime<Utc>) -> Self {
                Self(format!("{}_{}", $prefix, uuid_at(at).simple()))
            }

            /// Parses an id given by a client; `None` when it is not of this type's form.
            #[must_use]
            pub fn parse(raw: &str) -> Option<Self> {
                well_formed(raw, $prefix).then(|| Self(raw.to_owned()))
            }

            /// The id as text.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(deserializer)?;
                Self::parse(&raw).ok_or_else(|| {
                    serde::de::Error::custom(format!("not a {} id: {raw}", $prefix))
                })
            }
        }
    };
}

fn millis(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_millis()).unwrap_or(0)
}

fn uuid_at(at: DateTime<Utc>) -> uuid::Uuid {
    let ms = millis(at);
    let ts = uuid::Timestamp::from_unix(uuid::NoContext, ms / 1000, u32::try_from(ms % 1000).unwrap_or(0) * 1_000_000);
    uuid::Uuid::new_v7(ts)
}

fn well_formed(raw: &str, prefix: &str) -> bool {
    raw.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('_')).is_some_and(|hex| {
        hex.len() == HEX_LEN && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

id_type!(
    /// A tenant (`ten_…`). Storage calls take a [`crate::TenantId`], which only
    /// authentication makes; this type is for the admin records themselves.
    TenantKey,
    "ten"
);
id_type!(
    /// An API key's public id (`key_…`), never the secret itself.
    KeyId,
    "key"
);
id_type!(
    /// A workflow (`wf_…`).
    WorkflowId,
    "wf"
);
id_type!(
    /// An execution (`exec_…`).
    ExecutionId,
    "exec"
);
id_type!(
    /// A checkpoint (`cp_…`).
    CheckpointId,
    "cp"
);
id_type!(
    /// A failure (`fail_…`).
    FailureId,
    "fail"
);
id_type!(
    /// A group of failures of one cause (`fgrp_…`): a hash of the workflow, error type,
    /// agent and normalised message, not a time-ordered id.
    FailureGroupId,
    "fgrp"
);
id_type!(
    /// An export of a tenant's data, in rounds by the jobs function (`export_…`).
    ExportId,
    "export"
);
id_type!(
    /// A bulk job: one action on every execution a filter matches (`bulk_…`).
    BulkJobId,
    "bulk"
);
id_type!(
    /// A recovery command (`cmd_…`).
    CommandId,
    "cmd"
);
id_type!(
    /// A ledger transaction (`txn_…`).
    TransactionId,
    "txn"
);
id_type!(
    /// A webhook endpoint (`we_…`).
    EndpointId,
    "we"
);
id_type!(
    /// An event (`evt_…`): a webhook's `webhook-id`, the same on every attempt.
    EventId,
    "evt"
);
id_type!(
    /// One event's delivery to one endpoint (`wd_…`).
    DeliveryId,
    "wd"
);

/// Hex digits of an execution's id that name the partition of its checkpoints kept
/// with their execution (`ten_…#c<these>`): its last 40 random bits.
const MARK_HEX: usize = 10;

/// The largest sequence a checkpoint id can carry (34 bits; sequences end at
/// 9,999,999,999).
const MAX_MARKED_SEQUENCE: u64 = (1 << 34) - 1;

impl ExecutionId {
    /// The last 40 random bits of this id, in hex: what the ids of its checkpoints kept
    /// with it carry ([`CheckpointId::in_execution`]).
    #[must_use]
    pub fn mark(&self) -> &str {
        &self.0[self.0.len() - MARK_HEX..]
    }
}

impl CheckpointId {
    /// The id of checkpoint `sequence` of execution `execution`, created at `at`: a
    /// UUIDv7 (time-ordered like any id) whose 74 random bits are the sequence (34) and
    /// the execution's [`ExecutionId::mark`] (40), so that the id alone names where the
    /// checkpoint is kept ([`Self::place`]). Unique within its execution, whose
    /// sequences are never given twice.
    #[must_use]
    pub fn in_execution(execution: &ExecutionId, sequence: u64, at: DateTime<Utc>) -> Self {
        let sequence = sequence.min(MAX_MARKED_SEQUENCE);
        let ms = millis(at).min((1 << 48) - 1);
        let high = (sequence >> 22) & 0xfff;
        let variant = 0x8 | ((sequence >> 20) & 0x3);
        let low = sequence & 0xf_ffff;
        Self(format!("cp_{ms:012x}7{high:03x}{variant:x}{low:05x}{}", execution.mark()))
    }

    /// The execution mark and sequence this id carries, if it was made by
    /// [`Self::in_execution`]; for any other id, the bits in their places (which name a
    /// place where no checkpoint is).
    #[must_use]
    pub fn place(&self) -> (&str, u64) {
        let hex = &self.0[self.0.len() - HEX_LEN..];
        let number = |range: std::ops::Range<usize>| u64::from_str_radix(&hex[range], 16).unwrap_or(0);
        let sequence = (number(13..16) << 22) | ((number(16..17) & 0x3) << 20) | number(17..22);
        (&hex[HEX_LEN - MARK_HEX..], sequence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_between_is_a_key_range_or_nothing() {
        let at = |s: &str| Some(crate::time::parse(s).expect("time"));
        let (lo, hi) = created_between("exec", at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z")).expect("range");
        assert!(lo < hi && lo.starts_with("exec_") && hi.ends_with(&"f".repeat(20)));
        let open = created_between("exec", None, None).expect("everything");
        assert_eq!(open, ("exec_000000000000".to_owned(), format!("exec_ffffffffffff{}", "f".repeat(20))));
        assert!(created_between("exec", at("2026-01-02T00:00:00Z"), at("2026-01-01T00:00:00Z")).is_none());
        assert!(created_between("exec", None, at("0719-01-14T18:25:19Z")).is_none(), "before 1970");
        assert!(created_between("exec", None, at("1970-01-01T00:00:00Z")).is_none());
        assert!(created_between("exec", at("0335-05-29T22:39:44Z"), at("0828-06-30T04:10:02Z")).is_none());
        assert_eq!(
            created_between("exec", at("0657-11-19T07:00:29Z"), None),
            Some(open.clone()),
            "all ids are after 0657"
        );
        let sub_ms = created_between("exec", at("2026-01-01T00:00:00.0003Z"), at("2026-01-01T00:00:00.0007Z"));
        assert!(sub_ms.is_none(), "no whole millisecond lies strictly between");
        assert!(
            created_between("exec", DateTime::from_timestamp_millis(MAX_ID_MS * 2), None).is_none(),
            "after the year 10889"
        );
        assert_eq!(created_between("exec", None, DateTime::from_timestamp_millis(MAX_ID_MS * 2)), Some(open));
    }

    #[test]
    fn a_checkpoint_id_in_an_execution_names_its_execution_and_sequence_and_is_a_uuid_v7() {
        let execution = ExecutionId::generate();
        let at = crate::time::parse("2026-12-06T04:00:00.123Z").expect("valid");
        for sequence in [1, 2, 42, (1 << 20) - 1, 1 << 20, (1 << 22) + 5, 9_999_999_999] {
            let id = CheckpointId::in_execution(&execution, sequence, at);
            assert_eq!(CheckpointId::parse(id.as_str()), Some(id.clone()), "{id}");
            assert_eq!(id.place(), (execution.mark(), sequence), "{id}");
            let uuid = uuid::Uuid::parse_str(&id.as_str()[3..]).expect("a UUID");
            assert_eq!(uuid.get_version_num(), 7, "{id}");
            assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{id}");
            let hex = format!("{:012x}", at.timestamp_millis());
            assert!(id.as_str().starts_with(&format!("cp_{hex}")), "time first: {id}");
            assert!(id.as_str().ends_with(execution.mark()), "{id}");
        }
        let later = CheckpointId::in_execution(&execution, 1, at + chrono::Duration::milliseconds(1));
        assert!(later > CheckpointId::in_execution(&execution, 9_999_999_999, at), "ids sort by time");
        assert_eq!(execution.mark().len(), 10);
        assert_ne!(CheckpointId::in_execution(&ExecutionId::generate(), 1, at).place().0, execution.mark());
    }

    #[test]
    fn generated_ids_have_prefix_and_32_hex_chars_and_parse_back() {
        let id = WorkflowId::generate();
        let (prefix, hex) = id.as_str().split_once('_').expect("underscore");
        assert_eq!(prefix, "wf");
        assert_eq!(hex.len(), 32);
        assert_eq!(WorkflowId::parse(id.as_str()), Some(id));
    }

    #[test]
    fn ids_generated_later_sort_after_earlier_ones() {
        let ids: Vec<_> = (0..200).map(|_| ExecutionId::generate()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }

    #[test]
    fn ids_generated_at_a_time_carry_its_milliseconds_in_hex() {
        let at = crate::time::parse("2026-10-22T08:00:00.123Z").expect("valid");
        let id = ExecutionId::generate_at(at);
        let hex = format!("{:012x}", at.timestamp_millis());
        assert!(id.as_str().starts_with(&format!("exec_{hex}")), "{id}");
        assert!(ExecutionId::parse(id.as_str()).is_some());
    }

    #[test]
    fn parse_rejects_other_prefixes_uppercase_short_and_dashed_ids() {
        let good = WorkflowId::generate().to_string();
        assert!(ExecutionId::parse(&good).is_none());
        assert!(WorkflowId::parse(&good.to_uppercase()).is_none());
        assert!(WorkflowId::parse(&good[..good.len() - 1]).is_none());
        assert!(WorkflowId::parse(&format!("{good}0")).is_none());
        assert!(WorkflowId::parse("wf_0193a6f2-1c2b-7d3e-8f00-0123456789ab").is_none());
        assert!(WorkflowId::parse("wf_").is_none());
        assert!(WorkflowId::parse("").is_none());
        assert!(WorkflowId::parse("wf_0193a6f21c2b7d3e8f000123456789a\0").is_none());
    }
}

/// The largest millisecond timestamp an id can carry (48 bits, in the year 10889).
const MAX_ID_MS: i64 = (1 << 48) - 1;

/// The key range (`lo`, `hi`, inclusive) of the ids with `prefix` created strictly after
/// `after` and strictly before `before` (to the millisecond; either bound open), or
/// `None` when no id can be in it: the window ends at or before it starts, or lies
/// entirely before 1970 or after the year 10889. Time filters are key ranges on ids.
#[must_use]
pub fn created_between(
    prefix: &str,
    after: Option<DateTime<Utc>>,
    before: Option<DateTime<Utc>>,
) -> Option<(String, String)> {
    created_millis(after, before).map(|(lo, hi)| id_range(prefix, lo, hi))
}

/// The milliseconds (`lo`, `hi`, inclusive) an id created strictly after `after` and
/// strictly before `before` can carry, or `None` when there are none (see
/// [`created_between`]).
#[must_use]
pub fn created_millis(after: Option<DateTime<Utc>>, before: Option<DateTime<Utc>>) -> Option<(u64, u64)> {
    let lo = after.map_or(0, |t| t.timestamp_millis().saturating_add(1).max(0));
    let hi = before.map_or(MAX_ID_MS, |t| t.timestamp_millis().saturating_sub(1).min(MAX_ID_MS));
    (lo <= hi).then(|| (lo.unsigned_abs(), hi.unsigned_abs()))
}

/// The key range of the ids with `prefix` made in milliseconds `lo` to `hi` (inclusive).
#[must_use]
pub fn id_range(prefix: &str, lo: u64, hi: u64) -> (String, String) {
    (format!("{prefix}_{lo:012x}"), format!("{prefix}_{hi:012x}{}", "f".repeat(20)))
}

/// The millisecond an id was made in (its first 12 hex digits), whatever its prefix;
/// 0 for text that is not an id.
#[must_use]
pub fn millis_of(id: &str) -> u64 {
    id.split_once('_').and_then(|(_, hex)| hex.get(..12)).and_then(|ms| u64::from_str_radix(ms, 16).ok()).unwrap_or(0)
}

/// The `{id}` segment of a request's path, as the client sent it (decoded). A segment
/// that cannot be decoded (not UTF-8) names nothing: 404, like any unknown id, and
/// problem+json like every error.
#[derive(Debug, Clone)]
pub struct PathId(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PathId {
    type Rejection = crate::ApiError;

    async fn from_request_parts(parts: &mut http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<String>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(raw)) => Ok(Self(raw)),
            Err(_) => Err(crate::ApiError::not_found("resource", parts.uri.path())),
        }
    }
}
