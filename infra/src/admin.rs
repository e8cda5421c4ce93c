//! The operations of `cairn-admin`, the dashboard's stand-in: tenants and API keys.

use anyhow::{Context, Result, anyhow, bail};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem};
use shared::auth::{ApiKeyRecord, TenantRecord, generate_key, hash_key, is_well_formed_key};
use shared::dynamo::{StoreError, Table, Tables, classify, s, transact};
use shared::ids::{KeyId, TenantKey};

/// Characters of a key kept for listings (`cairn_` plus four).
const SHOWN_PREFIX_LEN: usize = 10;

/// Creates a tenant and returns its id.
///
/// # Errors
/// When DynamoDB cannot be written.
pub async fn create_tenant(client: &Client, tables: &Tables, name: &str, now: &str) -> Result<TenantKey> {
    if name.trim().is_empty() || name.chars().count() > 200 {
        bail!("the tenant name must be 1 to 200 characters");
    }
    let id = TenantKey::generate();
    let record = TenantRecord { tenant_id: id.to_string(), name: name.to_owned(), created_at: now.to_owned() };
    client
        .put_item()
        .table_name(tables.name(Table::Tenants))
        .set_item(Some(serde_dynamo::to_item(record)?))
        .condition_expression("attribute_not_exists(tenant_id)")
        .send()
        .await
        .map_err(classify)
        .context("writing the tenant")?;
    Ok(id)
}

/// Issues a new API key for an existing tenant. Returns the key's id and the key
/// itself, which is not stored anywhere: only its SHA-256 is.
///
/// # Errors
/// When the tenant does not exist, or DynamoDB cannot be written.
pub async fn create_key(client: &Client, tables: &Tables, tenant: &str, now: &str) -> Result<(KeyId, String)> {
    let tenant = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    let key = generate_key().map_err(|e| anyhow!("no randomness: {e}"))?;
    let id = KeyId::generate();
    let record = ApiKeyRecord {
        key_hash: hash_key(&key),
        key_id: id.to_string(),
        tenant_id: tenant.to_string(),
        key_prefix: key.chars().take(SHOWN_PREFIX_LEN).collect(),
        created_at: now.to_owned(),
        revoked_at: None,
    };
    let tenant_exists = ConditionCheck::builder()
        .table_name(tables.name(Table::Tenants))
        .key("tenant_id", s(tenant.as_str()))
        .condition_expression("attribute_exists(tenant_id)")
        .build()?;
    let put = Put::builder()
        .table_name(tables.name(Table::ApiKeys))
        .set_item(Some(serde_dynamo::to_item(record)?))
        .condition_expression("attribute_not_exists(key_hash)")
        .build()?;
    let items = vec![
        TransactWriteItem::builder().condition_check(tenant_exists).build(),
        TransactWriteItem::builder().put(put).build(),
    ];
    match transact(client, items).await {
        Ok(()) => Ok((id, key)),
        Err(StoreError::ConditionFailed { index: Some(0) }) => bail!("unknown tenant {tenant}"),
        Err(other) => Err(other).context("writing the key"),
    }
}

/// The keys of a tenant, oldest first, revoked ones included.
///
/// # Errors
/// When the tenant does not exist, or DynamoDB cannot be read.
pub async fn list_keys(client: &Client, tables: &Tables, tenant: &str) -> Result<Vec<ApiKeyRecord>> {
    let tenant = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    let found = client
        .get_item()
        .table_name(tables.name(Table::Tenants))
        .key("tenant_id", s(tenant.as_str()))
        .send()
        .await
        .map_err(classify)?;
    if found.item.is_none() {
        bail!("unknown tenant {tenant}");
    }
    let out = client
        .query()
        .table_name(tables.name(Table::ApiKeys))
        .index_name("by_tenant")
        .key_condition_expression("tenant_id = :t")
        .expression_attribute_values(":t", s(tenant.as_str()))
        .send()
        .await
        .map_err(classify)?;
    out.items.unwrap_or_default().into_iter().map(|item| Ok(serde_dynamo::from_item(item)?)).collect()
}

/// What revoking did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// The key was live and is now revoked.
    Now,
    /// The key had been revoked before; nothing changed.
    Already,
}

/// Revokes a key by its id; it authenticates nothing from then on.
///
/// # Errors
/// When no key has that id, or DynamoDB cannot be written.
pub async fn revoke_key(client: &Client, tables: &Tables, key_id: &str, now: &str) -> Result<Revoked> {
    let id = KeyId::parse(key_id).ok_or_else(|| anyhow!("unknown key {key_id}"))?;
    let out = client
        .query()
        .table_name(tables.name(Table::ApiKeys))
        .index_name("by_key_id")
        .key_condition_expression("key_id = :k")
        .expression_attribute_values(":k", s(id.as_str()))
        .send()
        .await
        .map_err(classify)?;
    let hash = out
        .items
        .unwrap_or_default()
        .into_iter()
        .find_map(|item| item.get("key_hash").and_then(|v| v.as_s().ok()).cloned())
        .ok_or_else(|| anyhow!("unknown key {key_id}"))?;
    let result = client
        .update_item()
        .table_name(tables.name(Table::ApiKeys))
        .key("key_hash", s(hash))
        .update_expression("SET revoked_at = :now")
        .condition_expression("attribute_exists(key_hash) AND attribute_not_exists(revoked_at)")
        .expression_attribute_values(":now", s(now))
        .send()
        .await
        .map_err(classify);
    match result {
        Ok(_) => Ok(Revoked::Now),
        Err(StoreError::ConditionFailed { .. }) => Ok(Revoked::Already),
        Err(other) => Err(other).context("revoking the key"),
    }
}

/// Whether `key` authenticates right now (well formed, known, not revoked).
///
/// # Errors
/// When DynamoDB cannot be read.
pub async fn key_is_live(client: &Client, tables: &Tables, key: &str) -> Result<bool> {
    if !is_well_formed_key(key) {
        return Ok(false);
    }
    let out = client
        .get_item()
        .table_name(tables.name(Table::ApiKeys))
        .key("key_hash", s(hash_key(key)))
        .consistent_read(true)
        .send()
        .await
        .map_err(classify)?;
    Ok(out.item.is_some_and(|item| !item.contains_key("revoked_at")))
}

/// Grants `credits` to a tenant: a `topup` ledger entry described as a manual grant.
/// Returns the balance after.
///
/// # Errors
/// When the tenant does not exist, the amount is out of range, or storage fails.
pub async fn grant_credits(client: &Client, tables: &Tables, tenant: &str, credits: i64) -> Result<i64> {
    if !(1..=10_000_000).contains(&credits) {
        bail!("--credits must be a whole number from 1 to 10000000");
    }
    let id = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    let found = client
        .get_item()
        .table_name(tables.name(Table::Tenants))
        .key("tenant_id", s(id.as_str()))
        .consistent_read(true)
        .send()
        .await
        .map_err(classify)?;
    if found.item.is_none() {
        bail!("unknown tenant {tenant}");
    }
    let ledger = domain::credits::Ledger::new(client.clone(), tables.clone());
    let entry = domain::credits::NewEntry {
        kind: domain::credits::EntryType::Topup,
        amount: credits,
        description: "Manual grant".to_owned(),
        payment_status: Some("completed".to_owned()),
    };
    let tenant = shared::auth::trusted::tenant(&id);
    let stored = ledger.record(&tenant, entry, &shared::time::SystemClock).await.map_err(|e| anyhow!("{e}"))?;
    Ok(stored.credits_after)
}

/// The credits of a tenant.
///
/// # Errors
/// When storage fails.
pub async fn balance(client: &Client, tables: &Tables, tenant: &TenantKey) -> Result<i64> {
    let ledger = domain::credits::Ledger::new(client.clone(), tables.clone());
    Ok(ledger.account(&shared::auth::trusted::tenant(tenant)).await?.credits)
}
