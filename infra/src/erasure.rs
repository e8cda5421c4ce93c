//! Deleting a tenant (`cairn-admin tenant delete`): every item of the tenant in every
//! table, its keys revoked first, and a report of what was deleted and when, at once.
//! The work is `domain::erasure`'s, which the janitor also runs, in steps, for a
//! deletion the tenant asked for itself.

use anyhow::{Result, anyhow, bail};
use aws_sdk_dynamodb::Client;
use domain::erasure::{Erasures, Report};
use shared::dynamo::{Table, Tables};
use shared::ids::TenantKey;

/// Deletes tenant `tenant` and everything it owns; answers the report.
///
/// # Errors
/// An unknown tenant, a live subscription, storage errors, or items still being written
/// after [`domain::erasure::MAX_PASSES`] passes.
pub async fn delete_tenant(client: &Client, tables: &Tables, tenant: &str) -> Result<Report> {
    let id = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    if shared::dynamo::get_item(client, tables.name(Table::Tenants), &[("tenant_id", id.as_str())]).await?.is_none() {
        bail!("unknown tenant {tenant}");
    }
    let owner = shared::auth::trusted::tenant(&id);
    Erasures::new(client.clone(), tables.clone()).delete_now(&owner).await.map_err(|e| anyhow!("{e}"))
}
