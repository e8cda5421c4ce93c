//! Deleting a tenant (`cairn-admin tenant delete`): every item of the tenant in every
//! table, its keys revoked first, and a report of what was deleted and when.
//!
//! Every tenant-owned item's partition key is the tenant's id or starts with it and `#`
//! (a shard, an execution's or a job's own partition); an API key's item is keyed by its
//! hash and names its tenant in `tenant_id`. So each table is read once (a scan, in
//! pages, filtered on those keys: DynamoDB charges for everything a scan reads, so a
//! deletion costs about one read of the whole deployment's tables, not of the tenant's
//! data alone) and each item found is deleted by its key, 25 a request. Work already
//! under way for the tenant when its keys are revoked (a bulk job's round, a webhook
//! delivery, an expiry) may write after the first pass: passes repeat until one finds
//! nothing, at most [`MAX_PASSES`]. The tenant's own item goes last.
//!
//! Stripe is left to Stripe's rules: the customer stays in Stripe (its invoices are the
//! seller's records); the deletion is refused while the tenant has a live subscription,
//! which would go on charging it.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result, anyhow, bail};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, WriteRequest};
use serde::Serialize;
use shared::dynamo::{Item, Table, Tables, classify, s};
use shared::ids::TenantKey;

use crate::template::Template;

/// Passes over the tables at most: the first deletes everything, a second what work in
/// flight wrote meanwhile; more means something keeps writing for the tenant.
pub const MAX_PASSES: usize = 4;

/// What a deletion did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The tenant deleted.
    pub tenant: String,
    /// When it began.
    pub started_at: String,
    /// When the last item was gone.
    pub finished_at: String,
    /// Keys that were live and were revoked first.
    pub keys_revoked: usize,
    /// Items deleted, by table (every table named, 0 included).
    pub deleted: BTreeMap<String, u64>,
    /// Items deleted in all.
    pub total: u64,
    /// Passes over the tables (the last found nothing).
    pub passes: usize,
}

/// Deletes tenant `tenant` and everything it owns; answers the report.
///
/// # Errors
/// An unknown tenant, a live subscription, storage errors, or items still being written
/// after [`MAX_PASSES`] passes.
pub async fn delete_tenant(client: &Client, tables: &Tables, tenant: &str) -> Result<Report> {
    let id = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    if shared::dynamo::get_item(client, tables.name(Table::Tenants), &[("tenant_id", id.as_str())]).await?.is_none() {
        bail!("unknown tenant {tenant}");
    }
    let owner = shared::auth::trusted::tenant(&id);
    let billing = domain::subscriptions::Subscriptions::new(client.clone(), tables.clone()).read(&owner).await?;
    if let Some(subscription) = billing.subscription.as_ref().filter(|s| s.is_live()) {
        bail!(
            "{tenant} has a live subscription ({}, {}): cancel it first, so that Stripe stops charging for it",
            subscription.subscription_id,
            subscription.status
        );
    }
    let started_at = shared::time::format(chrono::Utc::now());
    let keys_revoked = revoke_all(client, tables, &id).await?;
    let specs = Template::embedded()?.tables()?;
    let mut deleted: BTreeMap<String, u64> = Table::ALL.iter().map(|t| (t.suffix().to_owned(), 0)).collect();
    let mut passes = 0;
    loop {
        passes += 1;
        let mut this_pass = 0;
        // The tenant's own item last: until then it is a tenant being deleted.
        let order = Table::ALL.into_iter().filter(|t| *t != Table::Tenants).chain([Table::Tenants]);
        for table in order {
            let spec = specs
                .iter()
                .find(|spec| spec.suffix == table.suffix())
                .ok_or_else(|| anyhow!("table {} is not in template.yaml", table.suffix()))?;
            let keys: Vec<&str> = spec.key.iter().map(|part| part.attribute.as_str()).collect();
            let n = delete_owned(client, tables.name(table), &keys, table == Table::ApiKeys, id.as_str()).await?;
            *deleted.entry(table.suffix().to_owned()).or_default() += n;
            this_pass += n;
        }
        if this_pass == 0 {
            break;
        }
        if passes == MAX_PASSES {
            bail!("items of {tenant} were still being written after {MAX_PASSES} passes; run the deletion again");
        }
    }
    let total = deleted.values().sum();
    let finished_at = shared::time::format(chrono::Utc::now());
    Ok(Report { tenant: id.to_string(), started_at, finished_at, keys_revoked, deleted, total, passes })
}

/// Revokes every live key of the tenant (through `domain::keys`, which moves its keys
/// epoch: each is refused at its next request); answers how many.
async fn revoke_all(client: &Client, tables: &Tables, id: &TenantKey) -> Result<usize> {
    let now = shared::time::format(chrono::Utc::now());
    let mut revoked = 0;
    for key in crate::admin::list_keys(client, tables, id.as_str()).await? {
        if key.revoked_at.is_none()
            && crate::admin::revoke_key(client, tables, &key.key_id, &now).await? == crate::admin::Revoked::Now
        {
            revoked += 1;
        }
    }
    Ok(revoked)
}

/// Deletes the items of table `name` (key attributes `keys`) that tenant `tenant` owns:
/// those in its partitions, or, for the API keys' table (`by_attribute`), those whose
/// `tenant_id` names it and their revocation markers. Answers how many.
async fn delete_owned(client: &Client, name: &str, keys: &[&str], by_attribute: bool, tenant: &str) -> Result<u64> {
    let mut deleted = 0;
    let mut keys_found: Vec<Item> = Vec::new();
    let mut start = None;
    loop {
        let mut scan = client
            .scan()
            .table_name(name)
            .expression_attribute_names("#t", "tenant_id")
            .expression_attribute_values(":t", s(tenant))
            .set_exclusive_start_key(start)
            .consistent_read(true);
        scan = if by_attribute {
            // The tenant's keys, and every revoked key's markers (`{hash}#revoked#NN`,
            // naming no tenant), among which its own are picked below.
            scan.filter_expression("#t = :t OR contains(key_hash, :revoked)")
                .expression_attribute_values(":revoked", s("#revoked#"))
        } else {
            scan.filter_expression("#t = :t OR begins_with(#t, :own)")
                .expression_attribute_values(":own", s(format!("{tenant}#")))
        };
        let page = scan.send().await.map_err(classify).with_context(|| format!("reading {name}"))?;
        let items = page.items.unwrap_or_default();
        let found: Vec<Item> = items
            .iter()
            .map(|item| {
                item.iter().filter(|(a, _)| keys.contains(&a.as_str())).map(|(a, v)| (a.clone(), v.clone())).collect()
            })
            .collect();
        if by_attribute {
            keys_found.extend(found);
        } else {
            for batch in found.chunks(25) {
                delete_batch(client, name, batch).await?;
                deleted += batch.len() as u64;
            }
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    // A key goes with its revocation markers.
    let hash = |item: &Item| item.get("key_hash").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    let own: std::collections::BTreeSet<String> =
        keys_found.iter().map(hash).filter(|h| !h.contains("#revoked#")).collect();
    let doomed: Vec<Item> = keys_found
        .into_iter()
        .filter(|item| own.contains(hash(item).split("#revoked#").next().unwrap_or_default()))
        .collect();
    for batch in doomed.chunks(25) {
        delete_batch(client, name, batch).await?;
        deleted += batch.len() as u64;
    }
    Ok(deleted)
}

/// Deletes `keys` from table `name` in one BatchWriteItem, sending again what DynamoDB
/// leaves unprocessed.
async fn delete_batch(client: &Client, name: &str, keys: &[HashMap<String, AttributeValue>]) -> Result<()> {
    let mut requests: Vec<WriteRequest> = keys
        .iter()
        .map(|key| {
            let delete = DeleteRequest::builder().set_key(Some(key.clone())).build()?;
            Ok(WriteRequest::builder().delete_request(delete).build())
        })
        .collect::<Result<_>>()?;
    for attempt in 0..10 {
        let out = client
            .batch_write_item()
            .request_items(name, requests)
            .send()
            .await
            .map_err(classify)
            .with_context(|| format!("deleting from {name}"))?;
        requests = out.unprocessed_items.and_then(|mut left| left.remove(name)).unwrap_or_default();
        if requests.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
    }
    bail!("DynamoDB left deletions from {name} unprocessed ten times; run the deletion again")
}
