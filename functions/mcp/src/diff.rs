//! The difference between two JSON documents (two checkpoints' states), as a list of
//! changes at JSON Pointer paths (RFC 6901): what a model reads to compare two steps.

use serde_json::{Value, json};

/// The most changes an answer lists (the total is counted on).
pub const CHANGES_SHOWN_MAX: usize = 200;

/// The changes that turn `from` into `to`: objects compared key by key, arrays index by
/// index, anything else as a whole. Each change is `{path, op, from?, to?}` with `op`
/// `added`, `removed` or `changed`. Returns the first [`CHANGES_SHOWN_MAX`] and how many
/// there are in all.
#[must_use]
pub fn changes(from: &Value, to: &Value) -> (Vec<Value>, usize) {
    let mut found = Vec::new();
    let mut total = 0;
    walk(from, to, &mut String::new(), &mut found, &mut total);
    (found, total)
}

fn note(found: &mut Vec<Value>, total: &mut usize, change: Value) {
    *total += 1;
    if found.len() < CHANGES_SHOWN_MAX {
        found.push(change);
    }
}

/// One member (of an object or an array) at `path`, on either side or both.
fn member(from: Option<&Value>, to: Option<&Value>, path: &mut String, found: &mut Vec<Value>, total: &mut usize) {
    match (from, to) {
        (Some(x), Some(y)) => walk(x, y, path, found, total),
        (Some(x), None) => note(found, total, json!({"path": path, "op": "removed", "from": x})),
        (None, Some(y)) => note(found, total, json!({"path": path, "op": "added", "to": y})),
        (None, None) => {}
    }
}

fn walk(from: &Value, to: &Value, path: &mut String, found: &mut Vec<Value>, total: &mut usize) {
    match (from, to) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))).collect();
            keys.sort();
            for key in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                member(a.get(key), b.get(key), path, found, total);
                path.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                member(a.get(i), b.get(i), path, found, total);
                path.truncate(len);
            }
        }
        (x, y) if x != y => note(found, total, json!({"path": path, "op": "changed", "from": x, "to": y})),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_items_and_values_that_differ_are_listed_at_their_pointers() {
        let from = json!({"step": 1, "plan": ["a", "b"], "notes": {"x": 1, "a/b": true}, "gone": null});
        let to = json!({"step": 2, "plan": ["a", "c", "d"], "notes": {"x": 1, "a/b": false}, "new": {"k": 1}});
        let (found, total) = changes(&from, &to);
        assert_eq!(total, 6);
        assert_eq!(
            found,
            vec![
                json!({"path": "/gone", "op": "removed", "from": null}),
                json!({"path": "/new", "op": "added", "to": {"k": 1}}),
                json!({"path": "/notes/a~1b", "op": "changed", "from": true, "to": false}),
                json!({"path": "/plan/1", "op": "changed", "from": "b", "to": "c"}),
                json!({"path": "/plan/2", "op": "added", "to": "d"}),
                json!({"path": "/step", "op": "changed", "from": 1, "to": 2}),
            ]
        );
        assert_eq!(changes(&from, &from), (vec![], 0), "no change, nothing listed");
        let (whole, _) = changes(&json!([1]), &json!({"a": 1}));
        assert_eq!(whole, vec![json!({"path": "", "op": "changed", "from": [1], "to": {"a": 1}})]);
    }

    #[test]
    fn past_the_most_shown_the_changes_are_counted_not_listed() {
        let from = Value::Array((0..500).map(Value::from).collect());
        let to = Value::Array((0..500).map(|i| Value::from(i + 1)).collect());
        let (found, total) = changes(&from, &to);
        assert_eq!((found.len(), total), (CHANGES_SHOWN_MAX, 500));
    }
}
