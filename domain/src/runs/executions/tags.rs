//! Where a tagged execution is found from its tags.
//!
//! Each tag `key:value` of an execution has a pointer item in table `executions`, in the
//! execution's shard's partition for that tag (`ten_…#07#tag#team=search`), its `id` the
//! execution's. A pointer carries the index attributes an execution has, built on its own
//! partition (`ten_…#07#tag#team=search#running`, `…#wf_…`, `…#wf_…#running`), so the
//! same indexes serve a tag with a status or workflow filter, and every status change
//! moves the pointers with the execution, in its transaction. It also holds where the
//! execution is (`home`) and all its tags (a list by several tags reads the pointers of
//! the rarest and filters on the others). A tag's pointers are spread over the tenant's
//! [`storage::SHARDS`] shards like the executions, so no partition takes more than a
//! sixteenth of a tag's starts.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::body::WireEnum;
use shared::dynamo::{Part, StoreError, Transaction, built, s};

use super::model::Execution;
use crate::runs::storage::{self, put_item};

/// The partition of tag `key:value`'s pointers in shard `shard` of `tenant`. Keys hold no
/// `=` or `#`, so the name is unambiguous.
pub(super) fn partition(tenant: &TenantId, shard: u8, key: &str, value: &str) -> String {
    in_shard(&storage::shard_partition(tenant, shard), key, value)
}

/// Tag `key:value`'s partition in the shard partition `shard`.
fn in_shard(shard: &str, key: &str, value: &str) -> String {
    format!("{shard}#tag#{key}={value}")
}

#[derive(Debug, Serialize, Deserialize)]
struct Pointer {
    tenant_id: String,
    id: String,
    /// The partition of the execution's item.
    home: String,
    tags: BTreeMap<String, String>,
    tenant_status: String,
    tenant_workflow: String,
    tenant_workflow_status: String,
}

/// The index keys of `e` on partition `p`.
fn index_keys(p: &str, e: &Execution) -> (String, String) {
    (format!("{p}#{}", e.status.wire()), format!("{p}#{}#{}", e.workflow_id, e.status.wire()))
}

/// Adds the pointers of new execution `e` (at `home`) to `tx`.
///
/// # Errors
/// [`StoreError`] if an operation cannot be built.
pub(super) fn stage_create(
    tx: &mut Transaction,
    table: &str,
    tenant: &TenantId,
    e: &Execution,
    home: &str,
) -> Result<(), StoreError> {
    let shard = storage::shard_of(e.id.as_str());
    for (key, value) in &e.tags {
        let p = partition(tenant, shard, key, value);
        let (tenant_status, tenant_workflow_status) = index_keys(&p, e);
        let pointer = Pointer {
            tenant_workflow: format!("{p}#{}", e.workflow_id),
            tenant_id: p,
            id: e.id.to_string(),
            home: home.to_owned(),
            tags: e.tags.clone(),
            tenant_status,
            tenant_workflow_status,
        };
        tx.push(Part::Execution, put_item(table, serde_dynamo::to_item(pointer)?, "attribute_not_exists(id)", None)?);
    }
    Ok(())
}

/// Adds the move of `new`'s pointers to its status to `tx`, when it changed from `old`'s.
///
/// # Errors
/// [`StoreError`] if an operation cannot be built.
pub(super) fn stage_status(
    tx: &mut Transaction,
    table: &str,
    tenant: &TenantId,
    old: &Execution,
    new: &Execution,
) -> Result<(), StoreError> {
    if old.status == new.status {
        return Ok(());
    }
    let shard = storage::shard_of(new.id.as_str());
    for (key, value) in &new.tags {
        let p = partition(tenant, shard, key, value);
        let (tenant_status, tenant_workflow_status) = index_keys(&p, new);
        let update = Update::builder()
            .table_name(table)
            .key("tenant_id", s(&p))
            .key("id", s(new.id.as_str()))
            .update_expression("SET tenant_status = :status, tenant_workflow_status = :workflow_status")
            .expression_attribute_values(":status", s(tenant_status))
            .expression_attribute_values(":workflow_status", s(tenant_workflow_status));
        tx.push(Part::Execution, TransactWriteItem::builder().update(built(update.build())?).build());
    }
    Ok(())
}

/// Adds the deletion of `e`'s pointers to `tx`.
///
/// # Errors
/// [`StoreError`] if an operation cannot be built.
pub(super) fn stage_delete(
    tx: &mut Transaction,
    table: &str,
    tenant: &TenantId,
    e: &Execution,
) -> Result<(), StoreError> {
    let shard = storage::shard_of(e.id.as_str());
    for (key, value) in &e.tags {
        let delete = Delete::builder()
            .table_name(table)
            .key("tenant_id", s(partition(tenant, shard, key, value)))
            .key("id", s(e.id.as_str()));
        tx.push(Part::Execution, TransactWriteItem::builder().delete(built(delete.build())?).build());
    }
    Ok(())
}

/// `query` keeping only pointers that also have every tag of `others`.
pub(super) fn having(query: QueryFluentBuilder, others: &[(String, String)]) -> QueryFluentBuilder {
    if others.is_empty() {
        return query;
    }
    let condition =
        (0..others.len()).map(|i| format!("#tags.#tagkey{i} = :tagvalue{i}")).collect::<Vec<_>>().join(" AND ");
    others.iter().enumerate().fold(
        query.filter_expression(condition).expression_attribute_names("#tags", "tags"),
        |q, (i, (key, value))| {
            q.expression_attribute_names(format!("#tagkey{i}"), key)
                .expression_attribute_values(format!(":tagvalue{i}"), s(value))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::executions::model::{ExecutionStatus, tag_counter_name};
    use shared::tags::{TAG_KEY_MAX, TAG_VALUE_MAX};

    /// DynamoDB's key limits: 2,048 bytes for a partition key (of the table or an index),
    /// 1,024 for a sort key. The longest tag, in 4-byte characters or in `%` and `@`
    /// (escaped to three bytes in counter names), stays under both.
    #[test]
    fn the_longest_tag_fits_every_key_it_is_written_under() {
        // A tenant's shard partition: `ten_` and 32 hex digits, `#15`.
        let shard = format!("{}#15", shared::ids::TenantKey::generate());
        let key = "k".repeat(TAG_KEY_MAX);
        for value in ["\u{1F600}".repeat(TAG_VALUE_MAX), "@%".repeat(TAG_VALUE_MAX / 2)] {
            let p = in_shard(&shard, &key, &value);
            let workflow = shared::ids::WorkflowId::generate();
            let longest_index_key = format!("{p}#{workflow}#cancelled");
            assert!(longest_index_key.len() <= 2048, "{} bytes", longest_index_key.len());
            let counter = tag_counter_name(&key, &value, Some(ExecutionStatus::Cancelled));
            let item = counter.split_once('@').map_or(counter.as_str(), |(item, _)| item);
            assert!(item.len() <= 1024, "{} bytes", item.len());
            assert!(!item.contains('@'), "the value's @ is escaped: the counter's item is the whole name");
        }
    }
}
