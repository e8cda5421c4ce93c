//! The one store of large payloads: table `blobs` (`tenant_id`, `part`), one item per
//! part of at most [`PART_MAX`] bytes (compressed data). Parts are written and deleted
//! in the transaction of the item that refers to them, so a reader never meets a
//! half-written payload and a failed write leaves nothing behind. They are written
//! unconditionally: the referring item's own condition (its version, or its absence)
//! is what guards a write, and a part under a reused key (an execution's new output
//! after a replay) is simply replaced.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use shared::TenantId;
use shared::dynamo::{Item, Part, StoreError, Table, Tables, Transaction, b, batch_get, built, s};

/// The largest part: well under DynamoDB's 400 KB item limit with its key.
pub const PART_MAX: usize = 350 * 1024;

/// Parts of every tenant; each call is scoped to the tenant it is given.
#[derive(Debug, Clone)]
pub struct BlobStore {
    client: Client,
    tables: Tables,
}

impl BlobStore {
    /// Over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    fn key(tenant: &TenantId, key: &str) -> Item {
        HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("part".to_owned(), s(key))])
    }

    /// Adds the write of part `key` (at most [`PART_MAX`] bytes) to `tx`, as `part`.
    ///
    /// # Errors
    /// [`StoreError`] if the operation cannot be built.
    pub fn stage_put(
        &self,
        tx: &mut Transaction,
        part: Part,
        tenant: &TenantId,
        key: &str,
        data: Vec<u8>,
    ) -> Result<(), StoreError> {
        let mut item = Self::key(tenant, key);
        item.insert("data".to_owned(), b(data));
        let put = Put::builder().table_name(self.tables.name(Table::Blobs)).set_item(Some(item));
        tx.push(part, TransactWriteItem::builder().put(built(put.build())?).build());
        Ok(())
    }

    /// Adds the deletion of part `key` to `tx`, as `part` (deleting a missing part is
    /// harmless).
    ///
    /// # Errors
    /// [`StoreError`] if the operation cannot be built.
    pub fn stage_delete(
        &self,
        tx: &mut Transaction,
        part: Part,
        tenant: &TenantId,
        key: &str,
    ) -> Result<(), StoreError> {
        let delete = Delete::builder().table_name(self.tables.name(Table::Blobs)).set_key(Some(Self::key(tenant, key)));
        tx.push(part, TransactWriteItem::builder().delete(built(delete.build())?).build());
        Ok(())
    }

    /// The parts with these keys, by key (missing ones are left out), strongly
    /// consistent, 100 keys a call.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn read(&self, tenant: &TenantId, keys: &[String]) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        let keys = keys.iter().map(|k| Self::key(tenant, k)).collect();
        let items = batch_get(&self.client, self.tables.name(Table::Blobs), keys).await?;
        Ok(items
            .into_iter()
            .map(|mut item| {
                let part = item.remove("part").and_then(|v| v.as_s().ok().cloned()).unwrap_or_default();
                let data =
                    item.remove("data").and_then(|v| v.as_b().ok().map(|b| b.as_ref().to_vec())).unwrap_or_default();
                (part, data)
            })
            .collect())
    }
}
