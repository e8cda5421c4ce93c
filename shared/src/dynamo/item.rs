//! One item: its type, the constructors of its attribute values, and the size DynamoDB
//! counts for it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// One DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

/// A binary attribute.
#[must_use]
pub fn b(value: Vec<u8>) -> AttributeValue {
    AttributeValue::B(aws_smithy_types::Blob::new(value))
}

/// A string attribute.
#[must_use]
pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute.
#[must_use]
pub fn n(value: impl std::fmt::Display) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The size DynamoDB counts for `item`: attribute names and values in UTF-8 bytes,
/// numbers at one byte per two digits plus one, 3 bytes plus one per element for lists
/// and maps, 1 byte for booleans and nulls (the rules of "Item sizes" in the DynamoDB
/// developer guide, rounded up where they say "approximately").
#[must_use]
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value)).sum()
}

fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.len().div_ceil(2) + 1,
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::M(map) => 3 + map.iter().map(|(k, v)| 1 + k.len() + value_size(v)).sum::<usize>(),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_size_follows_dynamodbs_rules() {
        let item: Item = HashMap::from([
            ("name".to_owned(), s("äb")),
            ("n".to_owned(), n(12345)),
            ("data".to_owned(), b(vec![0; 10])),
            ("list".to_owned(), AttributeValue::L(vec![s("ab"), AttributeValue::Bool(true)])),
        ]);
        // name 4 + "äb" 3; n 1 + (5 digits: 3 + 1); data 4 + 10; list 4 + 3 + (1 + 2) + (1 + 1)
        assert_eq!(item_size(&item), 7 + 5 + 14 + 12);
    }
}
