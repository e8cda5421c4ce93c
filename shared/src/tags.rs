//! Tags: the string pairs an execution is started with, to find it and its like again
//! (`GET /executions?tag=team:search`). The rules are here once, for the body that sets
//! them and the query that filters by them.

use std::collections::BTreeMap;

use serde_json::Value;

/// The most tags one execution has (each costs its writes a pointer and two counts).
pub const TAGS_MAX: usize = 16;
/// The longest key, in characters (ASCII).
pub const TAG_KEY_MAX: usize = 64;
/// The longest value, in characters.
pub const TAG_VALUE_MAX: usize = 128;

/// Whether `key` is a tag key: 1 to [`TAG_KEY_MAX`] ASCII letters, digits and `_ - . /`
/// (no `:`, which separates key and value in a filter).
///
/// # Errors
/// What is wrong with it.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > TAG_KEY_MAX {
        return Err(format!("tag key {key:?} must be 1 to {TAG_KEY_MAX} characters"));
    }
    if !key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/')) {
        return Err(format!("tag key {key:?} may hold only ASCII letters, digits, '_', '-', '.' and '/'"));
    }
    Ok(())
}

/// Whether `value` is a tag value: 1 to [`TAG_VALUE_MAX`] characters, none a control
/// character.
///
/// # Errors
/// What is wrong with it.
pub fn check_value(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || value.chars().count() > TAG_VALUE_MAX {
        return Err(format!("value of tag {key:?} must be 1 to {TAG_VALUE_MAX} characters"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("value of tag {key:?} must not contain control characters"));
    }
    Ok(())
}

/// Reads a body's `tags`: an object of at most [`TAGS_MAX`] string values, each pair
/// passing [`check_key`] and [`check_value`].
///
/// # Errors
/// The first problem found.
pub fn read(value: &Value) -> Result<BTreeMap<String, String>, String> {
    let map = value.as_object().ok_or("must be an object of string values")?;
    if map.len() > TAGS_MAX {
        return Err(format!("must have at most {TAGS_MAX} tags; it has {}", map.len()));
    }
    map.iter()
        .map(|(k, v)| {
            check_key(k)?;
            let v = v.as_str().ok_or_else(|| format!("value of tag {k:?} must be a string"))?;
            check_value(k, v)?;
            Ok((k.clone(), v.to_owned()))
        })
        .collect()
}

/// Reads a filter's `key:value` (split at the first `:`; the value may hold more).
///
/// # Errors
/// What is wrong with it.
pub fn parse_filter(raw: &str) -> Result<(String, String), String> {
    let (key, value) = raw.split_once(':').ok_or_else(|| format!("{raw:?} must be key:value"))?;
    check_key(key)?;
    check_value(key, value)?;
    Ok((key.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tags_are_read_within_their_bounds() {
        let ok = read(&json!({"team": "search", "run/kind": "nightly: full", "a.b-c_d": "é".repeat(TAG_VALUE_MAX)}));
        assert_eq!(ok.map(|t| t.len()), Ok(3));
        let many: serde_json::Map<String, Value> = (0..=TAGS_MAX).map(|i| (format!("k{i}"), json!("v"))).collect();
        for bad in [
            json!(["team"]),
            Value::Object(many),
            json!({"": "x"}),
            json!({"a:b": "x"}),
            json!({"k".repeat(TAG_KEY_MAX + 1): "x"}),
            json!({"k": ""}),
            json!({"k": "x".repeat(TAG_VALUE_MAX + 1)}),
            json!({"k": "line\nbreak"}),
            json!({"k": 1}),
        ] {
            assert!(read(&bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn a_filter_splits_at_its_first_colon() {
        assert_eq!(parse_filter("url:https://x"), Ok(("url".to_owned(), "https://x".to_owned())));
        assert!(parse_filter("team").is_err());
        assert!(parse_filter("team:").is_err());
        assert!(parse_filter(":x").is_err());
    }
}
