//! The tables of Cairn and their deployed names.

/// The tables of Cairn. `template.yaml` defines each of them (a test checks that the
/// two agree); the deployed name is the stack's prefix plus [`Table::suffix`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// Tenants (`tenant_id`).
    Tenants,
    /// API keys by the SHA-256 of the key (`key_hash`).
    ApiKeys,
    /// Workflows (`tenant_id`, `id`).
    Workflows,
    /// Counters behind every list's `total` (`tenant_id`, `name`).
    Counters,
    /// Executions (`tenant_id`, `id`).
    Executions,
    /// Checkpoints, twice: by id (small states inline) and by execution and sequence
    /// (`tenant_id`, `entry`).
    Checkpoints,
    /// Large values stored in parts: checkpoint states, execution input and output
    /// too large to sit inline (`tenant_id`, `part`).
    Blobs,
    /// Failures recorded when executions fail (`tenant_id`, `id`).
    Failures,
    /// Credit balances (`tenant_id`).
    Accounts,
    /// Every balance change (`tenant_id`, `seq`).
    Ledger,
    /// Stripe events already applied (`tenant_id`, `event_id`), kept 30 days.
    StripeEvents,
    /// Requests per tenant and minute (`tenant_id`, `window`), expired by TTL.
    RateLimits,
    /// Claimed `Idempotency-Key`s and their answers (`tenant_id`, `idempotency_key`),
    /// kept 24 hours.
    Idempotency,
    /// A tenant's webhook endpoints (`tenant_id`, `endpoint_id`).
    WebhookEndpoints,
    /// Each event's delivery to each endpoint, with its attempts (`tenant_id`,
    /// `delivery`), kept 30 days; the sparse index `by_due` holds the pending ones.
    WebhookDeliveries,
    /// The outbox: the events of each change, written in the change's own transaction
    /// and read from the table's stream (`tenant_id`, `event_id`), kept 7 days.
    Events,
    /// Long jobs run in rounds (`tenant_id`, `id`): bulk jobs (`bulk_…`) in the tenant's
    /// partition, the executions each has acted on in the job's own
    /// (`{tenant}#{bulk_…}`); the stream of job items drives the rounds.
    Jobs,
}

impl Table {
    /// Every table.
    pub const ALL: [Self; 17] = [
        Self::Tenants,
        Self::ApiKeys,
        Self::Workflows,
        Self::Counters,
        Self::Executions,
        Self::Checkpoints,
        Self::Blobs,
        Self::Failures,
        Self::Accounts,
        Self::Ledger,
        Self::StripeEvents,
        Self::RateLimits,
        Self::Idempotency,
        Self::WebhookEndpoints,
        Self::WebhookDeliveries,
        Self::Events,
        Self::Jobs,
    ];

    /// The part of the table's name after the prefix.
    #[must_use]
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Tenants => "tenants",
            Self::ApiKeys => "api-keys",
            Self::Workflows => "workflows",
            Self::Counters => "counters",
            Self::Executions => "executions",
            Self::Checkpoints => "checkpoints",
            Self::Blobs => "blobs",
            Self::Failures => "failures",
            Self::Accounts => "accounts",
            Self::Ledger => "ledger",
            Self::StripeEvents => "stripe-events",
            Self::RateLimits => "rate-limits",
            Self::Idempotency => "idempotency",
            Self::WebhookEndpoints => "webhook-endpoints",
            Self::WebhookDeliveries => "webhook-deliveries",
            Self::Events => "events",
            Self::Jobs => "jobs",
        }
    }

    /// The attributes of the table's primary key, partition key first (a test checks
    /// them against `template.yaml`).
    #[must_use]
    pub fn key(self) -> &'static [&'static str] {
        match self {
            Self::Tenants | Self::Accounts => &["tenant_id"],
            Self::ApiKeys => &["key_hash"],
            Self::Workflows | Self::Executions | Self::Failures | Self::Jobs => &["tenant_id", "id"],
            Self::Counters => &["tenant_id", "name"],
            Self::Checkpoints => &["tenant_id", "entry"],
            Self::Blobs => &["tenant_id", "part"],
            Self::Ledger => &["tenant_id", "seq"],
            Self::StripeEvents | Self::Events => &["tenant_id", "event_id"],
            Self::RateLimits => &["tenant_id", "window"],
            Self::Idempotency => &["tenant_id", "idempotency_key"],
            Self::WebhookEndpoints => &["tenant_id", "endpoint_id"],
            Self::WebhookDeliveries => &["tenant_id", "delivery"],
        }
    }
}

/// The full names of the tables, computed once.
#[derive(Debug, Clone)]
pub struct Tables {
    names: Vec<String>,
}

impl Tables {
    /// Names every table `prefix` + suffix.
    #[must_use]
    pub fn new(prefix: &str) -> Self {
        Self { names: Table::ALL.iter().map(|t| format!("{prefix}{}", t.suffix())).collect() }
    }

    /// The full name of `table`.
    #[must_use]
    pub fn name(&self, table: Table) -> &str {
        let index = Table::ALL.iter().position(|t| *t == table).unwrap_or_default();
        &self.names[index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_a_distinct_name() {
        let tables = Tables::new("t-");
        let mut names: Vec<&str> = Table::ALL.iter().map(|t| tables.name(*t)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Table::ALL.len());
        assert_eq!(tables.name(Table::Counters), "t-counters");
    }
}
