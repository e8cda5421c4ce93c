//! Reads by key, strongly consistent: one item, a batch, a serializable snapshot.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_get_items::TransactGetItemsError;
use aws_sdk_dynamodb::types::KeysAndAttributes;

use super::error::{StoreError, built, classify, is_conflict, is_throttling};
use super::item::{Item, s};
use super::write_gate::{MAX_CARRYING_KEYS, current_gate};

/// Reads one item by its key (string attributes), strongly consistent.
///
/// # Errors
/// The read's [`StoreError`].
pub async fn get_item(client: &Client, table: &str, key: &[(&str, &str)]) -> Result<Option<Item>, StoreError> {
    let key: Item = key.iter().map(|(name, value)| ((*name).to_owned(), s(*value))).collect();
    // A request's first read carries its gate's look at the rate-limit standing, in one
    // call ([`crate::gate`]).
    if let Some(gate) = current_gate()
        && let Some(read) = gate.carry(table, std::slice::from_ref(&key))
        && let Some(mut found) = read.await
    {
        return Ok(found.pop());
    }
    get_one(client, table, key).await
}

/// One strongly consistent GetItem.
async fn get_one(client: &Client, table: &str, key: Item) -> Result<Option<Item>, StoreError> {
    let out =
        client.get_item().table_name(table).set_key(Some(key)).consistent_read(true).send().await.map_err(classify)?;
    Ok(out.item)
}

/// The items at `keys` (per table; 100 keys at most in all), strongly consistent, in one
/// BatchGetItem (each read costs what a GetItem of it would): the items found per
/// table, in no particular order. Keys DynamoDB leaves unprocessed are sent again,
/// strongly consistent: at once while each answer reads some of them (an answer holds
/// 16 MB at most), else after 25, 50, 100, 200 and 400 ms (DynamoDB is throttling).
///
/// # Errors
/// The calls' [`StoreError`]s; [`StoreError::Unavailable`] when keys are still
/// unprocessed after that.
pub async fn get_batch(
    client: &Client,
    keys: HashMap<String, Vec<Item>>,
) -> Result<HashMap<String, Vec<Item>>, StoreError> {
    get_batch_of(client, keys, &[]).await
}

/// [`get_batch`] reading only `attributes` of each item (all of them when empty).
async fn get_batch_of(
    client: &Client,
    keys: HashMap<String, Vec<Item>>,
    attributes: &[&str],
) -> Result<HashMap<String, Vec<Item>>, StoreError> {
    let consistent = |keys: Vec<Item>| {
        let mut read = KeysAndAttributes::builder().set_keys(Some(keys)).consistent_read(true);
        if !attributes.is_empty() {
            let names: Vec<String> = (0..attributes.len()).map(|i| format!("#a{i}")).collect();
            read = read.projection_expression(names.join(", ")).set_expression_attribute_names(Some(
                names.into_iter().zip(attributes.iter().map(|a| (*a).to_owned())).collect(),
            ));
        }
        read.build().map_err(|e| StoreError::Other(Box::new(e)))
    };
    let mut left: HashMap<String, Vec<Item>> = keys.into_iter().filter(|(_, keys)| !keys.is_empty()).collect();
    let mut found: HashMap<String, Vec<Item>> = HashMap::new();
    let mut idle = 0u32;
    while !left.is_empty() {
        if idle == 6 {
            return Err(StoreError::Unavailable("BatchGetItem left keys unprocessed".into()));
        }
        if idle > 0 {
            tokio::time::sleep(Duration::from_millis(25 << (idle - 1))).await;
        }
        let asked: usize = left.values().map(Vec::len).sum();
        let mut items = HashMap::with_capacity(left.len());
        for (table, keys) in left.drain() {
            items.insert(table, consistent(keys)?);
        }
        let out = client.batch_get_item().set_request_items(Some(items)).send().await.map_err(classify)?;
        for (table, items) in out.responses.unwrap_or_default() {
            found.entry(table).or_default().extend(items);
        }
        left = out
            .unprocessed_keys
            .unwrap_or_default()
            .into_iter()
            .map(|(table, keys)| (table, keys.keys))
            .filter(|(_, keys)| !keys.is_empty())
            .collect();
        let unread: usize = left.values().map(Vec::len).sum();
        idle = if unread < asked { 0 } else { idle + 1 };
    }
    Ok(found)
}

/// Reads the items at `keys` (each a table and a key, strongly consistent) as one
/// serializable snapshot, in one round trip (TransactGetItems: at most 100 keys; each
/// read costs twice a plain one). The answers come in the order of `keys`, `None` where
/// nothing is stored. Use it where an answer depends on two items another request
/// changes in one transaction.
///
/// # Errors
/// [`StoreError::Conflict`] when a write transaction on one of the items was under
/// way (worth a retry, see [`retry_races`](super::retry_races));
/// [`StoreError::Unavailable`] when throttled; the read's other [`StoreError`]s.
pub async fn get_together(client: &Client, keys: Vec<(&str, Item)>) -> Result<Vec<Option<Item>>, StoreError> {
    let count = keys.len();
    let mut reads = Vec::with_capacity(count);
    for (table, key) in keys {
        let get = aws_sdk_dynamodb::types::Get::builder().table_name(table).set_key(Some(key));
        reads.push(aws_sdk_dynamodb::types::TransactGetItem::builder().get(built(get.build())?).build());
    }
    let out = client.transact_get_items().set_transact_items(Some(reads)).send().await.map_err(|error| {
        let reasons = match &error {
            SdkError::ServiceError(service) => match service.err() {
                TransactGetItemsError::TransactionCanceledException(canceled) => canceled.cancellation_reasons(),
                _ => &[],
            },
            _ => &[],
        };
        if reasons.iter().any(is_conflict) {
            return StoreError::Conflict;
        }
        if reasons.iter().any(is_throttling) {
            return StoreError::Unavailable(Box::new(error));
        }
        classify(error)
    })?;
    let found: Vec<Option<Item>> = out.responses.unwrap_or_default().into_iter().map(|r| r.item).collect();
    if found.len() != count {
        return Err(StoreError::Other(format!("TransactGetItems answered {} of {count} reads", found.len()).into()));
    }
    Ok(found)
}

/// Reads items by key, 100 keys a call, resending what DynamoDB leaves unprocessed
/// ([`get_batch`]). Strongly consistent. Missing items are left out; the order is not
/// the keys'. A request's first read carries its gate's look at the rate-limit standing
/// when it is small enough ([`MAX_CARRYING_KEYS`], [`crate::gate`]).
///
/// # Errors
/// The reads' [`StoreError`]s.
pub async fn batch_get(client: &Client, table: &str, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
    if keys.len() <= MAX_CARRYING_KEYS
        && let Some(gate) = current_gate()
        && let Some(read) = gate.carry(table, &keys)
        && let Some(found) = read.await
    {
        return Ok(found);
    }
    batch_get_alone(client, table, keys).await
}

/// [`batch_get`] of only `attributes` of each item (nothing carried).
///
/// # Errors
/// As [`get_batch`]'s.
pub async fn batch_get_projected(
    client: &Client,
    table: &str,
    keys: Vec<Item>,
    attributes: &[&str],
) -> Result<Vec<Item>, StoreError> {
    let mut found = Vec::with_capacity(keys.len());
    let mut keys = keys;
    while !keys.is_empty() {
        let rest = keys.split_off(keys.len().min(100));
        let mut read = get_batch_of(client, HashMap::from([(table.to_owned(), keys)]), attributes).await?;
        found.extend(read.remove(table).unwrap_or_default());
        keys = rest;
    }
    Ok(found)
}

/// [`batch_get`] with nothing carried.
async fn batch_get_alone(client: &Client, table: &str, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
    batch_get_projected(client, table, keys, &[]).await
}
