//! Configuration from environment variables, read once per cold start.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `TABLE_PREFIX` | prefix of every table name (`cairn-` makes `cairn-workflows`) | required |
//! | `AWS_ENDPOINT_URL_DYNAMODB` | the SDK's own endpoint override (DynamoDB Local) | AWS |
//! | `EXECUTION_COST_CREDITS` | credits charged per execution start and replay | 1 |
//! | `RATE_LIMIT_PER_MINUTE` | requests per tenant and minute (0: off), see `rate_limit` | 1200 |
//! | `STRIPE_WEBHOOK_SECRET` | the signing secret of the Stripe webhook endpoint | unset: webhooks are 503 |
//! | `PARTITIONS` | where new executions and their checkpoints go: `spread` (over partitions of the tenant's, and of each execution) or `tenant` (the tenant's one partition, as before; an upgrade's first deploy) | `spread` |
//!
//! Region and credentials come from the environment (`AWS_REGION`, `AWS_ACCESS_KEY_ID`,
//! …, as Lambda sets them): see `dynamo::config`.

use crate::dynamo::Tables;

/// What a function reads from its environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// The names of the tables.
    pub tables: Tables,
}

/// A missing or invalid environment variable.
#[derive(Debug, thiserror::Error)]
#[error("environment variable {name}: {problem}")]
pub struct ConfigError {
    name: &'static str,
    problem: &'static str,
}

impl Config {
    /// Reads the configuration from the process environment.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first missing or invalid variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the configuration through `lookup` (the environment, or a test's map).
    ///
    /// # Errors
    /// [`ConfigError`] naming the first missing or invalid variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let prefix = lookup("TABLE_PREFIX").ok_or(ConfigError { name: "TABLE_PREFIX", problem: "is not set" })?;
        let valid = !prefix.is_empty()
            && prefix.len() <= 200
            && prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !valid {
            return Err(ConfigError { name: "TABLE_PREFIX", problem: "must be 1 to 200 of A-Z a-z 0-9 - _ ." });
        }
        Ok(Self { tables: Tables::new(&prefix) })
    }
}

/// Credits charged per execution start and per replay (`EXECUTION_COST_CREDITS`,
/// default 1; an invalid value is taken as the default and logged once).
#[must_use]
pub fn execution_cost_credits() -> i64 {
    static COST: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *COST.get_or_init(|| match std::env::var("EXECUTION_COST_CREDITS") {
        Err(_) => 1,
        Ok(raw) => raw.parse::<i64>().ok().filter(|c| *c >= 0).unwrap_or_else(|| {
            tracing::error!(value = raw, "EXECUTION_COST_CREDITS is not a whole number >= 0; using 1");
            1
        }),
    })
}

/// Whether an execution started now reports `execution.started` through the executions
/// table's stream, its new item marked so, rather than an outbox item
/// (`STARTED_EVENTS`: `stream`, the default, or `outbox`; another value is taken as the
/// default and logged once).
#[must_use]
pub fn started_on_stream() -> bool {
    static STREAM: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STREAM.get_or_init(|| switch("STARTED_EVENTS", "stream", "outbox"))
}

/// Whether executions started now, and their checkpoints, are spread over partitions
/// rather than kept in the tenant's one partition (`PARTITIONS`: `spread`, the default,
/// or `tenant`; another value is taken as the default and logged once).
#[must_use]
pub fn spread() -> bool {
    static SPREAD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SPREAD.get_or_init(|| switch("PARTITIONS", "spread", "tenant"))
}

/// Whether executions started now keep their checkpoint progress in a head item of
/// their own, which a checkpoint writes alone (`EXECUTION_HEADS`: `on`, the default, or
/// `off`; another value is taken as the default and logged once).
#[must_use]
pub fn execution_heads() -> bool {
    static HEADS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HEADS.get_or_init(|| switch("EXECUTION_HEADS", "on", "off"))
}

/// Whether executions started now keep each checkpoint in one entry in a partition of
/// their own, found by the checkpoint's id, rather than in two (`CHECKPOINT_ENTRIES`:
/// `one`, the default, or `two`; another value is taken as the default and logged once).
#[must_use]
pub fn one_checkpoint_entry() -> bool {
    static ONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONE.get_or_init(|| switch("CHECKPOINT_ENTRIES", "one", "two"))
}

/// Whether variable `name` is unset or `on` (`true`) rather than `off`; another value is
/// logged and taken as `on`.
fn switch(name: &str, on: &str, off: &str) -> bool {
    match std::env::var(name) {
        Err(_) => true,
        Ok(value) if value == on => true,
        Ok(value) if value == off => false,
        Ok(other) => {
            tracing::error!(value = other, "{name} is neither {on} nor {off}; using {on}");
            true
        }
    }
}

/// The Stripe webhook signing secret (`STRIPE_WEBHOOK_SECRET`), if configured.
#[must_use]
pub fn stripe_webhook_secret() -> Option<String> {
    std::env::var("STRIPE_WEBHOOK_SECRET").ok().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::Table;

    #[test]
    fn table_names_come_from_the_prefix() {
        let config = Config::from_lookup(|_| Some("cairn-".to_owned())).expect("valid");
        assert_eq!(config.tables.name(Table::Workflows), "cairn-workflows");
        assert_eq!(config.tables.name(Table::ApiKeys), "cairn-api-keys");
    }

    #[test]
    fn missing_or_invalid_prefix_is_an_error_naming_the_variable() {
        let missing = Config::from_lookup(|_| None).expect_err("missing");
        assert!(missing.to_string().contains("TABLE_PREFIX"));
        assert!(Config::from_lookup(|_| Some("bad prefix/".to_owned())).is_err());
    }
}
