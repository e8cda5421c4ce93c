//! Deleting a tenant: every item it owns in every table, its keys revoked first, and a
//! report of what was deleted and when. The operator's `cairn-admin tenant delete` runs
//! it at once; a tenant asks for it itself (`POST /account/deletion`, the dashboard's
//! settings page), which revokes its keys and leaves the rest to the janitor, in steps
//! that fit its runs.
//!
//! Every tenant-owned item's partition key is the tenant's id or starts with it and `#`
//! (a shard, an execution's or a job's own partition); an API key's item is keyed by its
//! hash and names its tenant in `tenant_id`. So each table is scanned (a page a step,
//! filtered on those keys: DynamoDB charges for everything a scan reads, so a deletion
//! costs about one read of the whole deployment's tables, not of the tenant's data alone)
//! and each item found is deleted by its key, 25 a request; the tenant's keys and the
//! revocation markers earlier versions wrote are deleted by their hashes. Work already under way for the tenant
//! when its keys are revoked (a bulk job's round, a webhook delivery, an expiry) may write
//! after the first pass: passes repeat until one finds nothing, at most [`MAX_PASSES`].
//! The tenant's own item goes last.
//!
//! What stays is the proof: a requested deletion's record, in the jobs table's
//! `deletions` partition (no tenant's), holds the report (the tenant's id, when it was
//! asked for, begun and finished, and how many items of each table went).
//!
//! Stripe is left to Stripe's rules: the customer stays in Stripe (its invoices are the
//! seller's records); a deletion is refused while the tenant has a live subscription,
//! which would go on charging it.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, DeleteRequest, Put, TransactWriteItem, WriteRequest};
use chrono::{DateTime, Utc};
use serde::Serialize;
use shared::TenantId;
use shared::auth::{REVOCATION_MARKERS, revocation_marker};
use shared::dynamo::{Item, StoreError, Table, Tables, built, classify, n, s};

use crate::Error;
use crate::keys::KeyStore;
use crate::subscriptions::Subscriptions;

/// Passes over the tables at most: the first deletes everything, a second what work in
/// flight wrote meanwhile; more means something keeps writing for the tenant.
pub const MAX_PASSES: u32 = 4;

/// What a tenant sends to confirm that it asks for its own deletion.
pub const CONFIRMATION: &str = "delete my account";

/// The jobs table's partition of the deletions asked for and not finished.
const REQUESTED: &str = "deletions#requested";

/// The deletions asked for that a run reads at most.
const MAX_REQUESTED: usize = 1_000;

/// The jobs table's partition of the finished deletions' reports.
const FINISHED: &str = "deletions";

/// What a deletion did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The tenant deleted.
    pub tenant: String,
    /// When the tenant asked for it (`None`: the operator's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    /// When it began.
    pub started_at: String,
    /// When the last item was gone.
    pub finished_at: String,
    /// Keys that were live and were revoked first.
    pub keys_revoked: u64,
    /// Items deleted, by table (every table named, 0 included).
    pub deleted: BTreeMap<String, u64>,
    /// Items deleted in all.
    pub total: u64,
    /// Passes over the tables (the last found nothing).
    pub passes: u32,
}

/// A deletion under way: where its passes are.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The pass under way, from 1.
    pub pass: u32,
    /// The table of [`ORDER`] it is at.
    table: usize,
    /// Where the scan of that table goes on (`None`: at its start).
    start: Option<Item>,
    /// Items deleted in this pass.
    this_pass: u64,
    /// Items deleted, by table.
    pub deleted: BTreeMap<String, u64>,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            pass: 1,
            table: 0,
            start: None,
            this_pass: 0,
            deleted: Table::ALL.iter().map(|t| (t.suffix().to_owned(), 0)).collect(),
        }
    }
}

/// The tables in the order a pass deletes from them: the tenant's own item last (until
/// then it is a tenant being deleted).
const ORDER: [Table; 17] = [
    Table::ApiKeys,
    Table::Workflows,
    Table::Counters,
    Table::Executions,
    Table::Checkpoints,
    Table::Blobs,
    Table::Failures,
    Table::Accounts,
    Table::Ledger,
    Table::StripeEvents,
    Table::RateLimits,
    Table::Idempotency,
    Table::WebhookEndpoints,
    Table::WebhookDeliveries,
    Table::Events,
    Table::Jobs,
    Table::Tenants,
];

/// A deletion the tenant asked for, as the janitor finds it.
#[derive(Debug, Clone)]
pub struct Requested {
    /// The tenant.
    pub tenant: TenantId,
    /// When it asked.
    pub requested_at: String,
    /// When the first step began (`None`: not yet).
    pub started_at: Option<String>,
    /// Keys revoked so far.
    pub keys_revoked: u64,
    /// Where it is.
    pub progress: Progress,
}

/// What a janitor's run did to the deletions asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Erased {
    /// Deletions finished.
    pub finished: u64,
    /// Steps taken (a page of a table each).
    pub steps: u64,
    /// Deletions that failed this run (logged; each goes on at the next run).
    pub failed: u64,
    /// Whether the run stopped for lack of time with work left.
    pub stopped: bool,
}

/// Tenant deletions: asked for, run in steps, reported.
#[derive(Debug, Clone)]
pub struct Erasures {
    client: Client,
    tables: Tables,
}

impl Erasures {
    /// The deletions of the tables `tables`.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    /// Refuses, with [`Error::InvalidState`], to delete a tenant with a live
    /// subscription (it would go on charging).
    ///
    /// # Errors
    /// As said, and storage errors.
    pub async fn refuse_live_subscription(&self, tenant: &TenantId) -> Result<(), Error> {
        let billing = Subscriptions::new(self.client.clone(), self.tables.clone()).read(tenant).await?;
        if let Some(subscription) = billing.subscription.as_ref().filter(|s| s.is_live()) {
            return Err(Error::InvalidState(format!(
                "the account has a live subscription ({}, {}): cancel it first, so that Stripe stops charging for it",
                subscription.subscription_id, subscription.status
            )));
        }
        Ok(())
    }

    /// Revokes every live key of the tenant (each is refused at its next request: its
    /// keys epoch moves); answers how many.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn revoke_keys(&self, tenant: &TenantId, now: DateTime<Utc>) -> Result<u64, Error> {
        let keys = KeyStore::new(self.client.clone(), self.tables.clone());
        let mut revoked = 0;
        for record in keys.records(tenant).await? {
            let Some(id) = shared::ids::KeyId::parse(&record.key_id) else { continue };
            if record.revoked_at.is_none() && !keys.revoke_by_operator(&id, now).await?.already {
                revoked += 1;
            }
        }
        Ok(revoked)
    }

    /// The tenant asks for its own deletion: recorded for the janitor, then every key of
    /// the tenant revoked at once. Answers the record.
    ///
    /// # Errors
    /// [`Error::InvalidState`] with a live subscription or a deletion already asked for;
    /// storage errors.
    pub async fn request(&self, tenant: &TenantId, now: DateTime<Utc>) -> Result<Requested, Error> {
        self.refuse_live_subscription(tenant).await?;
        let requested = Requested {
            tenant: tenant.clone(),
            requested_at: shared::time::format(now),
            started_at: None,
            keys_revoked: 0,
            progress: Progress::default(),
        };
        let put = self
            .client
            .put_item()
            .table_name(self.tables.name(Table::Jobs))
            .set_item(Some(requested.item()))
            .condition_expression("attribute_not_exists(id)")
            .send()
            .await;
        if let Err(e) = put {
            return match classify(e) {
                StoreError::Conflict => {
                    Err(Error::InvalidState("the account's deletion has been asked for already".to_owned()))
                }
                other => Err(other.into()),
            };
        }
        let revoked = self.revoke_keys(tenant, now).await?;
        let mut requested = requested;
        requested.keys_revoked = revoked;
        self.save(&requested).await?;
        Ok(requested)
    }

    /// The deletions asked for and not finished (the first [`MAX_REQUESTED`] by tenant
    /// id: a run has time for fewer), oldest first.
    ///
    /// # Errors
    /// Storage errors, or a record that cannot be read.
    pub async fn requested(&self) -> Result<Vec<Requested>, Error> {
        let query = self
            .client
            .query()
            .table_name(self.tables.name(Table::Jobs))
            .key_condition_expression("tenant_id = :p")
            .expression_attribute_values(":p", s(REQUESTED))
            .consistent_read(true);
        let items = shared::dynamo::query_window(query, "id", 0, MAX_REQUESTED).await?;
        let mut found: Vec<Requested> = items.into_iter().filter_map(Requested::from_item).collect();
        found.sort_by(|a, b| a.requested_at.cmp(&b.requested_at));
        Ok(found)
    }

    /// The report of the tenant's deletion, once finished.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn report(&self, tenant: &str) -> Result<Option<Report>, Error> {
        let key = [("tenant_id", FINISHED), ("id", tenant)];
        let item = shared::dynamo::get_item(&self.client, self.tables.name(Table::Jobs), &key).await?;
        Ok(item.as_ref().and_then(report_of))
    }

    /// Runs the deletions asked for, a step at a time while `go_on` says there is time,
    /// each step saved: keys revoked again first (one made meanwhile), then the passes; a
    /// finished one leaves its report.
    ///
    /// # Errors
    /// Storage errors reading the deletions asked for (one that fails is logged and
    /// counted, stays asked for, and goes on at the next run).
    pub async fn run(&self, now: DateTime<Utc>, go_on: &(dyn Fn() -> bool + Sync)) -> Result<Erased, Error> {
        let mut erased = Erased::default();
        for mut requested in self.requested().await? {
            if !go_on() {
                erased.stopped = true;
                return Ok(erased);
            }
            match self.go_on_with(&mut requested, now, go_on, &mut erased).await {
                Ok(true) => erased.finished += 1,
                Ok(false) => {
                    erased.stopped = true;
                    return Ok(erased);
                }
                // One deletion that fails holds back none behind it: it goes on where it
                // stopped (or, past its passes, anew) at the next run.
                Err(e) => {
                    tracing::error!(tenant = requested.tenant.as_str(), error = %e, "a tenant's deletion failed; it goes on at the next run");
                    erased.failed += 1;
                }
            }
        }
        Ok(erased)
    }

    /// Takes steps of deletion `requested`, saving each, while `go_on`; answers whether
    /// it finished.
    async fn go_on_with(
        &self,
        requested: &mut Requested,
        now: DateTime<Utc>,
        go_on: &(dyn Fn() -> bool + Sync),
        erased: &mut Erased,
    ) -> Result<bool, Error> {
        if requested.started_at.is_none() {
            requested.keys_revoked += self.revoke_keys(&requested.tenant, now).await?;
            requested.started_at = Some(shared::time::format(now));
            self.save(requested).await?;
        }
        loop {
            if !go_on() {
                return Ok(false);
            }
            erased.steps += 1;
            match self.step(&requested.tenant, &mut requested.progress).await {
                Ok(true) => {
                    self.finish(requested, Utc::now()).await?;
                    return Ok(true);
                }
                Ok(false) => self.save(requested).await?,
                Err(e) => {
                    self.save(requested).await?;
                    return Err(e);
                }
            }
        }
    }

    /// Deletes tenant `tenant` at once, as the operator does; answers the report.
    ///
    /// # Errors
    /// A live subscription ([`Error::InvalidState`]), storage errors, or items still
    /// being written after [`MAX_PASSES`] passes.
    pub async fn delete_now(&self, tenant: &TenantId) -> Result<Report, Error> {
        self.refuse_live_subscription(tenant).await?;
        let started_at = shared::time::format(Utc::now());
        let keys_revoked = self.revoke_keys(tenant, Utc::now()).await?;
        let mut progress = Progress::default();
        while !self.step(tenant, &mut progress).await? {}
        Ok(report(tenant, None, started_at, keys_revoked, &progress))
    }

    /// One step of a deletion: one page of one table's scan, its tenant's items deleted
    /// (the API keys: the tenant's keys and their revocation markers, by hash). Answers
    /// whether the deletion is finished (a whole pass found nothing).
    ///
    /// # Errors
    /// Storage errors, or [`Error::InvalidState`] when items were still being written
    /// after [`MAX_PASSES`] passes.
    pub async fn step(&self, tenant: &TenantId, progress: &mut Progress) -> Result<bool, Error> {
        let table = ORDER[progress.table];
        let (deleted, next) = if table == Table::ApiKeys {
            (self.delete_keys(tenant).await?, None)
        } else {
            self.delete_page(table, tenant, progress.start.take()).await?
        };
        *progress.deleted.entry(table.suffix().to_owned()).or_default() += deleted;
        progress.this_pass += deleted;
        if next.is_some() {
            progress.start = next;
            return Ok(false);
        }
        progress.table += 1;
        if progress.table < ORDER.len() {
            return Ok(false);
        }
        if progress.this_pass == 0 {
            return Ok(true);
        }
        if progress.pass == MAX_PASSES {
            // The next try starts anew, once whatever kept writing has stopped.
            *progress = Progress { deleted: std::mem::take(&mut progress.deleted), ..Progress::default() };
            return Err(Error::InvalidState(format!(
                "items of {} were still being written after {MAX_PASSES} passes; the deletion goes on later",
                tenant.as_str()
            )));
        }
        progress.pass += 1;
        progress.table = 0;
        progress.this_pass = 0;
        Ok(false)
    }

    /// Deletes one page of table `table`'s items that `tenant` owns (those in its
    /// partitions), the scan going on from `start`. Answers how many, and where the scan
    /// goes on (`None`: the table is done).
    async fn delete_page(
        &self,
        table: Table,
        tenant: &TenantId,
        start: Option<Item>,
    ) -> Result<(u64, Option<Item>), Error> {
        let name = self.tables.name(table);
        let page = self
            .client
            .scan()
            .table_name(name)
            .filter_expression("#t = :t OR begins_with(#t, :own)")
            .expression_attribute_names("#t", "tenant_id")
            .expression_attribute_values(":t", s(tenant.as_str()))
            .expression_attribute_values(":own", s(format!("{}#", tenant.as_str())))
            .set_exclusive_start_key(start)
            .consistent_read(true)
            .send()
            .await
            .map_err(classify)?;
        let keys: Vec<Item> = page
            .items
            .unwrap_or_default()
            .into_iter()
            .map(|item| item.into_iter().filter(|(a, _)| table.key().contains(&a.as_str())).collect())
            .collect();
        let deleted = self.delete_all(name, &keys).await?;
        Ok((deleted, page.last_evaluated_key.filter(|k| !k.is_empty())))
    }

    /// Deletes the tenant's API keys and their revocation markers; answers how many
    /// items were there.
    async fn delete_keys(&self, tenant: &TenantId) -> Result<u64, Error> {
        let records = KeyStore::new(self.client.clone(), self.tables.clone()).records(tenant).await?;
        let name = self.tables.name(Table::ApiKeys);
        let hash = |h: String| HashMap::from([("key_hash".to_owned(), s(h))]);
        let candidates: Vec<Item> = records
            .iter()
            .flat_map(|r| {
                std::iter::once(hash(r.key_hash.clone()))
                    .chain((0..REVOCATION_MARKERS).map(|m| hash(revocation_marker(&r.key_hash, m))))
            })
            .collect();
        // Markers exist only for keys an earlier version revoked (not all of those, and
        // none revoked since): only what is there is counted.
        let there = shared::dynamo::batch_get_projected(&self.client, name, candidates, &["key_hash"]).await?;
        self.delete_all(name, &there).await
    }

    /// Deletes `keys` from table `name`, 25 a request, sending again what DynamoDB leaves
    /// unprocessed; answers how many.
    async fn delete_all(&self, name: &str, keys: &[Item]) -> Result<u64, Error> {
        for batch in keys.chunks(25) {
            let mut requests: Vec<WriteRequest> = batch
                .iter()
                .map(|key| {
                    let delete = built(DeleteRequest::builder().set_key(Some(key.clone())).build())?;
                    Ok(WriteRequest::builder().delete_request(delete).build())
                })
                .collect::<Result<_, StoreError>>()?;
            let mut attempt = 0;
            while !requests.is_empty() {
                if attempt == 10 {
                    let why = format!("DynamoDB left deletions from {name} unprocessed ten times");
                    return Err(StoreError::Unavailable(why.into()).into());
                }
                if attempt > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(50 << attempt)).await;
                }
                let out =
                    self.client.batch_write_item().request_items(name, requests).send().await.map_err(classify)?;
                requests = out.unprocessed_items.and_then(|mut left| left.remove(name)).unwrap_or_default();
                attempt += 1;
            }
        }
        Ok(keys.len() as u64)
    }

    /// Saves where a deletion asked for is.
    async fn save(&self, requested: &Requested) -> Result<(), Error> {
        self.client
            .put_item()
            .table_name(self.tables.name(Table::Jobs))
            .set_item(Some(requested.item()))
            .send()
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// Replaces a finished deletion's record by its report, in one transaction.
    async fn finish(&self, requested: &Requested, now: DateTime<Utc>) -> Result<(), Error> {
        let started = requested.started_at.clone().unwrap_or_else(|| requested.requested_at.clone());
        let report = report(
            &requested.tenant,
            Some(requested.requested_at.clone()),
            started,
            requested.keys_revoked,
            &requested.progress,
        );
        let name = self.tables.name(Table::Jobs);
        let mut item: Item = HashMap::from([
            ("tenant_id".to_owned(), s(FINISHED)),
            ("id".to_owned(), s(requested.tenant.as_str())),
            ("started_at".to_owned(), s(&report.started_at)),
            ("finished_at".to_owned(), s(shared::time::format(now))),
            ("keys_revoked".to_owned(), n(report.keys_revoked)),
            ("deleted".to_owned(), counts(&report.deleted)),
            ("total".to_owned(), n(report.total)),
            ("passes".to_owned(), n(report.passes)),
        ]);
        if let Some(at) = &report.requested_at {
            item.insert("requested_at".to_owned(), s(at));
        }
        let delete = built(
            Delete::builder()
                .table_name(name)
                .key("tenant_id", s(REQUESTED))
                .key("id", s(requested.tenant.as_str()))
                .build(),
        )?;
        let put = built(Put::builder().table_name(name).set_item(Some(item)).build())?;
        self.client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().delete(delete).build())
            .transact_items(TransactWriteItem::builder().put(put).build())
            .send()
            .await
            .map_err(classify)?;
        Ok(())
    }
}

impl Requested {
    /// The record as stored.
    fn item(&self) -> Item {
        let p = &self.progress;
        let mut item: Item = HashMap::from([
            ("tenant_id".to_owned(), s(REQUESTED)),
            ("id".to_owned(), s(self.tenant.as_str())),
            ("requested_at".to_owned(), s(&self.requested_at)),
            ("keys_revoked".to_owned(), n(self.keys_revoked)),
            ("pass".to_owned(), n(p.pass)),
            ("table".to_owned(), n(p.table)),
            ("this_pass".to_owned(), n(p.this_pass)),
            ("deleted".to_owned(), counts(&p.deleted)),
        ]);
        if let Some(at) = &self.started_at {
            item.insert("started_at".to_owned(), s(at));
        }
        if let Some(start) = &p.start {
            item.insert("start".to_owned(), AttributeValue::M(start.clone()));
        }
        item
    }

    /// The record read back (`None`: not one).
    fn from_item(mut item: Item) -> Option<Self> {
        let text = |v: &AttributeValue| v.as_s().ok().cloned();
        let number = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_n().ok()?.parse::<u64>().ok());
        let tenant = shared::auth::stored::owner(item.get("id").and_then(|v| v.as_s().ok())?)?;
        let deleted = match item.remove("deleted") {
            Some(AttributeValue::M(m)) => {
                m.into_iter().filter_map(|(k, v)| Some((k, v.as_n().ok()?.parse().ok()?))).collect()
            }
            _ => Progress::default().deleted,
        };
        let progress = Progress {
            pass: u32::try_from(number(&item, "pass")?).ok()?,
            table: usize::try_from(number(&item, "table")?).ok()?.min(ORDER.len() - 1),
            start: match item.remove("start") {
                Some(AttributeValue::M(m)) => Some(m),
                _ => None,
            },
            this_pass: number(&item, "this_pass")?,
            deleted,
        };
        Some(Self {
            tenant,
            requested_at: item.get("requested_at").and_then(text)?,
            started_at: item.get("started_at").and_then(text),
            keys_revoked: number(&item, "keys_revoked").unwrap_or_default(),
            progress,
        })
    }
}

/// Counts by table as a DynamoDB map.
fn counts(deleted: &BTreeMap<String, u64>) -> AttributeValue {
    AttributeValue::M(deleted.iter().map(|(k, v)| (k.clone(), n(v))).collect())
}

/// The report of a deletion that `progress` finished.
fn report(
    tenant: &TenantId,
    requested_at: Option<String>,
    started_at: String,
    keys_revoked: u64,
    progress: &Progress,
) -> Report {
    Report {
        tenant: tenant.as_str().to_owned(),
        requested_at,
        started_at,
        finished_at: shared::time::format(Utc::now()),
        keys_revoked,
        deleted: progress.deleted.clone(),
        total: progress.deleted.values().sum(),
        passes: progress.pass,
    }
}

/// A finished deletion's report as stored.
fn report_of(item: &Item) -> Option<Report> {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    let number = |name: &str| item.get(name).and_then(|v| v.as_n().ok()?.parse::<u64>().ok());
    let deleted = match item.get("deleted") {
        Some(AttributeValue::M(m)) => {
            m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_n().ok()?.parse().ok()?))).collect()
        }
        _ => BTreeMap::new(),
    };
    Some(Report {
        tenant: text("id")?,
        requested_at: text("requested_at"),
        started_at: text("started_at")?,
        finished_at: text("finished_at")?,
        keys_revoked: number("keys_revoked")?,
        deleted,
        total: number("total")?,
        passes: u32::try_from(number("passes")?).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_takes_every_table_once_and_the_tenant_s_own_item_last() {
        let mut tables: Vec<&str> = ORDER.iter().map(|t| t.suffix()).collect();
        assert_eq!(ORDER.last(), Some(&Table::Tenants));
        tables.sort_unstable();
        let mut all: Vec<&str> = Table::ALL.iter().map(|t| t.suffix()).collect();
        all.sort_unstable();
        assert_eq!(tables, all);
    }

    #[test]
    fn a_requested_deletion_reads_back_as_saved() {
        let tenant = shared::auth::stored::owner("ten_0193a6f21c2b7d3e8f000123456789ab").expect("tenant");
        let mut progress = Progress { pass: 2, table: 5, this_pass: 7, ..Progress::default() };
        progress.start = Some(HashMap::from([("tenant_id".to_owned(), s("x")), ("part".to_owned(), s("y"))]));
        progress.deleted.insert("blobs".to_owned(), 12);
        let requested = Requested {
            tenant,
            requested_at: "2026-12-04T00:00:00Z".to_owned(),
            started_at: Some("2026-12-04T00:05:00Z".to_owned()),
            keys_revoked: 2,
            progress,
        };
        let back = Requested::from_item(requested.item()).expect("read back");
        assert_eq!(back.progress, requested.progress);
        assert_eq!(
            (back.requested_at, back.started_at, back.keys_revoked),
            (requested.requested_at, requested.started_at, 2)
        );
    }
}
