//! The operations of `cairn-admin`, the dashboard's stand-in: tenants, API keys (created,
//! listed and revoked through `domain::keys`) and credits.

use anyhow::{Context, Result, anyhow, bail};
use aws_sdk_dynamodb::Client;
use shared::auth::{ApiKeyRecord, TenantRecord};
use shared::dynamo::{Table, Tables, classify, s};
use shared::ids::{KeyId, TenantKey};

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

/// Issues a new API key for an existing tenant (through the keys area's own store, so
/// the tenant's count of live keys stays right). Returns the key's id and the key
/// itself, which is not stored anywhere: only its SHA-256 is.
///
/// # Errors
/// When the tenant does not exist, or DynamoDB cannot be written.
pub async fn create_key(client: &Client, tables: &Tables, tenant: &str, now: &str) -> Result<(KeyId, String)> {
    let id = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    let now = shared::time::parse(now).map_err(|e| anyhow!("{e}"))?;
    let store = domain::keys::KeyStore::new(client.clone(), tables.clone());
    match store
        .create(
            &shared::auth::trusted::tenant(&id),
            domain::keys::NewKey { name: Some("Created by cairn-admin".to_owned()), ..Default::default() },
            now,
            &|_| (),
        )
        .await
    {
        Ok((key, secret)) => Ok((key.id, secret)),
        Err(domain::Error::NotFound { .. }) => bail!("unknown tenant {tenant}"),
        Err(other) => Err(anyhow!("writing the key: {other}")),
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
    let store = domain::keys::KeyStore::new(client.clone(), tables.clone());
    let mut records = store.records(&shared::auth::trusted::tenant(&tenant)).await.map_err(|e| anyhow!("{e}"))?;
    records.reverse();
    Ok(records)
}

/// What revoking did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// The key was live and is now revoked.
    Now,
    /// The key had been revoked before; nothing changed.
    Already,
}

/// Revokes a key by its id, whoever's it is, the tenant's last live key included
/// (through `domain::keys`, as the keys area revokes: the tenant's keys epoch moves in
/// the same transaction, so the key is refused on its very next request); it
/// authenticates nothing from then on.
///
/// # Errors
/// When no key has that id, its tenant is missing, or DynamoDB cannot be written.
pub async fn revoke_key(client: &Client, tables: &Tables, key_id: &str, now: &str) -> Result<Revoked> {
    let id = KeyId::parse(key_id).ok_or_else(|| anyhow!("unknown key {key_id}"))?;
    let now = shared::time::parse(now).map_err(|e| anyhow!("{e}"))?;
    let store = domain::keys::KeyStore::new(client.clone(), tables.clone());
    match store.revoke_by_operator(&id, now).await {
        Ok(revocation) if revocation.already => Ok(Revoked::Already),
        Ok(_) => Ok(Revoked::Now),
        Err(domain::Error::NotFound { kind: "tenant", id }) => bail!("the key's tenant {id} is missing"),
        Err(domain::Error::NotFound { .. }) => bail!("unknown key {key_id}"),
        Err(other) => Err(anyhow!("revoking the key: {other}")),
    }
}

/// Whether `key` authenticates right now (well formed, known, not revoked).
///
/// # Errors
/// When DynamoDB cannot be read.
pub async fn key_is_live(client: &Client, tables: &Tables, key: &str) -> Result<bool> {
    let store = domain::keys::KeyStore::new(client.clone(), tables.clone());
    store.is_live(key).await.map_err(|e| anyhow!("reading the key: {e}"))
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

/// Sets the tenant's low-balance threshold (`credits.low`).
///
/// # Errors
/// An unknown tenant, a threshold out of range, storage errors.
pub async fn set_low_balance_threshold(client: &Client, tables: &Tables, tenant: &str, credits: i64) -> Result<()> {
    if !(0..=10_000_000).contains(&credits) {
        bail!("--credits must be a whole number from 0 to 10000000");
    }
    let id = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    if shared::dynamo::get_item(client, tables.name(Table::Tenants), &[("tenant_id", id.as_str())]).await?.is_none() {
        bail!("unknown tenant {tenant}");
    }
    let ledger = domain::credits::Ledger::new(client.clone(), tables.clone());
    ledger.set_low_balance_threshold(&shared::auth::trusted::tenant(&id), credits).await?;
    Ok(())
}

/// The credits of a tenant.
///
/// # Errors
/// When storage fails.
pub async fn balance(client: &Client, tables: &Tables, tenant: &TenantKey) -> Result<i64> {
    let ledger = domain::credits::Ledger::new(client.clone(), tables.clone());
    Ok(ledger.balance(&shared::auth::trusted::tenant(tenant)).await?)
}

/// What `cairn-admin history` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct History {
    /// When the executions start (and end).
    pub at: chrono::DateTime<chrono::Utc>,
    /// The status they are left in.
    pub status: domain::runs::executions::model::ExecutionStatus,
    /// How many.
    pub count: u32,
}

/// Starts `count` executions of the tenant's workflow `workflow` (or of a new published
/// workflow "Backfilled history") at `at`, a time in the past, and moves them to
/// `status` at the same instant, through the same operations as the API (each start is
/// charged; each failure is recorded): for charts with a history, in the demo and the
/// tests. Returns the workflow's id.
///
/// # Errors
/// An unknown tenant or workflow, a future `at`, too few credits, storage errors.
pub async fn history(
    client: &Client,
    tables: &Tables,
    tenant: &str,
    workflow: Option<&str>,
    made: History,
) -> Result<String> {
    use domain::runs::executions::model::{Action, ExecutionError, ExecutionStatus};
    use domain::runs::{Change, NewExecution, Runs};
    use domain::workflows::model::{NewWorkflow, WorkflowStatus, WorkflowType};

    let id = TenantKey::parse(tenant).ok_or_else(|| anyhow!("unknown tenant {tenant}"))?;
    let tenant = shared::auth::trusted::tenant(&id);
    if made.at > chrono::Utc::now() {
        bail!("--at must be in the past");
    }
    if !(1..=1000).contains(&made.count) {
        bail!("--count must be 1 to 1000");
    }
    let clock = shared::time::ManualClock::new(made.at);
    let workflows = domain::workflows::store::WorkflowStore::new(client.clone(), tables.clone());
    let workflow = match workflow {
        Some(raw) => {
            let wf = shared::ids::WorkflowId::parse(raw).ok_or_else(|| anyhow!("{raw} is not a workflow id"))?;
            workflows.get(&tenant, &wf).await?.ok_or_else(|| anyhow!("unknown workflow {raw}"))?.id
        }
        None => {
            let new = NewWorkflow {
                name: "Backfilled history".to_owned(),
                description: Some("Made by cairn-admin history".to_owned()),
                workflow_type: WorkflowType::Custom,
                status: WorkflowStatus::Published,
                definition: None,
                metadata: std::collections::BTreeMap::new(),
                retention: None,
            };
            domain::workflows::create(&workflows, &tenant, new, made.at, &|_| {}).await?.id
        }
    };
    let runs = Runs::new(client.clone(), tables.clone(), shared::config::execution_cost_credits());
    let change = match made.status {
        ExecutionStatus::Running => None,
        ExecutionStatus::Completed => Some(Change::Plain(Action::Complete { output: None })),
        ExecutionStatus::Paused => Some(Change::Plain(Action::Pause)),
        ExecutionStatus::Cancelled => Some(Change::Plain(Action::Cancel { reason: None })),
        ExecutionStatus::Failed => Some(Change::Fail {
            error: ExecutionError { error_type: "AGENT_ERROR".to_owned(), message: "backfilled failure".to_owned() },
            details: serde_json::Map::new(),
        }),
    };
    for _ in 0..made.count {
        let new = NewExecution {
            workflow_id: workflow.clone(),
            key: None,
            input: None,
            metadata: std::collections::BTreeMap::new(),
            tags: std::collections::BTreeMap::new(),
        };
        let execution = match runs.start(&tenant, &new, &clock, &|_| {}).await? {
            domain::runs::Started::New(e) | domain::runs::Started::Existing(e) => e,
        };
        if let Some(change) = &change {
            runs.transition(&tenant, &execution.id, change, &clock, &|_| {}).await?;
        }
    }
    Ok(workflow.to_string())
}
