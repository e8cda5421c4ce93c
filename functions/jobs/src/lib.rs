//! The jobs function: runs bulk jobs (`POST /executions/bulk`) and exports
//! (`POST /exports`, `domain::runs::export`) in rounds, and deletes
//! what the tenants' retention says has expired (`domain::runs::expiry`: a marker's
//! REMOVE, DynamoDB's TTL having passed, or its INSERT when due at once). The jobs
//! table's stream hands it each job item a write left running (Lambda's event source
//! mapping; locally `cairn-relay`); it runs that job's rounds
//! ([`domain::runs::Runs::bulk_round`]) while the invocation has time, and the item its
//! last round wrote comes back through the stream to go on. A record of a round already
//! run (the job moved past it) is passed over; a round whose storage failed is reported
//! in `batchItemFailures`, so that the mapping hands it over again (a round does nothing
//! twice); a round that can never succeed (an item this code cannot read) ends its job
//! as failed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use domain::Error;
use domain::runs::bulk::named;
use domain::runs::expiry::{Marked, marked};
use domain::runs::export::model::ExportStatus;
use domain::runs::{Deleted, Runs};
use serde_json::{Value, json};
use shared::TenantId;
use shared::dynamo::{StoreError, Tables};
use shared::ids::{BulkJobId, ExportId};
use shared::time::{Clock, SystemClock};

/// Time left at which no further round is started: a round (25 executions, 4 at once)
/// takes a few seconds.
pub const MARGIN: Duration = Duration::from_secs(30);

/// What the function needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct Jobs {
    runs: Runs,
}

impl Jobs {
    /// Over `client` and the named tables.
    #[must_use]
    pub fn new(client: aws_sdk_dynamodb::Client, tables: Tables) -> Self {
        Self { runs: Runs::new(client, tables, shared::config::execution_cost_credits()) }
    }

    /// Handles a stream batch with `deadline_ms` (milliseconds since the Unix epoch, as
    /// Lambda gives it): answers the records to hand over again.
    pub async fn handle(&self, event: Value, deadline_ms: u64) -> Value {
        let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
        let records = event["Records"].as_array().cloned().unwrap_or_default();
        for (at, record) in records.iter().enumerate() {
            if let Some(marked) = marked(record) {
                if let Err(error) = Box::pin(self.expire(&marked, deadline)).await {
                    let sequence = record["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default();
                    tracing::error!(error = %error, execution = %marked.execution, sequence, "jobs: an expiry failed; handed over again");
                    return json!({"batchItemFailures": [{"itemIdentifier": sequence}]});
                }
                continue;
            }
            if let Some((tenant, id, round)) = domain::runs::export::store::named(record) {
                let later =
                    |r: &Value| domain::runs::export::store::named(r).is_some_and(|(t, i, _)| t == tenant && i == id);
                if records[at + 1..].iter().any(later) {
                    continue;
                }
                if let Err(error) = Box::pin(self.export(&tenant, &id, round, deadline)).await {
                    let sequence = record["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default();
                    tracing::error!(error = %error, export = %id, sequence, "jobs: an export round failed; handed over again");
                    return json!({"batchItemFailures": [{"itemIdentifier": sequence}]});
                }
                continue;
            }
            let Some((tenant, id, round)) = named(record) else {
                tracing::error!(record = %record["dynamodb"]["Keys"], "jobs: a record that names no job; passed over");
                continue;
            };
            // A later record of the same job in the batch supersedes this one.
            if records[at + 1..].iter().any(|r| named(r).is_some_and(|(t, i, _)| t == tenant && i == id)) {
                continue;
            }
            if let Err(error) = Box::pin(self.run(&tenant, &id, round, deadline)).await {
                let sequence = record["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default();
                tracing::error!(error = %error, job = %id, sequence, "jobs: a round failed; handed over again");
                return json!({"batchItemFailures": [{"itemIdentifier": sequence}]});
            }
        }
        json!({"batchItemFailures": []})
    }

    /// Deletes what `marked` says is due (`domain::runs::expiry`) while there is time;
    /// puts its marker again, due at once, when there is more.
    async fn expire(&self, marked: &Marked, deadline: SystemTime) -> Result<(), Error> {
        while SystemTime::now() + MARGIN < deadline {
            if Box::pin(self.runs.expire(marked, SystemClock.now())).await? == Deleted::Done {
                return if marked.now { self.runs.unmark(marked).await } else { Ok(()) };
            }
        }
        self.runs.mark_again(marked).await
    }

    /// Runs export `id`'s rounds from `round` while there is time.
    async fn export(
        &self,
        tenant: &TenantId,
        id: &ExportId,
        mut round: u64,
        deadline: SystemTime,
    ) -> Result<(), Error> {
        while SystemTime::now() + MARGIN < deadline {
            match Box::pin(self.runs.export_round(tenant, id, round, &SystemClock)).await {
                Ok(Some(export)) if export.status == ExportStatus::Running => round = export.round,
                Ok(_) => return Ok(()),
                Err(error @ Error::Store(StoreError::Unavailable(_) | StoreError::Conflict)) => return Err(error),
                Err(error) => {
                    tracing::error!(error = %error, export = %id, "jobs: an export round that cannot succeed; the export fails");
                    let why = "an internal error stopped the export; its parts so far can be downloaded";
                    return self.runs.export_fail(tenant, id, why, &SystemClock).await;
                }
            }
        }
        Ok(())
    }

    /// Runs job `id`'s rounds from `round` while there is time.
    async fn run(&self, tenant: &TenantId, id: &BulkJobId, mut round: u64, deadline: SystemTime) -> Result<(), Error> {
        while SystemTime::now() + MARGIN < deadline {
            match Box::pin(self.runs.bulk_round(tenant, id, round, &SystemClock)).await {
                Ok(Some(job)) if job.status == domain::runs::bulk::model::JobStatus::Running => round = job.round,
                Ok(_) => return Ok(()),
                Err(error @ Error::Store(StoreError::Unavailable(_) | StoreError::Conflict)) => return Err(error),
                Err(error) => {
                    tracing::error!(error = %error, job = %id, "jobs: a round that cannot succeed; the job fails");
                    let why = "an internal error stopped the job; the executions it reached are counted";
                    return self.runs.bulk_fail(tenant, id, why, &SystemClock).await;
                }
            }
        }
        Ok(())
    }
}
