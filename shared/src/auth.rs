//! Authentication and tenant scoping.
//!
//! A request carries its API key as `X-API-Key: <key>` or `Authorization: Bearer <key>`
//! (`X-API-Key` wins when both are sent). The key is looked up by its SHA-256 in the
//! API-keys table; unknown or revoked keys are 401. The result is a [`TenantId`], which
//! nothing else in the functions can make, and which every store call takes first.

use aws_sdk_dynamodb::Client;
use axum::extract::FromRequestParts;
use http::request::Parts;
use http::{HeaderMap, header};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::dynamo::{Table, Tables, get_item};
use crate::error::ApiError;
use crate::ids::TenantKey;
use crate::scopes::Scopes;

/// The tenant a request acts for. Only authentication (and the admin command line,
/// through [`trusted::tenant`]) can make one, so a store call cannot be made for a
/// tenant the caller has not proved to be.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TenantId(String);

impl TenantId {
    /// The tenant id as text, for partition keys and logs.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<S: Send + Sync> FromRequestParts<S> for TenantId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Self>()
            .cloned()
            .ok_or_else(|| ApiError::internal("route is served without the authentication layer"))
    }
}

/// Making a [`TenantId`] without a request: for the admin command line only.
/// A test keeps function code from calling this.
pub mod trusted {
    use super::TenantId;
    use crate::ids::TenantKey;

    /// The [`TenantId`] of a tenant the operator names.
    #[must_use]
    pub fn tenant(id: &TenantKey) -> TenantId {
        TenantId(id.as_str().to_owned())
    }
}

/// The tenant of a record found by maintenance (the janitor finishing a deletion the
/// tenant started): the tenant is the partition the record was read from, never a name a
/// caller gives. A test allows this in one place only, the store that lists unfinished
/// deletions.
pub mod stored {
    use super::TenantId;
    use crate::ids::TenantKey;

    /// The owner of a record read from partition `tenant_id` (`None`: not a tenant id).
    #[must_use]
    pub fn owner(tenant_id: &str) -> Option<TenantId> {
        TenantKey::parse(tenant_id).map(|t| TenantId(t.as_str().to_owned()))
    }
}

/// Stripe webhooks: authenticated by their `Stripe-Signature`, not by an API key.
pub mod stripe {
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    use super::TenantId;
    use crate::error::ApiError;
    use crate::ids::TenantKey;

    /// How far a signature's timestamp may be from now.
    pub const TOLERANCE_SECS: i64 = 300;

    /// A webhook payload whose signature was verified. Only [`verify`] makes one, and
    /// only a verified payload can name the tenant it is about.
    #[derive(Debug)]
    pub struct Verified<'a>(&'a [u8]);

    impl Verified<'_> {
        /// The payload.
        #[must_use]
        pub fn payload(&self) -> &[u8] {
            self.0
        }

        /// The tenant a verified event names (from metadata Cairn itself set).
        #[must_use]
        pub fn tenant(&self, id: &str) -> Option<TenantId> {
            TenantKey::parse(id).map(|t| TenantId(t.as_str().to_owned()))
        }
    }

    fn refused(why: &str) -> ApiError {
        ApiError::MalformedRequest(format!("the Stripe-Signature header is {why}"))
    }

    /// Verifies `header` (`t=<unix time>,v1=<hex>[,v1=…]`) over `payload` with
    /// `secret`: HMAC-SHA256 of `t.payload`, any `v1` may match (compared in constant
    /// time), and `t` must be within [`TOLERANCE_SECS`] of `now`.
    ///
    /// # Errors
    /// 400 `malformed_request` for a missing, malformed, stale or non-matching signature.
    pub fn verify<'a>(
        header: Option<&str>,
        payload: &'a [u8],
        secret: &str,
        now: i64,
    ) -> Result<Verified<'a>, ApiError> {
        let header = header.ok_or_else(|| refused("missing"))?;
        let mut timestamp = None;
        let mut signatures = Vec::new();
        for part in header.split(',') {
            match part.trim().split_once('=') {
                Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
                Some(("v1", v)) => signatures.extend(hex::decode(v).ok()),
                _ => {}
            }
        }
        let timestamp = timestamp.ok_or_else(|| refused("malformed (no timestamp)"))?;
        if signatures.is_empty() {
            return Err(refused("malformed (no v1 signature)"));
        }
        if (now - timestamp).abs() > TOLERANCE_SECS {
            return Err(refused("too old or from the future"));
        }
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| refused("unverifiable"))?;
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(payload);
        let matches = signatures.iter().any(|signature| mac.clone().verify_slice(signature).is_ok());
        if matches { Ok(Verified(payload)) } else { Err(refused("not a valid signature of this payload")) }
    }

    /// Signs `payload` as Stripe does (for tests and the local Stripe stand-in).
    #[must_use]
    pub fn sign(payload: &[u8], secret: &str, timestamp: i64) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
        mac.update(format!("{timestamp}.").as_bytes());
        mac.update(payload);
        format!("t={timestamp},v1={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        const SECRET: &str = "whsec_test";

        #[test]
        fn a_signature_of_the_payload_within_tolerance_verifies() {
            let header = sign(b"{}", SECRET, 1_000);
            assert!(verify(Some(&header), b"{}", SECRET, 1_000 + TOLERANCE_SECS).is_ok());
            let with_old = format!("t=1000,v1={},{}", "00".repeat(32), &header[7..]);
            assert!(verify(Some(&with_old), b"{}", SECRET, 1_000).is_ok(), "any v1 may match");
        }

        #[test]
        fn forged_stale_tampered_and_missing_signatures_are_refused() {
            let header = sign(b"{}", SECRET, 1_000);
            assert!(verify(Some(&sign(b"{}", "whsec_other", 1_000)), b"{}", SECRET, 1_000).is_err());
            assert!(verify(Some(&header), b"{}", SECRET, 1_000 + TOLERANCE_SECS + 1).is_err());
            assert!(verify(Some(&header), b"{ }", SECRET, 1_000).is_err());
            assert!(verify(None, b"{}", SECRET, 1_000).is_err());
            assert!(verify(Some("v1=abc"), b"{}", SECRET, 1_000).is_err());
            assert!(verify(Some("t=1000"), b"{}", SECRET, 1_000).is_err());
        }
    }
}

/// Every API key starts with this.
pub const KEY_PREFIX: &str = "cairn_";
/// Base62 characters of a key after the prefix (32 random bytes).
const KEY_BODY_LEN: usize = 43;
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A new API key: `cairn_` plus 32 random bytes in base62.
///
/// # Errors
/// When the operating system's random source fails.
pub fn generate_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{KEY_PREFIX}{}", base62(&bytes)))
}

/// Big-endian base62 of `bytes`, left-padded with `0` to a fixed width.
fn base62(bytes: &[u8; 32]) -> String {
    let mut number = bytes.to_vec();
    let mut digits = Vec::with_capacity(KEY_BODY_LEN);
    while number.iter().any(|b| *b != 0) {
        let mut remainder = 0_u32;
        for byte in &mut number {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = (value / 62) as u8;
            remainder = value % 62;
        }
        digits.push(BASE62[remainder as usize]);
    }
    digits.resize(KEY_BODY_LEN, b'0');
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// Whether `key` has the shape of an API key (checked before any lookup).
#[must_use]
pub fn is_well_formed_key(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX)
        .is_some_and(|body| body.len() == KEY_BODY_LEN && body.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// How many revocation markers a key revoked by an earlier version may have: that
/// version's revocation wrote every one and its writes checked one at random. Nothing
/// reads or writes them now ([`crate::gate`] proves a key by the keys epoch); a
/// tenant's deletion deletes those left.
pub const REVOCATION_MARKERS: u8 = 16;

/// The key (`key_hash`) of revocation marker `marker` of the key whose hash is `hash`
/// (in table `api-keys`, with no other attribute a key has: no index lists it), as an
/// earlier version wrote it.
#[must_use]
pub fn revocation_marker(hash: &str, marker: u8) -> String {
    format!("{hash}#revoked#{marker:02}")
}

/// The stored form of a key: lowercase hex SHA-256.
#[must_use]
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// An API key's record, keyed by `key_hash`. The key itself is never stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiKeyRecord {
    /// SHA-256 of the key, hex.
    pub key_hash: String,
    /// The key's public id.
    pub key_id: String,
    /// The tenant the key acts for.
    pub tenant_id: String,
    /// What the tenant called it (keys made before names existed have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The first characters of the key, to tell keys apart in listings.
    pub key_prefix: String,
    /// When it was issued.
    pub created_at: String,
    /// When it was revoked; a revoked key authenticates nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
    /// What it may do ([`crate::scopes`]); absent: everything (every key made before
    /// scopes existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// From when it authenticates nothing; absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// What a live key grants: its tenant, its scopes, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The tenant it acts for.
    pub tenant: TenantId,
    /// What it may do.
    pub scopes: Scopes,
    /// From when it authenticates nothing.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Grant {
    /// Whether the key has expired at `now` (from its `expires_at` on, exactly).
    #[must_use]
    pub fn expired(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// A tenant's record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TenantRecord {
    /// The tenant's id.
    pub tenant_id: String,
    /// A display name.
    pub name: String,
    /// When it was created.
    pub created_at: String,
}

/// The key a request presents, if any: `X-API-Key` first, then a Bearer token.
/// Any other `Authorization` scheme presents no key.
#[must_use]
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(key) = headers.get("x-api-key") {
        return key.to_str().ok().map(str::trim);
    }
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Resolves the request's API key to its tenant.
///
/// # Errors
/// [`ApiError::Unauthorized`] for a missing, malformed, unknown or revoked key;
/// [`ApiError::Unavailable`] when the key cannot be looked up.
pub async fn authenticate(client: &Client, tables: &Tables, headers: &HeaderMap) -> Result<TenantId, ApiError> {
    let key = presented_key(headers).filter(|k| is_well_formed_key(k)).ok_or(ApiError::Unauthorized)?;
    Ok(grant_of(client, tables, &hash_key(key)).await?.tenant)
}

/// The hash of the request's API key, when it presents a well-formed one.
#[must_use]
pub fn presented_hash(headers: &HeaderMap) -> Option<String> {
    presented_key(headers).filter(|k| is_well_formed_key(k)).map(hash_key)
}

/// What the live key whose hash is `hash` grants (one consistent read).
///
/// # Errors
/// [`ApiError::Unauthorized`] for an unknown, revoked or expired key;
/// [`ApiError::Unavailable`] when the key cannot be looked up.
pub async fn grant_of(client: &Client, tables: &Tables, hash: &str) -> Result<Grant, ApiError> {
    let item = get_item(client, tables.name(Table::ApiKeys), &[("key_hash", hash)]).await?;
    let Some(item) = item else { return Err(ApiError::Unauthorized) };
    let record: ApiKeyRecord = serde_dynamo::from_item(item).map_err(crate::dynamo::StoreError::from)?;
    if record.revoked_at.is_some() {
        return Err(ApiError::Unauthorized);
    }
    let malformed = |what: &str| ApiError::internal(format!("key {} has a malformed {what}", record.key_id));
    let tenant = TenantKey::parse(&record.tenant_id).ok_or_else(|| malformed("tenant id"))?;
    let expires_at = record
        .expires_at
        .as_deref()
        .map(|at| crate::time::parse(at).map_err(|_| malformed("expires_at")))
        .transpose()?;
    let grant = Grant {
        tenant: TenantId(tenant.as_str().to_owned()),
        scopes: Scopes::stored(record.scopes.as_deref()),
        expires_at,
    };
    if grant.expired(chrono::Utc::now()) {
        return Err(ApiError::Unauthorized);
    }
    Ok(grant)
}

/// What the authentication layer needs.
#[derive(Debug, Clone)]
pub struct AuthState {
    /// The DynamoDB client.
    pub client: Client,
    /// The table names.
    pub tables: Tables,
    /// Requests per tenant and minute (0: no limit).
    pub rate_limit: u32,
    /// When set, every request must carry it in `X-Origin-Verify` (CloudFront adds it,
    /// see `template.yaml`), so that the rate limits of the edge cannot be bypassed by
    /// calling API Gateway's own endpoint; other requests are answered 404 before any
    /// DynamoDB call.
    pub origin_secret: Option<String>,
    /// Tenants of keys this instance has seen live (by key hash): a warm instance starts
    /// a read's own work at once and checks the key in parallel ([`crate::http`]).
    pub known: KnownKeys,
}

impl AuthState {
    /// The edge's state, with the rate limit from `RATE_LIMIT_PER_MINUTE` and the origin
    /// secret from `ORIGIN_VERIFY_SECRET` (unset or empty: not checked).
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        let origin_secret = std::env::var("ORIGIN_VERIFY_SECRET").ok().filter(|s| !s.is_empty());
        Self {
            client,
            tables,
            rate_limit: crate::rate_limit::per_minute_from_env(),
            origin_secret,
            known: KnownKeys::default(),
        }
    }
}

/// Key hash -> tenant, of keys an instance has seen live, and what the instance last
/// learnt of each tenant's rate-limit window and keys epoch. Never a reason to accept a
/// key by itself: every request still proves its key live ([`crate::http`],
/// [`crate::gate`]), so a revoked key is refused on its very next request.
///
/// A key is *live at epoch e* when a read of its item found it live after a count or a
/// read of its tenant's standing had returned keys epoch `e` ([`crate::rate_limit`]): a
/// revocation of the key after that read moves the epoch past `e`, so while the
/// standing still says `e` the key is still live. That proof lasts
/// [`KnownKeys::LIVE_AT_FOR`] at most.
#[derive(Debug, Clone, Default)]
pub struct KnownKeys(std::sync::Arc<std::sync::Mutex<Known>>);

#[derive(Debug, Default)]
struct Known {
    keys: std::collections::HashMap<String, Seen>,
    /// Tenant -> (window, requests left in it after the last count).
    room: std::collections::HashMap<TenantId, (i64, u32)>,
    /// Tenant -> the highest keys epoch a finished count or look at the standing returned.
    epochs: std::collections::HashMap<TenantId, u64>,
    /// Tenant -> its limit a minute as its standing last told it (its plan's, or the
    /// instance's own), which says how many shards its count is spread over.
    limits: std::collections::HashMap<TenantId, u32>,
    /// Tenant -> (window, tokens): requests of that window this instance's leases
    /// counted and it has not served yet ([`crate::rate_limit::Leased`]).
    tokens: std::collections::HashMap<TenantId, (i64, u32)>,
}

#[derive(Debug)]
struct Seen {
    grant: Grant,
    /// The epoch the key was last proven live at, and when the read that proved it was
    /// sent (wall clock: a frozen instance's monotonic clock may not count the freeze).
    live_at: Option<(u64, std::time::SystemTime)>,
}

impl KnownKeys {
    /// Keys (and tenants) one instance remembers at most (then it starts over).
    const MAX: usize = 10_000;

    /// How long a key's proof of being live at an epoch is used before the key's item is
    /// read again (beside the request's work): it bounds what a revocation written by an
    /// older version of the code, one that did not move the epoch on, could go unseen.
    pub const LIVE_AT_FOR: std::time::Duration = std::time::Duration::from_secs(300);

    /// What this key hash was last seen to grant (a key's tenant, scopes and expiry
    /// never change).
    #[must_use]
    pub fn get(&self, hash: &str) -> Option<Grant> {
        self.0.lock().ok()?.keys.get(hash).map(|seen| seen.grant.clone())
    }

    /// The keys epoch this key was proven live at, if within [`Self::LIVE_AT_FOR`].
    #[must_use]
    pub fn live_at(&self, hash: &str) -> Option<u64> {
        let known = self.0.lock().ok()?;
        let (epoch, when) = known.keys.get(hash)?.live_at?;
        // A clock that went back (an error) ends the proof too.
        when.elapsed().is_ok_and(|age| age < Self::LIVE_AT_FOR).then_some(epoch)
    }

    /// Remembers that `hash` was a live key granting `grant`; `live_at`: at that keys
    /// epoch, returned by a count before the key's item was read at the time given.
    pub fn remember(&self, hash: &str, grant: &Grant, live_at: Option<(u64, std::time::SystemTime)>) {
        if let Ok(mut known) = self.0.lock() {
            if known.keys.len() >= Self::MAX {
                known.keys.clear();
            }
            known.keys.insert(hash.to_owned(), Seen { grant: grant.clone(), live_at });
        }
    }

    /// Forgets `hash` (refused).
    pub fn forget(&self, hash: &str) {
        if let Ok(mut known) = self.0.lock() {
            known.keys.remove(hash);
        }
    }

    /// The highest keys epoch of `tenant` that a finished count or read of its standing
    /// returned.
    #[must_use]
    pub fn epoch(&self, tenant: &TenantId) -> Option<u64> {
        self.0.lock().ok()?.epochs.get(tenant).copied()
    }

    /// The requests `tenant` had left in rate-limit window `window` when this instance
    /// last counted one (`None`: it has not counted one in this window).
    #[must_use]
    pub fn room(&self, tenant: &TenantId, window: i64) -> Option<u32> {
        let known = self.0.lock().ok()?;
        known.room.get(tenant).filter(|(seen, _)| *seen == window).map(|(_, left)| *left)
    }

    /// The window this instance last counted `tenant` in.
    #[must_use]
    pub fn last_counted(&self, tenant: &TenantId) -> Option<i64> {
        self.0.lock().ok()?.room.get(tenant).map(|(window, _)| *window)
    }

    /// Notes what a count of `tenant` returned: what it left of window `window`, and the
    /// tenant's keys epoch.
    pub fn note_count(&self, tenant: &TenantId, window: i64, left: u32, keys_epoch: Option<u64>) {
        if let Ok(mut known) = self.0.lock() {
            if known.room.len() >= Self::MAX {
                known.room.clear();
                known.epochs.clear();
            }
            known.room.insert(tenant.clone(), (window, left));
        }
        self.note_epoch(tenant, keys_epoch);
    }

    /// Whether this instance holds a token of `tenant` for window `window`, or for a later
    /// one (a window a clock ahead of this instance's started, which its count joined).
    #[must_use]
    pub fn has_token(&self, tenant: &TenantId, window: i64) -> bool {
        self.0
            .lock()
            .is_ok_and(|known| known.tokens.get(tenant).is_some_and(|(seen, left)| *seen >= window && *left > 0))
    }

    /// Takes one of `tenant`'s tokens for window `window` (or a later one), if the
    /// instance holds one: the request it serves was counted by an earlier count's lease.
    /// The window of the token, or `None`.
    #[must_use]
    pub fn take_token(&self, tenant: &TenantId, window: i64) -> Option<i64> {
        let mut known = self.0.lock().ok()?;
        match known.tokens.get_mut(tenant) {
            Some((seen, left)) if *seen >= window && *left > 0 => {
                *left -= 1;
                Some(*seen)
            }
            _ => None,
        }
    }

    /// Drops `tenant`'s tokens of windows before `window` (one that a clock ahead of this
    /// instance's already ended).
    pub fn drop_tokens_before(&self, tenant: &TenantId, window: i64) {
        if let Ok(mut known) = self.0.lock()
            && known.tokens.get(tenant).is_some_and(|(seen, _)| *seen < window)
        {
            known.tokens.remove(tenant);
        }
    }

    /// Notes `tokens` more of `tenant`'s for window `window` (a lease's, or one given
    /// back by a request refused after all); those of an earlier window are dropped.
    pub fn note_tokens(&self, tenant: &TenantId, window: i64, tokens: u32) {
        if tokens == 0 {
            return;
        }
        if let Ok(mut known) = self.0.lock() {
            if known.tokens.len() >= Self::MAX {
                known.tokens.clear();
            }
            let held = known.tokens.entry(tenant.clone()).or_insert((window, 0));
            if held.0 == window {
                held.1 = held.1.saturating_add(tokens);
            } else if held.0 < window {
                *held = (window, tokens);
            }
        }
    }

    /// The limit a minute `tenant`'s standing last told this instance.
    #[must_use]
    pub fn limit(&self, tenant: &TenantId) -> Option<u32> {
        self.0.lock().ok()?.limits.get(tenant).copied()
    }

    /// Notes the limit a minute a count or a read of `tenant`'s standing returned.
    pub fn note_limit(&self, tenant: &TenantId, limit: u32) {
        if let Ok(mut known) = self.0.lock() {
            if known.limits.len() >= Self::MAX {
                known.limits.clear();
            }
            known.limits.insert(tenant.clone(), limit);
        }
    }

    /// Notes a keys epoch of `tenant` that a count or a read of its standing returned.
    pub fn note_epoch(&self, tenant: &TenantId, keys_epoch: Option<u64>) {
        if let (Ok(mut known), Some(keys_epoch)) = (self.0.lock(), keys_epoch) {
            if known.epochs.len() >= Self::MAX {
                known.epochs.clear();
            }
            let epoch = known.epochs.entry(tenant.clone()).or_insert(keys_epoch);
            *epoch = (*epoch).max(keys_epoch);
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = generate_key().expect("random");
        let b = generate_key().expect("random");
        assert!(is_well_formed_key(&a), "{a}");
        assert_eq!(a.len(), KEY_PREFIX.len() + KEY_BODY_LEN);
        assert_ne!(a, b);
    }

    #[test]
    fn base62_of_extremes() {
        assert_eq!(base62(&[0; 32]), "0".repeat(43));
        // 2^256 - 1, checked against Python's arbitrary-precision integers.
        assert_eq!(base62(&[0xff; 32]), "yhjskwdA6OZ1AL1YmHWZWm8LLG7HjnuCA2j5rOw8Xp1");
        let mut one = [0_u8; 32];
        one[31] = 61;
        assert!(base62(&one).ends_with('z'));
    }

    #[test]
    fn hash_is_hex_sha256() {
        assert_eq!(hash_key("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn x_api_key_wins_over_bearer_and_other_schemes_present_nothing() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer from-bearer"));
        assert_eq!(presented_key(&headers), Some("from-bearer"));
        headers.insert("x-api-key", HeaderValue::from_static("from-header"));
        assert_eq!(presented_key(&headers), Some("from-header"));

        let mut basic = HeaderMap::new();
        basic.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic dXNlcjpwYXNz"));
        assert_eq!(presented_key(&basic), None);
        let mut lower = HeaderMap::new();
        lower.insert(header::AUTHORIZATION, HeaderValue::from_static("bearer k"));
        assert_eq!(presented_key(&lower), Some("k"));
    }

    #[test]
    fn malformed_keys_are_refused_before_any_lookup() {
        assert!(!is_well_formed_key("cairn_short"));
        assert!(!is_well_formed_key(&format!("other_{}", "a".repeat(43))));
        assert!(!is_well_formed_key(&format!("cairn_{}!", "a".repeat(42))));
    }

    #[test]
    fn a_key_proven_live_at_an_epoch_is_so_for_five_minutes_of_wall_time_at_most() {
        use std::time::{Duration, SystemTime};
        let known = KnownKeys::default();
        let tenant = trusted::tenant(&TenantKey::parse("ten_0193a6f21c2b7d3e8f000123456789ab").expect("id"));
        let at = |age: i64| {
            let now = SystemTime::now();
            let offset = Duration::from_secs(age.unsigned_abs());
            if age >= 0 { now - offset } else { now + offset }
        };
        let grant = Grant { tenant, scopes: Scopes::full(), expires_at: None };
        known.remember("h", &grant, None);
        assert_eq!((known.get("h"), known.live_at("h")), (Some(grant.clone()), None), "seen, not proven");
        known.remember("h", &grant, Some((7, at(290))));
        assert_eq!(known.live_at("h"), Some(7));
        known.remember("h", &grant, Some((7, at(310))));
        assert_eq!(known.live_at("h"), None, "older than five minutes");
        known.remember("h", &grant, Some((7, at(-60))));
        assert_eq!(known.live_at("h"), None, "a clock that went back ends the proof");
        known.forget("h");
        assert_eq!(known.get("h"), None);
    }

    #[test]
    fn the_tenants_epoch_is_the_highest_a_count_returned_and_a_used_up_window_has_no_room() {
        let known = KnownKeys::default();
        let tenant = trusted::tenant(&TenantKey::parse("ten_0193a6f21c2b7d3e8f000123456789ab").expect("id"));
        assert_eq!((known.epoch(&tenant), known.last_counted(&tenant)), (None, None));
        known.note_count(&tenant, 100, 3, Some(5));
        known.note_count(&tenant, 100, 0, Some(4));
        known.note_count(&tenant, 100, 0, None);
        known.note_epoch(&tenant, Some(3));
        assert_eq!((known.epoch(&tenant), known.last_counted(&tenant)), (Some(5), Some(100)));
        assert_eq!((known.room(&tenant, 100), known.room(&tenant, 101)), (Some(0), None));
        // Tokens are of one window: taken one at a time, given back, dropped for a later one.
        known.note_tokens(&tenant, 100, 2);
        assert!(known.has_token(&tenant, 100) && !known.has_token(&tenant, 101));
        assert!(known.has_token(&tenant, 99), "a window a clock ahead started, joined by the count");
        assert_eq!((known.take_token(&tenant, 100), known.take_token(&tenant, 99)), (Some(100), Some(100)));
        assert_eq!(known.take_token(&tenant, 100), None, "two tokens, two requests");
        known.note_tokens(&tenant, 100, 1);
        known.note_tokens(&tenant, 99, 5);
        assert_eq!(known.take_token(&tenant, 100), Some(100));
        assert_eq!(known.take_token(&tenant, 100), None, "an earlier window's are not kept");
        known.note_tokens(&tenant, 101, 3);
        assert_eq!(known.take_token(&tenant, 100), Some(101), "a new window's replace them");
        known.drop_tokens_before(&tenant, 101);
        assert!(known.has_token(&tenant, 101), "of that window: kept");
        known.drop_tokens_before(&tenant, 102);
        assert!(!known.has_token(&tenant, 101), "of an ended window: dropped");
    }
}
