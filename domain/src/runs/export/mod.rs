//! Exports: a tenant's records (or one workflow's) as JSON Lines, gzip, in parts that
//! each fit Lambda's limits, written in rounds by the jobs function.
//!
//! Each line is `{"type": …, "data": …}`, `data` being the record exactly as its own
//! `GET` shows it: every workflow (with its definition), every execution (with input and
//! output) followed by its checkpoints in sequence order (each with its state), then
//! every failure (with details and recovery commands). A round writes one part, in
//! order, until the part is full ([`model::PART_BYTES`] of gzip or
//! [`model::PART_RAW_BYTES`] of JSON) or it has written [`model::ROUND_LINES`] lines,
//! read [`model::ROUND_READS`] records or spent [`model::ROUND_TIME`] reading; it then
//! stores the part and moves the export's
//! position in one conditional write of its item, whose stream record starts the next
//! round. A round run twice (its Lambda killed) writes its part under a key of its own
//! and only one run moves the export. An export reads while the tenant works: a record
//! changed during it is written as it was when its round read it.

pub mod model;
pub mod store;

use futures_util::{StreamExt, stream};
use serde::Serialize;
use serde_json::value::RawValue;
use shared::TenantId;
use shared::dynamo::{StoreError, Transaction, TransactionError};
use shared::ids::{CheckpointId, ExecutionId, ExportId, FailureId, WorkflowId};
use shared::pagination::PageRequest;
use shared::time::Clock;

use self::model::{Export, ExportCounts, ExportStatus, PartWriter, Position, ROUND_LINES, ROUND_READS, ROUND_TIME};
use super::checkpoints::model::Checkpoint;
use super::executions::model::Execution;
use super::{ListCheckpoints, ListExecutions, ListFailures, Runs};
use crate::Error;
use crate::views::{CheckpointBody, ExecutionBody, FailureDetail, WorkflowBody};
use crate::workflows::store::ListFilter;

/// Records read with one query.
const PAGE: usize = 50;
/// Records read at once (in order).
const AT_ONCE: usize = 8;

/// One record's read, as a round runs several at once.
type Read<'a, T> = std::pin::Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// One line of an export.
#[derive(Serialize)]
struct Line<'a, T> {
    #[serde(rename = "type")]
    kind: &'a str,
    data: T,
}

/// A round's part being written, and what it has read since when.
#[derive(Debug)]
struct Round {
    part: PartWriter,
    counts: ExportCounts,
    reads: u64,
    began: std::time::Instant,
}

/// Whether a round goes on after a record.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// Room for more.
    More,
    /// The part is full, or the round has done its share: the position stays before
    /// the record that did not fit.
    Stop,
}

impl Round {
    /// Whether the round has done its share (in lines, reads or time).
    fn spent(&self) -> bool {
        self.part.lines() >= ROUND_LINES || self.reads >= ROUND_READS || self.began.elapsed() >= ROUND_TIME
    }

    /// Writes `data` as a line of `kind`, if it fits.
    fn write<T: Serialize>(&mut self, kind: &str, data: T) -> Result<Next, Error> {
        let line = serde_json::to_vec(&Line { kind, data })
            .map_err(|e| Error::Store(StoreError::Corrupt(format!("an export line: {e}"))))?;
        if !self.part.fits(line.len()) {
            return Ok(Next::Stop);
        }
        self.part.push(&line).map_err(|e| Error::Store(StoreError::Other(Box::new(e))))?;
        Ok(Next::More)
    }
}

/// Where an execution's checkpoints go on: after the checkpoint of sequence `sequence`,
/// or, in an export begun before sequences were kept, after checkpoint `after`.
#[derive(Debug, Clone, Default)]
struct Cursor {
    after: Option<String>,
    sequence: Option<u64>,
}

impl Cursor {
    /// The export's position: inside execution `execution`'s checkpoints, here.
    fn position(self, execution: String) -> Position {
        Position::Checkpoints { execution, after: self.after, sequence: self.sequence }
    }
}

impl Runs {
    /// Starts an export of the tenant's records (only workflow `workflow`'s, when
    /// given: 404 unless the tenant has it), unless one is running (checked as it starts).
    ///
    /// # Errors
    /// [`Error::NotFound`] for the workflow, [`Error::InvalidState`] while another export
    /// runs, storage errors.
    pub async fn export_start(
        &self,
        tenant: &TenantId,
        workflow: Option<&WorkflowId>,
        clock: &dyn Clock,
        before_commit: super::BeforeCommit<'_, Export>,
    ) -> Result<Export, Error> {
        if let Some(id) = workflow {
            crate::workflows::load(&self.workflows, tenant, id).await?;
        }
        let since = clock.now() - chrono::Duration::minutes(model::STALLED_MINUTES);
        if let Some(running) = self.exports.running(tenant, since).await? {
            return Err(Error::InvalidState(format!(
                "export {running} is still running; a tenant runs one export at a time (wait for it: GET /exports/{running})"
            )));
        }
        let export = Export::start(workflow.cloned(), clock.now());
        let mut tx = Transaction::new();
        self.exports.stage_put(&mut tx, tenant, None, &export)?;
        before_commit(&export);
        tx.commit(self.client()).await?;
        Ok(export)
    }

    /// The tenant's export `id`, as a client sees it now (one that stalled, failed).
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn export(&self, tenant: &TenantId, id: &ExportId, clock: &dyn Clock) -> Result<Export, Error> {
        let export = self.exports.get(tenant, id).await?.ok_or_else(|| Error::not_found("export", id.as_str()))?;
        Ok(export.as_seen(clock.now()))
    }

    /// Part `number` (from 1) of the tenant's export `id`: its gzip bytes.
    ///
    /// # Errors
    /// [`Error::NotFound`] for the export or a part it does not have (yet), storage
    /// errors.
    pub async fn export_part(&self, tenant: &TenantId, id: &ExportId, number: usize) -> Result<Vec<u8>, Error> {
        let export = self.exports.get(tenant, id).await?.ok_or_else(|| Error::not_found("export", id.as_str()))?;
        let part = number
            .checked_sub(1)
            .and_then(|at| export.parts.get(at))
            .ok_or_else(|| Error::not_found("export part", format!("{id}/parts/{number}")))?;
        Ok(self.exports.read_part(tenant, part).await?)
    }

    /// Runs round `round` of export `id` (the round its item's stream record follows):
    /// nothing when the export has moved past it or ended. Answers the export after it.
    ///
    /// # Errors
    /// Storage errors (the round may be run again).
    pub async fn export_round(
        &self,
        tenant: &TenantId,
        id: &ExportId,
        round: u64,
        clock: &dyn Clock,
    ) -> Result<Option<Export>, Error> {
        let Some(export) = self.exports.get(tenant, id).await? else { return Ok(None) };
        if export.round != round || export.status != ExportStatus::Running {
            return Ok(None);
        }
        let mut work = Round {
            part: PartWriter::default(),
            counts: export.counts.clone(),
            reads: 0,
            began: std::time::Instant::now(),
        };
        let mut position = export.position.clone();
        while position != Position::Done && !work.spent() {
            let (next, went) = Box::pin(self.export_step(tenant, &export, &position, &mut work)).await?;
            position = next;
            if went == Next::Stop {
                break;
            }
        }
        let lines = work.part.lines();
        let part = if lines == 0 {
            None
        } else {
            let gzip = work.part.finish().map_err(|e| Error::Store(StoreError::Other(Box::new(e))))?;
            // The round's own key: a second run of it never overwrites the part a first
            // run committed.
            let key = format!("{id}#{:05}#{}", export.parts.len() + 1, uuid::Uuid::now_v7().simple());
            let mut part = self.exports.put_part(tenant, &export, key, &gzip).await?;
            part.lines = lines;
            Some(part)
        };
        let next = export.after_round(part, work.counts, position, clock.now());
        let mut tx = Transaction::new();
        self.exports.stage_put(&mut tx, tenant, Some(&export), &next)?;
        match tx.commit(self.client()).await {
            Ok(()) => Ok(Some(next)),
            // Another run of this round moved it (or it was ended meanwhile).
            Err(TransactionError::Condition(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Ends export `id` as failed for `why` (a round that cannot succeed, ever).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn export_fail(
        &self,
        tenant: &TenantId,
        id: &ExportId,
        why: &str,
        clock: &dyn Clock,
    ) -> Result<(), Error> {
        let Some(export) = self.exports.get(tenant, id).await? else { return Ok(()) };
        if export.status != ExportStatus::Running {
            return Ok(());
        }
        let mut next = export.clone();
        next.status = ExportStatus::Failed;
        next.error = Some(why.to_owned());
        next.ended_at = Some(clock.now());
        let mut tx = Transaction::new();
        self.exports.stage_put(&mut tx, tenant, Some(&export), &next)?;
        match tx.commit(self.client()).await {
            Ok(()) | Err(TransactionError::Condition(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes the records after `position` that one query reads, while they fit:
    /// answers where the export stands after them, and whether the round goes on.
    async fn export_step(
        &self,
        tenant: &TenantId,
        export: &Export,
        position: &Position,
        work: &mut Round,
    ) -> Result<(Position, Next), Error> {
        let id = |raw: &Option<String>| raw.clone();
        match position {
            Position::Done => Ok((Position::Done, Next::Stop)),
            Position::Workflows { after } => Box::pin(self.export_workflows(tenant, export, id(after), work)).await,
            Position::Executions { after } => Box::pin(self.export_executions(tenant, export, id(after), work)).await,
            Position::Checkpoints { execution, after, sequence } => {
                let cursor = Cursor { after: id(after), sequence: *sequence };
                Box::pin(self.export_checkpoints(tenant, execution, cursor, work)).await
            }
            Position::Failures { after } => Box::pin(self.export_failures(tenant, export, id(after), work)).await,
        }
    }

    async fn export_workflows(
        &self,
        tenant: &TenantId,
        export: &Export,
        mut after: Option<String>,
        work: &mut Round,
    ) -> Result<(Position, Next), Error> {
        let ids: Vec<WorkflowId> = match &export.workflow_id {
            Some(only) if after.is_none() => vec![only.clone()],
            Some(_) => Vec::new(),
            None => {
                let cursor = after.as_deref().and_then(WorkflowId::parse);
                let page = PageRequest { page: 1, page_size: PAGE as u32 };
                let (items, _) = self.workflows.list(tenant, ListFilter::default(), page, cursor.as_ref()).await?;
                items.into_iter().map(|w| w.id).collect()
            }
        };
        let full = export.workflow_id.is_none() && ids.len() == PAGE;
        for id in ids {
            if work.spent() {
                return Ok((Position::Workflows { after }, Next::Stop));
            }
            work.reads += 1;
            match crate::workflows::load(&self.workflows, tenant, &id).await {
                Ok(workflow) => {
                    if work.write("workflow", WorkflowBody::from(workflow))? == Next::Stop {
                        return Ok((Position::Workflows { after }, Next::Stop));
                    }
                    work.counts.workflows += 1;
                }
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            after = Some(id.to_string());
        }
        Ok((if full { Position::Workflows { after } } else { Position::Executions { after: None } }, Next::More))
    }

    async fn export_executions(
        &self,
        tenant: &TenantId,
        export: &Export,
        mut after: Option<String>,
        work: &mut Round,
    ) -> Result<(Position, Next), Error> {
        let list = ListExecutions {
            status: None,
            workflow: export.workflow_id.as_ref().map(ToString::to_string),
            created_after: None,
            created_before: None,
            key: None,
            tags: Vec::new(),
            after: after.as_deref().and_then(ExecutionId::parse),
            skip: 0,
            take: PAGE,
        };
        let (items, _) = Box::pin(self.executions.list(tenant, &list, export.workflow_id.as_ref())).await?;
        let full = items.len() == PAGE;
        let ids: Vec<ExecutionId> = items.into_iter().map(|e| e.id).collect();
        // Boxed in a loop, not mapped by a closure: the future stays Send for any caller.
        let mut loads: Vec<Read<'_, Execution>> = Vec::new();
        for id in &ids {
            loads.push(Box::pin(self.load(tenant, id)));
        }
        let mut loads = stream::iter(loads).buffered(AT_ONCE);
        for id in &ids {
            let Some(loaded) = loads.next().await else { break };
            if work.spent() {
                return Ok((Position::Executions { after }, Next::Stop));
            }
            work.reads += 1;
            let at = id.to_string();
            match loaded {
                Ok(execution) => {
                    let count = execution.checkpoint_count;
                    if work.write("execution", ExecutionBody::from(execution))? == Next::Stop {
                        return Ok((Position::Executions { after }, Next::Stop));
                    }
                    work.counts.executions += 1;
                    if count > 0
                        && let Some(stopped) =
                            Box::pin(self.export_checkpoints_of(tenant, id, Cursor::default(), work)).await?
                    {
                        return Ok((stopped.position(at), Next::Stop));
                    }
                }
                Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
            after = Some(at);
        }
        Ok((if full { Position::Executions { after } } else { Position::Failures { after: None } }, Next::More))
    }

    /// Goes on with the checkpoints of `execution`, whose line is written.
    async fn export_checkpoints(
        &self,
        tenant: &TenantId,
        execution: &str,
        cursor: Cursor,
        work: &mut Round,
    ) -> Result<(Position, Next), Error> {
        let done = Position::Executions { after: Some(execution.to_owned()) };
        let Some(id) = ExecutionId::parse(execution) else { return Ok((done, Next::More)) };
        Ok(match Box::pin(self.export_checkpoints_of(tenant, &id, cursor, work)).await? {
            None => (done, Next::More),
            Some(stopped) => (stopped.position(execution.to_owned()), Next::Stop),
        })
    }

    /// Writes the checkpoints of `execution` after `cursor`, in sequence order: `None`
    /// when all are written, else where the next round goes on (the last one written
    /// before the part filled or the round did its share).
    async fn export_checkpoints_of(
        &self,
        tenant: &TenantId,
        execution: &ExecutionId,
        mut cursor: Cursor,
        work: &mut Round,
    ) -> Result<Option<Cursor>, Error> {
        loop {
            let list = ListCheckpoints {
                after: cursor.after.clone(),
                after_sequence: cursor.sequence,
                take: PAGE,
                ..ListCheckpoints::default()
            };
            let listing = match Box::pin(self.list_checkpoints(tenant, execution, &list)).await {
                Ok(listing) => listing,
                // The execution (or, for an export begun before sequences, the checkpoint
                // the list starts after) is gone.
                Err(Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let listed: Vec<(CheckpointId, u64)> = listing.items.into_iter().map(|c| (c.id, c.sequence)).collect();
            let mut reads: Vec<Read<'_, (Checkpoint, Option<Box<RawValue>>)>> = Vec::new();
            for (id, _) in &listed {
                reads.push(Box::pin(self.checkpoint(tenant, id, true)));
            }
            // In order, a few at once: at most that many states in memory.
            let mut reads = stream::iter(reads).buffered(AT_ONCE);
            for (_, sequence) in &listed {
                let Some(read) = reads.next().await else { break };
                if work.spent() {
                    return Ok(Some(cursor));
                }
                work.reads += 1;
                match read {
                    Ok((checkpoint, state)) => {
                        let mut body = CheckpointBody::from(checkpoint);
                        body.state = state;
                        if work.write("checkpoint", body)? == Next::Stop {
                            return Ok(Some(cursor));
                        }
                        work.counts.checkpoints += 1;
                    }
                    Err(Error::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
                cursor = Cursor { after: None, sequence: Some(*sequence) };
            }
            if listing.next.is_none() {
                return Ok(None);
            }
        }
    }

    async fn export_failures(
        &self,
        tenant: &TenantId,
        export: &Export,
        mut after: Option<String>,
        work: &mut Round,
    ) -> Result<(Position, Next), Error> {
        let list =
            ListFailures { after: after.as_deref().and_then(FailureId::parse), take: PAGE, ..ListFailures::default() };
        let (failures, _) = Box::pin(self.failures.list(tenant, &list)).await?;
        let full = failures.len() == PAGE;
        for failure in failures {
            if work.spent() {
                return Ok((Position::Failures { after }, Next::Stop));
            }
            work.reads += 1;
            let id = failure.id.to_string();
            if export.workflow_id.as_ref().is_none_or(|w| *w == failure.workflow_id) {
                if work.write("failure", FailureDetail::from(failure))? == Next::Stop {
                    return Ok((Position::Failures { after }, Next::Stop));
                }
                work.counts.failures += 1;
            }
            after = Some(id);
        }
        Ok((if full { Position::Failures { after } } else { Position::Done }, Next::More))
    }
}
