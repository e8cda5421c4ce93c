//! The lists of runs as the API's query parameters ask for them, read with `Query`: one
//! place for the rules that `GET /executions`, `GET /checkpoints` and `GET /failures`
//! and the MCP server's tools apply alike (each problem a 422 naming its parameter, all
//! at once; a malformed cursor id answered as an unknown one, 404).

use shared::ApiError;
use shared::body::WireEnum;
use shared::ids::{CheckpointId, ExecutionId, FailureGroupId, FailureId, WorkflowId};
use shared::pagination::{OffsetRequest, PageRequest};
use shared::query::Query;

use super::executions::model::ExecutionStatus;
use super::failures::model::FailureStatus;
use super::{ListExecutions, ListFailures, ListGroups, ReplayFrom};

/// The `page_size` of an executions page when none is asked for.
pub const EXECUTIONS_PAGE_SIZE: u32 = 20;

impl ListExecutions {
    /// `GET /executions`'s filters (`status`, `workflow_id`, `created_after`,
    /// `created_before`, `key` with `workflow_id`, `tag`), page and `starting_after`.
    ///
    /// # Errors
    /// 422 for every bad parameter; 404 for a malformed cursor.
    pub fn from_query(mut query: Query) -> Result<(Self, PageRequest), ApiError> {
        let status = query.one_of::<ExecutionStatus>("status");
        let workflow = query.string("workflow_id");
        let created_after = query.timestamp("created_after");
        let created_before = query.timestamp("created_before");
        let key = query.key("key");
        let tags = query.tags("tag");
        let page = PageRequest::read(&mut query, EXECUTIONS_PAGE_SIZE);
        let after = shared::pagination::starting_after(&mut query);
        if key.is_some() && workflow.is_none() {
            query.reject("key", "needs workflow_id: a key is unique within its workflow".to_owned());
        }
        query.finish()?;
        let after = after
            .map(|raw| ExecutionId::parse(&raw).ok_or_else(|| ApiError::not_found("execution", raw.as_str())))
            .transpose()?;
        let list = Self {
            status,
            workflow,
            created_after,
            created_before,
            key,
            tags,
            after,
            skip: page.skip(),
            take: page.page_size as usize,
        };
        Ok((list, page))
    }
}

impl ListFailures {
    /// `GET /failures`'s filters (`status`, `group_id`, `created_after`,
    /// `created_before`), window (`limit`, `offset`) and `starting_after`.
    ///
    /// # Errors
    /// 422 for every bad parameter; 404 for a malformed group or cursor.
    pub fn from_query(mut query: Query) -> Result<(Self, OffsetRequest), ApiError> {
        let status = query.one_of::<FailureStatus>("status");
        let created_after = query.timestamp("created_after");
        let created_before = query.timestamp("created_before");
        let group = query.string("group_id");
        let window = OffsetRequest::read(&mut query);
        let after = shared::pagination::starting_after(&mut query);
        query.finish()?;
        let group = group
            .map(|raw| FailureGroupId::parse(&raw).ok_or_else(|| ApiError::not_found("failure group", &raw)))
            .transpose()?;
        let after =
            after.map(|raw| FailureId::parse(&raw).ok_or_else(|| ApiError::not_found("failure", &raw))).transpose()?;
        let list = Self {
            status,
            group,
            created_after,
            created_before,
            after,
            skip: window.offset as usize,
            take: window.limit as usize,
        };
        Ok((list, window))
    }
}

/// The order of a checkpoint list (`order`): by sequence, or its reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointOrder {
    /// First checkpoint first (the default).
    Asc,
    /// Newest first.
    Desc,
}

impl WireEnum for CheckpointOrder {
    const ALL: &'static [Self] = &[Self::Asc, Self::Desc];
    fn wire(self) -> &'static str {
        match self {
            Self::Asc => "asc",
            Self::Desc => "desc",
        }
    }
}

impl ReplayFrom {
    /// Where a replay (or its preview) starts, as the query says: `checkpoint_id`, or
    /// `from_start=true`, else the current checkpoint; the rest of the query checked.
    ///
    /// # Errors
    /// 422 for both at once and every other bad parameter; 404 for a malformed checkpoint.
    pub fn from_query(mut query: Query) -> Result<Self, ApiError> {
        let checkpoint = query.string("checkpoint_id");
        let from_start = query.boolean("from_start", false);
        if checkpoint.is_some() && from_start {
            query.reject("from_start", "excludes checkpoint_id: a replay starts from one place".to_owned());
        }
        query.finish()?;
        Ok(match checkpoint {
            Some(raw) => {
                Self::Checkpoint(CheckpointId::parse(&raw).ok_or_else(|| ApiError::not_found("checkpoint", &raw))?)
            }
            None if from_start => Self::Start,
            None => Self::Current,
        })
    }
}

impl ListGroups {
    /// `GET /failures/groups`'s filters (`status`, `workflow_id`, `created_after` and
    /// `created_before` on when a group was last seen) and window.
    ///
    /// # Errors
    /// 422 for every bad parameter; 404 for a malformed workflow id.
    pub fn from_query(mut query: Query) -> Result<(Self, OffsetRequest), ApiError> {
        let status = query.one_of::<FailureStatus>("status");
        let workflow = query.string("workflow_id");
        let seen_after = query.timestamp("created_after");
        let seen_before = query.timestamp("created_before");
        let window = OffsetRequest::read(&mut query);
        query.finish()?;
        let workflow = workflow
            .map(|raw| WorkflowId::parse(&raw).ok_or_else(|| ApiError::not_found("workflow", &raw)))
            .transpose()?;
        let list = Self {
            status,
            workflow,
            seen_after,
            seen_before,
            skip: window.offset as usize,
            take: window.limit as usize,
        };
        Ok((list, window))
    }
}
