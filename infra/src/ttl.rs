//! DynamoDB's Time to Live, played on DynamoDB Local, which does not expire items: the
//! items of a table whose TTL attribute (epoch seconds) is at or before a given time are
//! deleted, each on the condition that it still is (an item put again with a later time
//! stays), as DynamoDB's TTL process deletes them; the deletions reach the table's stream
//! as REMOVE records, which `cairn-relay` hands over as the event source mapping does.
//! For `cairn-relay` and the tests; never deployed (on AWS, DynamoDB does this itself,
//! within days of an item's time, usually far sooner).

use anyhow::Result;
use aws_sdk_dynamodb::Client;
use shared::dynamo::{Item, n};

use crate::template::TableSpec;

/// Deletes the items of table `name` (as `spec` defines it) whose TTL attribute is at or
/// before `now` (epoch seconds); returns the keys of those it deleted. Nothing for a
/// table without TTL.
///
/// # Errors
/// The scan's or a deletion's error (one whose condition no longer holds is passed over).
pub async fn expire(client: &Client, name: &str, spec: &TableSpec, now: i64) -> Result<Vec<Item>> {
    let Some(attribute) = spec.ttl_attribute.as_deref() else { return Ok(Vec::new()) };
    let keys: Vec<&str> = spec.key.iter().map(|part| part.attribute.as_str()).collect();
    let mut deleted = Vec::new();
    let mut start = None;
    loop {
        let page = client
            .scan()
            .table_name(name)
            .filter_expression("#ttl <= :now")
            .expression_attribute_names("#ttl", attribute)
            .expression_attribute_values(":now", n(now))
            .set_exclusive_start_key(start)
            .consistent_read(true)
            .send()
            .await?;
        for item in page.items.unwrap_or_default() {
            let key: Item = item.into_iter().filter(|(name, _)| keys.contains(&name.as_str())).collect();
            let outcome = client
                .delete_item()
                .table_name(name)
                .set_key(Some(key.clone()))
                .condition_expression("#ttl <= :now")
                .expression_attribute_names("#ttl", attribute)
                .expression_attribute_values(":now", n(now))
                .send()
                .await;
            match outcome {
                Ok(_) => deleted.push(key),
                Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => {}
                Err(e) => return Err(e.into()),
            }
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(deleted);
        }
    }
}
