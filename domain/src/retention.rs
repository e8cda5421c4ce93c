//! Retention: how long a tenant's ended executions, and their checkpoints, are kept.
//!
//! The tenant's settings live on its accounts item (attribute `retention`), which also
//! holds its plan: an execution's ending reads that one item and fixes the execution's
//! lifetimes then (`expires_at`, `checkpoints_expire_at`; as Temporal applies a
//! namespace's retention when a workflow closes). Changing the settings later applies to
//! executions that end afterwards. Running and paused executions never expire; a replay
//! takes an ended execution's lifetimes away until it ends again.
//!
//! The plan bounds how long an execution may be kept, and that bound is the default:
//! 30 days without a subscription, 90 on developer, 365 on pro, 3,650 on enterprise.
//! Settings can only shorten it (a later downgrade shortens what the settings say to
//! the new plan's bound, at the next ending).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::ApiError;
use shared::TenantId;
use shared::body::{Fields, Patch, WireEnum, integer, one_of};
use shared::dynamo::{Part, StoreError, Table, Tables, Transaction, TransactionError, built, classify, s};
use shared::error::FieldError;

use crate::subscriptions::{Plan, Subscription};

/// The longest `checkpoints_days` (ten years).
pub const MAX_CHECKPOINT_DAYS: u32 = 3650;

/// What happens to an ended execution's checkpoints before the execution itself expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckpointPolicy {
    /// Every checkpoint stays as long as the execution.
    #[default]
    All,
    /// Only the checkpoint the execution stands at stays, from its end on.
    KeepLatest,
    /// The others go `checkpoints_days` after the end.
    Days,
}

impl WireEnum for CheckpointPolicy {
    const ALL: &'static [Self] = &[Self::All, Self::KeepLatest, Self::Days];

    fn wire(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::KeepLatest => "keep_latest",
            Self::Days => "days",
        }
    }
}

/// A tenant's retention settings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Retention {
    /// Days an ended execution is kept (`None`: as long as the plan allows).
    pub executions_days: Option<u32>,
    /// What happens to its checkpoints before.
    pub checkpoints: CheckpointPolicy,
    /// With [`CheckpointPolicy::Days`]: days after the end that all but the latest
    /// checkpoint are kept.
    pub checkpoints_days: Option<u32>,
    /// When they were last set (`None`: never, the defaults).
    pub updated_at: Option<DateTime<Utc>>,
}

/// The most days `plan` keeps an ended execution (no plan: a tenant without a live
/// subscription), which is also its default.
#[must_use]
pub fn max_days(plan: Option<Plan>) -> u32 {
    match plan {
        None => 30,
        Some(Plan::Developer) => 90,
        Some(Plan::Pro) => 365,
        Some(Plan::Enterprise) => 3650,
    }
}

/// When an ended execution and its earlier checkpoints go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// When the execution expires (with everything it owns).
    pub expires_at: DateTime<Utc>,
    /// When all its checkpoints but the one it stands at go (`None`: with it).
    pub checkpoints_expire_at: Option<DateTime<Utc>>,
}

impl Retention {
    /// Days an execution that ends now is kept under `plan`.
    #[must_use]
    pub fn effective_days(&self, plan: Option<Plan>) -> u32 {
        let most = max_days(plan);
        self.executions_days.map_or(most, |days| days.min(most))
    }

    /// The lifetimes of an execution that ended at `ended` under `plan`.
    #[must_use]
    pub fn lifetimes(&self, plan: Option<Plan>, ended: DateTime<Utc>) -> Lifetimes {
        let expires_at = ended + TimeDelta::days(i64::from(self.effective_days(plan)));
        let trimmed = match self.checkpoints {
            CheckpointPolicy::All => None,
            CheckpointPolicy::KeepLatest => Some(ended),
            CheckpointPolicy::Days => Some(ended + TimeDelta::days(i64::from(self.checkpoints_days.unwrap_or(0)))),
        };
        Lifetimes { expires_at, checkpoints_expire_at: trimmed.filter(|at| *at < expires_at) }
    }

    /// What is wrong with these settings under `plan`, field by field (none: valid).
    #[must_use]
    pub fn problems(&self, plan: Option<Plan>) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        let most = max_days(plan);
        if let Some(days) = self.executions_days
            && !(1..=most).contains(&days)
        {
            let who =
                plan.map_or_else(|| "a tenant without a subscription".to_owned(), |p| format!("the {} plan", p.wire()));
            problems.push((
                "executions_days",
                format!("must be from 1 to {most}, the most days {who} keeps an ended execution"),
            ));
        }
        match (self.checkpoints, self.checkpoints_days) {
            (CheckpointPolicy::Days, None) => {
                problems.push(("checkpoints_days", "is required when checkpoints is \"days\"".to_owned()));
            }
            (CheckpointPolicy::Days, Some(days)) if !(1..=MAX_CHECKPOINT_DAYS).contains(&days) => {
                problems.push(("checkpoints_days", format!("must be from 1 to {MAX_CHECKPOINT_DAYS}")));
            }
            (CheckpointPolicy::All | CheckpointPolicy::KeepLatest, Some(_)) => {
                problems.push(("checkpoints_days", "is only allowed when checkpoints is \"days\"".to_owned()));
            }
            _ => {}
        }
        problems
    }
}

/// Settings as a client sends them (`executions_days`, `checkpoints`,
/// `checkpoints_days`; a field left out takes its default), checked against `plan`,
/// each problem named `{prefix}{field}` in `errors` (`None` then).
pub fn read(body: Value, prefix: &str, plan: Option<Plan>, errors: &mut Vec<FieldError>) -> Option<Retention> {
    let Ok(mut f) = Fields::new(body) else {
        let field = prefix.trim_end_matches('.');
        errors.push(FieldError::new(if field.is_empty() { "body" } else { field }, "must be a JSON object"));
        return None;
    };
    let days = |max: u32| integer(1, i64::from(max));
    let executions_days = f.nullable("executions_days", days(max_days(Some(Plan::Enterprise))));
    let checkpoints = f.optional("checkpoints", one_of(CheckpointPolicy::ALL)).unwrap_or_default();
    let checkpoints_days = f.nullable("checkpoints_days", days(MAX_CHECKPOINT_DAYS));
    let before = errors.len();
    if let Err(ApiError::Validation(found)) = f.finish() {
        errors.extend(found.into_iter().map(|e| FieldError::new(format!("{prefix}{}", e.field), e.message)));
    }
    let whole = |patch: Patch<i64>| match patch {
        Patch::Value(days) => u32::try_from(days).ok(),
        Patch::Absent | Patch::Null => None,
    };
    let retention = Retention {
        executions_days: whole(executions_days),
        checkpoints,
        checkpoints_days: whole(checkpoints_days),
        updated_at: None,
    };
    if errors.len() == before {
        errors.extend(
            retention
                .problems(plan)
                .into_iter()
                .map(|(field, message)| FieldError::new(format!("{prefix}{field}"), message)),
        );
    }
    (errors.len() == before).then_some(retention)
}

/// The settings as stored (on the accounts item, or a workflow's item).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RetentionRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    executions_days: Option<u32>,
    checkpoints: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoints_days: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    updated_at: String,
}

impl RetentionRecord {
    /// `retention` as stored.
    pub(crate) fn of(retention: &Retention) -> Self {
        Self {
            executions_days: retention.executions_days,
            checkpoints: retention.checkpoints.wire().to_owned(),
            checkpoints_days: retention.checkpoints_days,
            updated_at: retention.updated_at.map(shared::time::format).unwrap_or_default(),
        }
    }

    /// The settings it stores.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for what this code cannot read.
    pub(crate) fn into_retention(self) -> Result<Retention, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("retention: {what}"));
        Ok(Retention {
            executions_days: self.executions_days,
            checkpoints: CheckpointPolicy::from_wire(&self.checkpoints).ok_or_else(|| corrupt("checkpoints"))?,
            checkpoints_days: self.checkpoints_days,
            updated_at: match self.updated_at.as_str() {
                "" => None,
                at => Some(shared::time::parse(at).map_err(|_| corrupt("updated_at"))?),
            },
        })
    }
}

/// A tenant's settings and plan, as one read of its accounts item finds them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Standing {
    /// The settings (the defaults if never set).
    pub retention: Retention,
    /// The plan of its live subscription.
    pub plan: Option<Plan>,
    /// Whether a workflow of the tenant has, or has had, retention of its own (an
    /// ending then reads its workflow's).
    pub overrides: bool,
}

/// The settings on the tenants' accounts items.
#[derive(Debug, Clone)]
pub struct RetentionStore {
    client: Client,
    tables: Tables,
}

impl RetentionStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::Accounts)
    }

    /// The tenant's settings and plan (one read of two attributes).
    ///
    /// # Errors
    /// The read's [`StoreError`], [`StoreError::Corrupt`] for settings this code cannot read.
    pub async fn read(&self, tenant: &TenantId) -> Result<Standing, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .projection_expression("retention, subscription, retention_overrides")
            .send()
            .await
            .map_err(classify)?;
        let mut item = out.item.unwrap_or_default();
        let retention = match item.remove("retention") {
            Some(value) => serde_dynamo::from_attribute_value::<_, RetentionRecord>(value)?.into_retention()?,
            None => Retention::default(),
        };
        let subscription: Option<Subscription> =
            item.remove("subscription").map(serde_dynamo::from_attribute_value).transpose()?;
        let plan = subscription.filter(Subscription::is_live).and_then(|sub| Plan::parse(&sub.plan_id));
        let overrides = item.get("retention_overrides").and_then(|v| v.as_bool().ok()).copied().unwrap_or(false);
        Ok(Standing { retention, plan, overrides })
    }

    /// Sets the tenant's settings to `retention` (its `updated_at` set), in one
    /// transaction (so the request's gate admits it).
    ///
    /// # Errors
    /// The write's [`TransactionError`].
    pub async fn write(&self, tenant: &TenantId, retention: &Retention) -> Result<(), TransactionError> {
        let record = RetentionRecord::of(retention);
        let update = Update::builder()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET retention = :r")
            .expression_attribute_values(":r", serde_dynamo::to_attribute_value(record).map_err(StoreError::from)?);
        let mut tx = Transaction::new();
        tx.push(Part::Account, TransactWriteItem::builder().update(built(update.build())?).build());
        tx.commit(&self.client).await
    }

    /// Notes that a workflow of the tenant has retention of its own (never taken back:
    /// endings read the workflow's from then on), in one transaction the request's gate
    /// admits.
    ///
    /// # Errors
    /// The write's [`TransactionError`].
    pub async fn note_overrides(&self, tenant: &TenantId) -> Result<(), TransactionError> {
        let update = Update::builder()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET retention_overrides = :yes")
            .expression_attribute_values(":yes", aws_sdk_dynamodb::types::AttributeValue::Bool(true));
        let mut tx = Transaction::new();
        tx.push(Part::Account, TransactWriteItem::builder().update(built(update.build())?).build());
        tx.commit(&self.client).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        shared::time::parse(text).expect("time")
    }

    #[test]
    fn the_plan_bounds_and_defaults_how_long_an_execution_is_kept() {
        let ended = at("2026-01-01T00:00:00Z");
        let default = Retention::default();
        assert_eq!(default.lifetimes(None, ended).expires_at, at("2026-01-31T00:00:00Z"));
        assert_eq!(default.lifetimes(Some(Plan::Pro), ended).expires_at, at("2027-01-01T00:00:00Z"));
        let seven = Retention { executions_days: Some(7), ..Retention::default() };
        assert_eq!(seven.lifetimes(Some(Plan::Pro), ended).expires_at, at("2026-01-08T00:00:00Z"));
        // Set on pro, then downgraded: the free bound applies at the next ending.
        let long = Retention { executions_days: Some(300), ..Retention::default() };
        assert_eq!(long.effective_days(None), 30);
        assert!(long.problems(Some(Plan::Pro)).is_empty());
        assert_eq!(long.problems(None)[0].0, "executions_days");
    }

    #[test]
    fn checkpoints_go_at_the_end_after_days_or_with_the_execution() {
        let ended = at("2026-01-01T00:00:00Z");
        let latest = Retention { checkpoints: CheckpointPolicy::KeepLatest, ..Retention::default() };
        assert_eq!(latest.lifetimes(None, ended).checkpoints_expire_at, Some(ended));
        let days = Retention { checkpoints: CheckpointPolicy::Days, checkpoints_days: Some(3), ..Retention::default() };
        assert_eq!(days.lifetimes(None, ended).checkpoints_expire_at, Some(at("2026-01-04T00:00:00Z")));
        // Not before the execution itself goes: then they go with it.
        let late = Retention { checkpoints_days: Some(30), ..days };
        assert_eq!(late.lifetimes(None, ended).checkpoints_expire_at, None);
        assert_eq!(Retention::default().lifetimes(None, ended).checkpoints_expire_at, None);
    }

    #[test]
    fn settings_that_cannot_apply_are_refused_by_field() {
        let days = Retention { checkpoints: CheckpointPolicy::Days, ..Retention::default() };
        assert_eq!(days.problems(None)[0].0, "checkpoints_days");
        let stray = Retention { checkpoints_days: Some(3), ..Retention::default() };
        assert_eq!(stray.problems(None)[0].0, "checkpoints_days");
        let zero = Retention { executions_days: Some(0), ..Retention::default() };
        assert_eq!(zero.problems(None)[0].0, "executions_days");
    }
}
