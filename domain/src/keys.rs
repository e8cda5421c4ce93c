//! A tenant's API keys: list, create, revoke (a tenant through the API, an operator
//! through `cairn-admin`, which creates and revokes keys through this module only).
//!
//! Table `api-keys` (`key_hash`): one item per key, holding the SHA-256 of the secret,
//! never the secret; GSIs `by_tenant` (`tenant_id`, `key_id`; all attributes) for the
//! listing and `by_key_id` (keys only) to find a key by its public id. The tenant's
//! item (table `tenants`) counts its live keys (`live_keys`), changed in the
//! transaction that creates or revokes a key, so that the last live key cannot be
//! revoked even by two revocations at once. A revocation also moves the tenant's keys
//! epoch on in the same transaction ([`shared::rate_limit::keys_changed`]): that is how
//! every warm instance learns of it on its tenant's next request.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use shared::TenantId;
use shared::auth::{ApiKeyRecord, generate_key, hash_key, is_well_formed_key};
use shared::dynamo::{
    Attempt, Part, StoreError, Table, Tables, Transaction, TransactionError, built, classify, n, retry_races, s,
};
use shared::ids::KeyId;
use shared::scopes::Scopes;

use crate::Error;

/// Characters of a key kept to recognise it in listings (`cairn_` plus four).
pub const SHOWN_PREFIX_LEN: usize = 10;
/// The longest key name.
pub const NAME_MAX: usize = 100;
/// The most live (unrevoked) keys a tenant may hold at once: 409 past it.
pub const MAX_LIVE_KEYS: u64 = 100;
/// The most keys a count of a tenant's keys reaches (revoked keys stay listed).
pub const MAX_KEYS_COUNTED: u64 = 100_000;

/// An API key as its tenant sees it: never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// Its public id.
    pub id: KeyId,
    /// What the tenant called it (keys made before names existed have none).
    pub name: Option<String>,
    /// The first characters of the secret, to recognise it.
    pub prefix: String,
    /// When it was issued.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; a revoked key authenticates nothing.
    pub revoked_at: Option<DateTime<Utc>>,
    /// What it may do.
    pub scopes: Scopes,
    /// From when it authenticates nothing.
    pub expires_at: Option<DateTime<Utc>>,
}

/// What a new key is to be.
#[derive(Debug, Clone, Default)]
pub struct NewKey {
    /// Its name.
    pub name: Option<String>,
    /// What it may do.
    pub scopes: Scopes,
    /// From when it authenticates nothing.
    pub expires_at: Option<DateTime<Utc>>,
}

/// A page of a tenant's keys, newest first.
#[derive(Debug, Clone)]
pub struct KeyPage {
    /// The keys.
    pub items: Vec<Key>,
    /// Whether more follow.
    pub has_more: bool,
}

impl Key {
    fn from_record(record: &ApiKeyRecord) -> Result<Self, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("api key {}: {what}", record.key_id));
        let time = |t: &str| shared::time::parse(t).map_err(|_| corrupt("timestamp"));
        Ok(Self {
            id: KeyId::parse(&record.key_id).ok_or_else(|| corrupt("key_id"))?,
            name: record.name.clone(),
            prefix: record.key_prefix.clone(),
            created_at: time(&record.created_at)?,
            revoked_at: record.revoked_at.as_deref().map(time).transpose()?,
            scopes: Scopes::stored(record.scopes.as_deref()),
            expires_at: record.expires_at.as_deref().map(time).transpose()?,
        })
    }
}

/// What a revocation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revocation {
    /// The key as it is now: revoked.
    pub key: Key,
    /// Whether it had been revoked before (nothing changed).
    pub already: bool,
}

/// Who revokes a key, and so whether the tenant's last live key may go.
#[derive(Debug, Clone, Copy)]
enum Revoker<'a> {
    /// The tenant itself, through the API: never its last live key.
    Tenant(&'a TenantId),
    /// An operator: any key.
    Operator,
}

/// The keys of every tenant; each call is scoped to the tenant it is given (but an
/// operator's, [`KeyStore::revoke_by_operator`] and [`KeyStore::is_live`], which go by
/// the key).
#[derive(Debug, Clone)]
pub struct KeyStore {
    client: Client,
    tables: Tables,
}

impl KeyStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    /// A query of the tenant's keys in the `by_tenant` index (`:t` bound to the tenant),
    /// its key condition still to set.
    fn by_tenant(&self, tenant: &TenantId) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        self.client
            .query()
            .table_name(self.tables.name(Table::ApiKeys))
            .index_name("by_tenant")
            .expression_attribute_values(":t", s(tenant.as_str()))
    }

    /// The tenant's keys, newest first, revoked ones included. Read from the
    /// `by_tenant` index: a key created in the last second may be missing from it on
    /// DynamoDB (its indexes are eventually consistent).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list(&self, tenant: &TenantId) -> Result<Vec<Key>, Error> {
        self.records(tenant).await?.iter().map(|r| Ok(Key::from_record(r)?)).collect()
    }

    /// The tenant's key items as stored (hashes, never secrets), newest first.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn records(&self, tenant: &TenantId) -> Result<Vec<ApiKeyRecord>, Error> {
        let mut records = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .by_tenant(tenant)
                .key_condition_expression("tenant_id = :t")
                .scan_index_forward(false)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(classify)?;
            for item in out.items.unwrap_or_default() {
                records.push(serde_dynamo::from_item(item).map_err(StoreError::from)?);
            }
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(records),
            }
        }
    }

    /// A page of the tenant's keys, newest first, revoked ones included: at most
    /// `limit`, those made before key `after` (which must be the tenant's) when given.
    /// Read from the `by_tenant` index, as [`Self::list`].
    ///
    /// # Errors
    /// [`Error::NotFound`] for an `after` that is not the tenant's key; storage errors.
    pub async fn page(&self, tenant: &TenantId, after: Option<&KeyId>, limit: usize) -> Result<KeyPage, Error> {
        let mut query = self.by_tenant(tenant).scan_index_forward(false);
        query = match after {
            Some(id) => {
                self.find(id)
                    .await?
                    .filter(|record| record.tenant_id == tenant.as_str())
                    .ok_or_else(|| Error::not_found("key", id.as_str()))?;
                query
                    .key_condition_expression("tenant_id = :t AND key_id < :after")
                    .expression_attribute_values(":after", s(id.as_str()))
            }
            None => query.key_condition_expression("tenant_id = :t"),
        };
        let found = shared::dynamo::query_window(query, "key_id", 0, limit + 1).await?;
        let mut items = found
            .into_iter()
            .map(|item| Ok(Key::from_record(&serde_dynamo::from_item(item).map_err(StoreError::from)?)?))
            .collect::<Result<Vec<_>, Error>>()?;
        let has_more = items.len() > limit;
        items.truncate(limit);
        Ok(KeyPage { items, has_more })
    }

    /// How many keys the tenant has, revoked ones included (a count of the index, up to
    /// [`MAX_KEYS_COUNTED`]).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn count(&self, tenant: &TenantId) -> Result<u64, Error> {
        let query = self.by_tenant(tenant).key_condition_expression("tenant_id = :t");
        Ok(shared::dynamo::count(query, MAX_KEYS_COUNTED).await?)
    }

    /// Issues a key for the tenant, as `new` says, counted as live in the same
    /// transaction (at most [`MAX_LIVE_KEYS`]). Returns it with its secret, which is
    /// stored nowhere (only its SHA-256 is): this is the one time anybody sees it.
    /// `before_commit` sees the key (without its secret) just before the transaction is
    /// sent.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the tenant does not exist, [`Error::InvalidState`] at the
    /// cap of live keys, storage errors.
    pub async fn create(
        &self,
        tenant: &TenantId,
        new: NewKey,
        now: DateTime<Utc>,
        before_commit: crate::BeforeCommit<'_, Key>,
    ) -> Result<(Key, String), Error> {
        let secret = generate_key().map_err(|e| StoreError::Other(format!("no randomness for a key: {e}").into()))?;
        let record = ApiKeyRecord {
            key_hash: hash_key(&secret),
            key_id: KeyId::generate_at(now).to_string(),
            tenant_id: tenant.as_str().to_owned(),
            name: new.name,
            key_prefix: secret.chars().take(SHOWN_PREFIX_LEN).collect(),
            created_at: shared::time::format(now),
            revoked_at: None,
            scopes: new.scopes.to_stored(),
            expires_at: new.expires_at.map(shared::time::format),
        };
        let put = Put::builder()
            .table_name(self.tables.name(Table::ApiKeys))
            .set_item(Some(serde_dynamo::to_item(&record).map_err(StoreError::from)?))
            .condition_expression("attribute_not_exists(key_hash)");
        let count = Update::builder()
            .table_name(self.tables.name(Table::Tenants))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET live_keys = if_not_exists(live_keys, :zero) + :one")
            .condition_expression(
                "attribute_exists(tenant_id) AND (attribute_not_exists(live_keys) OR live_keys < :cap)",
            )
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":cap", n(MAX_LIVE_KEYS));
        let mut tx = Transaction::new();
        tx.push(Part::Tenant, TransactWriteItem::builder().update(built(count.build())?).build());
        tx.push(Part::ApiKey, TransactWriteItem::builder().put(built(put.build())?).build());
        let key = Key::from_record(&record)?;
        before_commit(&key);
        match tx.commit(&self.client).await {
            Ok(()) => Ok((key, secret)),
            Err(TransactionError::Condition(Part::Tenant)) => {
                let item = shared::dynamo::get_item(
                    &self.client,
                    self.tables.name(Table::Tenants),
                    &[("tenant_id", tenant.as_str())],
                )
                .await?;
                if item.is_none() {
                    return Err(Error::not_found("tenant", tenant.as_str()));
                }
                Err(Error::InvalidState(format!(
                    "the tenant has {MAX_LIVE_KEYS} live keys, the most it may hold; revoke one it no longer uses first"
                )))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Key `id` as stored, whoever's it is: its item's hash from the `by_key_id` index,
    /// then the item.
    async fn find(&self, id: &KeyId) -> Result<Option<ApiKeyRecord>, Error> {
        let out = self
            .client
            .query()
            .table_name(self.tables.name(Table::ApiKeys))
            .index_name("by_key_id")
            .key_condition_expression("key_id = :k")
            .expression_attribute_values(":k", s(id.as_str()))
            .send()
            .await
            .map_err(classify)?;
        let Some(hash) =
            out.items.unwrap_or_default().into_iter().find_map(|item| item.get("key_hash")?.as_s().ok().cloned())
        else {
            return Ok(None);
        };
        self.by_hash(&hash).await
    }

    /// The key item whose hash is `hash` (a consistent read).
    async fn by_hash(&self, hash: &str) -> Result<Option<ApiKeyRecord>, Error> {
        let item =
            shared::dynamo::get_item(&self.client, self.tables.name(Table::ApiKeys), &[("key_hash", hash)]).await?;
        Ok(item.map(serde_dynamo::from_item::<_, ApiKeyRecord>).transpose().map_err(StoreError::from)?)
    }

    /// Whether `secret` authenticates right now: well formed, known, not revoked.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn is_live(&self, secret: &str) -> Result<bool, Error> {
        if !is_well_formed_key(secret) {
            return Ok(false);
        }
        Ok(self.by_hash(&hash_key(secret)).await?.is_some_and(|record| record.revoked_at.is_none()))
    }

    /// Revokes the tenant's key `id`: from then on it authenticates nothing. Revoking a
    /// revoked key changes nothing. The tenant's last live key cannot be revoked.
    ///
    /// # Errors
    /// [`Error::NotFound`] (unknown, or another tenant's), [`Error::InvalidState`] for
    /// the last live key, storage errors.
    pub async fn revoke(&self, tenant: &TenantId, id: &KeyId, now: DateTime<Utc>) -> Result<Key, Error> {
        let record = self
            .find(id)
            .await?
            .filter(|record| record.tenant_id == tenant.as_str())
            .ok_or_else(|| Error::not_found("key", id.as_str()))?;
        Ok(self.revoke_record(&record, Revoker::Tenant(tenant), now).await?.key)
    }

    /// Revokes key `id`, whoever's it is, as an operator (`cairn-admin`) does: any key,
    /// the tenant's last live key included, its tenant's count of live keys (when it has
    /// one yet) moved down. Otherwise as [`Self::revoke`]: the tenant's keys epoch moves on
    /// in the same transaction, so the key is refused on its very next request, and a
    /// revoked key stays as it is ([`Revocation::already`]).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown key, or a key whose tenant is missing (`tenant`),
    /// storage errors.
    pub async fn revoke_by_operator(&self, id: &KeyId, now: DateTime<Utc>) -> Result<Revocation, Error> {
        let record = self.find(id).await?.ok_or_else(|| Error::not_found("key", id.as_str()))?;
        self.revoke_record(&record, Revoker::Operator, now).await
    }

    /// Revokes the key `record` (as found), as `by` may: read again, then one transaction
    /// of the key's revocation, the tenant's count of live keys and its keys epoch (which
    /// every request's look reads, `shared::gate`), retried on a race.
    async fn revoke_record(
        &self,
        record: &ApiKeyRecord,
        by: Revoker<'_>,
        now: DateTime<Utc>,
    ) -> Result<Revocation, Error> {
        let tenant_id = record.tenant_id.as_str();
        retry_races(|| async move {
            let current =
                self.by_hash(&record.key_hash).await?.ok_or_else(|| Error::not_found("key", &record.key_id))?;
            if current.revoked_at.is_some() {
                return Ok(Attempt::Done(Revocation { key: Key::from_record(&current)?, already: true }));
            }
            // The condition on the tenant's count of live keys as it goes down, if it does.
            let count = match by {
                Revoker::Tenant(tenant) => {
                    self.count_live_keys_once(tenant).await?;
                    // Never the last live key: nobody locks themselves out.
                    Some("live_keys > :one")
                }
                Revoker::Operator => {
                    let item = shared::dynamo::get_item(
                        &self.client,
                        self.tables.name(Table::Tenants),
                        &[("tenant_id", tenant_id)],
                    )
                    .await?
                    .ok_or_else(|| Error::not_found("tenant", tenant_id))?;
                    item.contains_key("live_keys").then_some("attribute_exists(live_keys)")
                }
            };
            let revoked_at = shared::time::format(now);
            let revoke = Update::builder()
                .table_name(self.tables.name(Table::ApiKeys))
                .key("key_hash", s(&current.key_hash))
                .update_expression("SET revoked_at = :now")
                .condition_expression("attribute_exists(key_hash) AND attribute_not_exists(revoked_at)")
                .expression_attribute_values(":now", s(&revoked_at));
            let mut tx = Transaction::new();
            tx.push(Part::ApiKey, TransactWriteItem::builder().update(built(revoke.build())?).build());
            if let Some(condition) = count {
                let count = Update::builder()
                    .table_name(self.tables.name(Table::Tenants))
                    .key("tenant_id", s(tenant_id))
                    .update_expression("SET live_keys = live_keys - :one")
                    .condition_expression(condition)
                    .expression_attribute_values(":one", n(1));
                tx.push(Part::Tenant, TransactWriteItem::builder().update(built(count.build())?).build());
            }
            tx.push(Part::Standing, shared::rate_limit::keys_changed(&self.tables, tenant_id)?);
            match tx.commit(&self.client).await {
                Ok(()) => {
                    let mut revoked = current.clone();
                    revoked.revoked_at = Some(revoked_at);
                    Ok(Attempt::Done(Revocation { key: Key::from_record(&revoked)?, already: false }))
                }
                Err(TransactionError::Condition(Part::Tenant)) if matches!(by, Revoker::Tenant(_)) => {
                    Err(Error::InvalidState(format!(
                        "key {} is the tenant's last live key; create another before revoking it",
                        record.key_id
                    )))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[Part::ApiKey, Part::Tenant])?),
            }
        })
        .await
    }

    /// Tenants whose keys were issued before keys were counted have no `live_keys`:
    /// count them once (the index may lag a key made in the last second; the count
    /// only guards the last key, and a later revocation reads it again).
    async fn count_live_keys_once(&self, tenant: &TenantId) -> Result<(), Error> {
        let item =
            shared::dynamo::get_item(&self.client, self.tables.name(Table::Tenants), &[("tenant_id", tenant.as_str())])
                .await?;
        if item.is_some_and(|item| item.contains_key("live_keys")) {
            return Ok(());
        }
        let live = self.list(tenant).await?.iter().filter(|k| k.revoked_at.is_none()).count();
        let set = self
            .client
            .update_item()
            .table_name(self.tables.name(Table::Tenants))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET live_keys = :live")
            .condition_expression("attribute_exists(tenant_id) AND attribute_not_exists(live_keys)")
            .expression_attribute_values(":live", n(live as u64))
            .send()
            .await
            .map_err(classify);
        match set {
            Ok(_) | Err(StoreError::ConditionFailed { .. }) => Ok(()),
            Err(other) => Err(other.into()),
        }
    }
}
