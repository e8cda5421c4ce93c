//! Lambda's event filtering, as much of it as the template's patterns use: a record is
//! handed over when it matches one of its mapping's patterns. A pattern is an object
//! whose fields are objects (matched against the record's field of that name) or lists
//! of what the field's value may be: a value (equal), `{"prefix": "…"}` (text that
//! begins so) or `{"exists": true|false}`.

use anyhow::{Result, bail};
use serde_json::Value;

/// Refuses a pattern with an operator this relay does not play (so that a pattern the
/// template gains cannot pass here unnoticed and behave otherwise on AWS).
///
/// # Errors
/// Names the operator.
pub fn check(pattern: &Value) -> Result<()> {
    match pattern {
        Value::Object(fields) => fields.values().try_for_each(check),
        Value::Array(choices) => choices.iter().try_for_each(|choice| match choice {
            Value::Object(rule) => match rule.iter().next() {
                Some((op, _)) if rule.len() == 1 && (op == "prefix" || op == "exists") => Ok(()),
                _ => bail!("a filter rule the relay does not play: {choice}"),
            },
            Value::Array(_) => bail!("a list inside a list of choices: {choice}"),
            _ => Ok(()),
        }),
        other => bail!("a pattern's field is neither an object nor a list: {other}"),
    }
}

/// Whether `record` matches `pattern`.
#[must_use]
pub fn matches(pattern: &Value, record: Option<&Value>) -> bool {
    match pattern {
        Value::Object(fields) => fields.iter().all(|(name, sub)| matches(sub, record.and_then(|r| r.get(name)))),
        Value::Array(choices) => choices.iter().any(|choice| match (choice, record) {
            (Value::Object(rule), _) if rule.contains_key("exists") => {
                rule["exists"].as_bool() == Some(record.is_some_and(|v| !v.is_null()))
            }
            (Value::Object(rule), Some(Value::String(text))) => {
                rule.get("prefix").and_then(Value::as_str).is_some_and(|p| text.starts_with(p))
            }
            (Value::Object(_), _) => false,
            (value, Some(field)) => value == field,
            (_, None) => false,
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_prefixes_and_existence_match_as_lambda_matches_them() {
        let pattern = json!({"eventName": ["INSERT"], "dynamodb": {"NewImage": {
            "entry": {"S": [{"prefix": "exec_"}]}, "sequence": {"N": [{"exists": true}]}}}});
        check(&pattern).expect("a pattern the relay plays");
        let record = |name: &str, image: Value| json!({"eventName": name, "dynamodb": {"NewImage": image}});
        let entry = json!({"entry": {"S": "exec_1#0000000001"}, "sequence": {"N": "1"}});
        assert!(matches(&pattern, Some(&record("INSERT", entry.clone()))));
        assert!(!matches(&pattern, Some(&record("MODIFY", entry))), "another event name");
        let pointer = json!({"entry": {"S": "exec_1#key#k"}});
        assert!(!matches(&pattern, Some(&record("INSERT", pointer))), "no sequence");
        let by_id = json!({"entry": {"S": "cp_1"}, "sequence": {"N": "1"}});
        assert!(!matches(&pattern, Some(&record("INSERT", by_id))), "another prefix");
        let absent = json!({"a": [{"exists": false}]});
        assert!(matches(&absent, Some(&json!({}))) && !matches(&absent, Some(&json!({"a": 1}))));
    }

    #[test]
    fn an_operator_the_relay_does_not_play_is_refused() {
        assert!(check(&json!({"a": [{"anything-but": ["x"]}]})).is_err());
        assert!(check(&json!({"a": [{"numeric": [">", 1]}]})).is_err());
        assert!(check(&json!({"a": "x"})).is_err());
    }
}
