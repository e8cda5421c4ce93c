//! Exports in DynamoDB.
//!
//! Table `jobs`: an export's item in the tenant's partition of exports
//! (`{tenant}#exports`, id `export_…`), rewritten whole by each round on the condition
//! that its round and status are as read; its stream record hands the next round to the
//! jobs function, as a bulk job's does. Table `blobs`: each part's gzip bytes in chunks
//! of at most [`PART_MAX`] (`{key}#NNN`, the key the round's own). The item and its
//! chunks carry `expires_at`, so DynamoDB's TTL deletes them
//! [`KEPT_DAYS`](super::model::KEPT_DAYS) days after the
//! export started; a round run twice leaves chunks no part names, deleted the same way.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::dynamo::{Item, Part, StoreError, Table, Tables, Transaction, b, classify, get_item, n, s};
use shared::ids::ExportId;

use chrono::{DateTime, Utc};
use shared::ids::WorkflowId;

use super::model::{Export, ExportCounts, ExportPart, ExportStatus, Position};
use crate::blobs::{BlobStore, PART_MAX};

/// The exports of every tenant; each call is scoped to the tenant given.
#[derive(Debug, Clone)]
pub struct ExportStore {
    client: Client,
    tables: Tables,
    blobs: BlobStore,
}

/// An export's item.
#[derive(Debug, Serialize, Deserialize)]
struct ExportRecord {
    tenant_id: String,
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    workflow_id: Option<String>,
    status: ExportStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    position: Position,
    round: u64,
    parts: Vec<ExportPart>,
    counts: ExportCounts,
    created_at: String,
    updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    /// Epoch seconds: DynamoDB's TTL deletes the item then.
    expires_at: i64,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("an export's {what}"))
}

fn time(raw: &str) -> Result<DateTime<Utc>, StoreError> {
    shared::time::parse(raw).map_err(|_| corrupt("time"))
}

impl ExportRecord {
    fn new(tenant: &TenantId, e: &Export) -> Self {
        Self {
            tenant_id: partition(tenant),
            id: e.id.to_string(),
            workflow_id: e.workflow_id.as_ref().map(ToString::to_string),
            status: e.status,
            error: e.error.clone(),
            position: e.position.clone(),
            round: e.round,
            parts: e.parts.clone(),
            counts: e.counts.clone(),
            created_at: shared::time::format(e.created_at),
            updated_at: shared::time::format(e.updated_at),
            ended_at: e.ended_at.map(shared::time::format),
            expires_at: e.expires_at().timestamp(),
        }
    }

    fn into_export(self) -> Result<Export, StoreError> {
        Ok(Export {
            id: ExportId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            workflow_id: self
                .workflow_id
                .as_deref()
                .map(|w| WorkflowId::parse(w).ok_or_else(|| corrupt("workflow")))
                .transpose()?,
            status: self.status,
            error: self.error,
            position: self.position,
            round: self.round,
            parts: self.parts,
            counts: self.counts,
            created_at: time(&self.created_at)?,
            updated_at: time(&self.updated_at)?,
            ended_at: self.ended_at.as_deref().map(time).transpose()?,
        })
    }
}

/// The partition of the tenant's exports.
fn partition(tenant: &TenantId) -> String {
    format!("{}#exports", tenant.as_str())
}

/// The export a stream record of the `jobs` table names: its tenant (from its
/// partition), id and round; `None` for any other item.
#[must_use]
pub fn named(record: &serde_json::Value) -> Option<(TenantId, ExportId, u64)> {
    let image = &record["dynamodb"]["NewImage"];
    let tenant = image["tenant_id"]["S"].as_str()?.strip_suffix("#exports")?;
    let tenant = shared::auth::stored::owner(tenant)?;
    let id = ExportId::parse(image["id"]["S"].as_str()?)?;
    let round = image["round"]["N"].as_str()?.parse().ok()?;
    Some((tenant, id, round))
}

impl ExportStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { blobs: BlobStore::new(client.clone(), tables.clone()), client, tables }
    }

    /// The client.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Adds `next`, the export as it is to be, to `tx`: a new one (`read` is `None`) on
    /// the condition that it does not exist, else on the condition that its round and
    /// status are still `read`'s.
    ///
    /// # Errors
    /// [`StoreError`] if the operation cannot be built.
    pub fn stage_put(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        read: Option<&Export>,
        next: &Export,
    ) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(ExportRecord::new(tenant, next))?;
        let read = read.map(|read| (read.round, shared::body::WireEnum::wire(read.status)));
        tx.push(Part::Job, crate::runs::bulk::store::job_put(self.tables.name(Table::Jobs), item, read)?);
        Ok(())
    }

    /// The tenant's export `id` (a consistent read).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn get(&self, tenant: &TenantId, id: &ExportId) -> Result<Option<Export>, StoreError> {
        let key = partition(tenant);
        let item =
            get_item(&self.client, self.tables.name(Table::Jobs), &[("tenant_id", &key), ("id", id.as_str())]).await?;
        item.map(|item| serde_dynamo::from_item::<_, ExportRecord>(item)?.into_export()).transpose()
    }

    /// The tenant's export still running and moved by a round since `since`, if any (the
    /// partition holds the exports of the last 7 days).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn running(&self, tenant: &TenantId, since: DateTime<Utc>) -> Result<Option<ExportId>, StoreError> {
        let query = shared::dynamo::newest_first(
            &self.client,
            self.tables.name(Table::Jobs),
            None,
            ("tenant_id", partition(tenant)),
        )
        .filter_expression("#status = :running AND updated_at >= :since")
        .expression_attribute_names("#status", "status")
        .expression_attribute_values(":running", s("running"))
        .expression_attribute_values(":since", s(shared::time::format(since)))
        .projection_expression("id");
        let mut start = None;
        loop {
            let page = query.clone().set_exclusive_start_key(start).send().await.map_err(classify)?;
            if let Some(found) = page.items.unwrap_or_default().first() {
                return Ok(found.get("id").and_then(|v| v.as_s().ok()).and_then(|id| ExportId::parse(id)));
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(None);
            }
        }
    }

    /// Writes `gzip` as the chunks of a part under `key`, each expiring with `export`.
    ///
    /// # Errors
    /// A write's [`StoreError`] (the round is run again; its chunks are written anew).
    pub async fn put_part(
        &self,
        tenant: &TenantId,
        export: &Export,
        key: String,
        gzip: &[u8],
    ) -> Result<ExportPart, StoreError> {
        let chunks: Vec<&[u8]> = gzip.chunks(PART_MAX).collect();
        let expires_at = export.expires_at().timestamp();
        for (at, chunk) in chunks.iter().enumerate() {
            let item: Item = HashMap::from([
                ("tenant_id".to_owned(), s(tenant.as_str())),
                ("part".to_owned(), s(chunk_key(&key, at))),
                ("data".to_owned(), b(chunk.to_vec())),
                ("expires_at".to_owned(), n(expires_at)),
            ]);
            self.client
                .put_item()
                .table_name(self.tables.name(Table::Blobs))
                .set_item(Some(item))
                .send()
                .await
                .map_err(classify)?;
        }
        let chunks =
            u32::try_from(chunks.len()).map_err(|_| StoreError::Corrupt("an export part's size".to_owned()))?;
        Ok(ExportPart { key, chunks, bytes: gzip.len() as u64, lines: 0 })
    }

    /// The gzip bytes of `part`.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s; [`StoreError::Corrupt`] for a missing chunk.
    pub async fn read_part(&self, tenant: &TenantId, part: &ExportPart) -> Result<Vec<u8>, StoreError> {
        let keys: Vec<String> = (0..part.chunks as usize).map(|at| chunk_key(&part.key, at)).collect();
        let mut found = self.blobs.read(tenant, &keys).await?;
        let mut gzip = Vec::with_capacity(usize::try_from(part.bytes).unwrap_or_default());
        for key in &keys {
            let chunk = found.remove(key).ok_or_else(|| StoreError::Corrupt(format!("export part chunk {key}")))?;
            gzip.extend(chunk);
        }
        Ok(gzip)
    }
}

/// The key of chunk `at` of the part under `key`.
fn chunk_key(key: &str, at: usize) -> String {
    format!("{key}#{at:03}")
}
