//! The workflow domain: types, statuses and the rules of change, free of HTTP and
//! storage.

use std::collections::BTreeMap;

use crate::Error;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use shared::body::WireEnum;
use shared::ids::WorkflowId;

use crate::retention::Retention;

/// The framework a workflow is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowType {
    /// CrewAI.
    Crewai,
    /// LangGraph.
    Langgraph,
    /// AutoGen.
    Autogen,
    /// Semantic Kernel.
    SemanticKernel,
    /// Anything else.
    Custom,
}

impl WireEnum for WorkflowType {
    const ALL: &'static [Self] = &[Self::Crewai, Self::Langgraph, Self::Autogen, Self::SemanticKernel, Self::Custom];

    fn wire(self) -> &'static str {
        match self {
            Self::Crewai => "crewai",
            Self::Langgraph => "langgraph",
            Self::Autogen => "autogen",
            Self::SemanticKernel => "semantic_kernel",
            Self::Custom => "custom",
        }
    }
}

/// Where a workflow is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowStatus {
    /// Being written; the default.
    Draft,
    /// In use.
    Published,
    /// Retired: read-only but for a restore to draft.
    Archived,
}

impl WireEnum for WorkflowStatus {
    const ALL: &'static [Self] = &[Self::Draft, Self::Published, Self::Archived];

    fn wire(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Published => "published",
            Self::Archived => "archived",
        }
    }
}

impl WorkflowStatus {
    /// Statuses a workflow may be created in.
    pub const INITIAL: &'static [Self] = &[Self::Draft, Self::Published];

    /// Whether a workflow in this status may move to `next`. Staying is allowed but for
    /// archived, which only a restore to draft leaves.
    #[must_use]
    pub fn can_become(self, next: Self) -> bool {
        use WorkflowStatus::{Archived, Draft, Published};
        matches!((self, next), (Draft | Published, Draft | Published | Archived) | (Archived, Draft))
    }
}

/// A registered workflow.
#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    /// Its id.
    pub id: WorkflowId,
    /// 1..=200 characters.
    pub name: String,
    /// At most 2000 characters.
    pub description: Option<String>,
    /// The framework.
    pub workflow_type: WorkflowType,
    /// The status.
    pub status: WorkflowStatus,
    /// The graph or agent configuration, at most 64 KiB of JSON.
    pub definition: Option<Map<String, Value>>,
    /// String labels, at most 50.
    pub metadata: BTreeMap<String, String>,
    /// Its own retention, used instead of the tenant's when its executions end
    /// (`None`: the tenant's).
    pub retention: Option<Retention>,
    /// 1 at creation, +1 on every change.
    pub version: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// The fields a client may set at creation.
#[derive(Debug, Clone, PartialEq)]
pub struct NewWorkflow {
    /// See [`Workflow::name`].
    pub name: String,
    /// See [`Workflow::description`].
    pub description: Option<String>,
    /// See [`Workflow::workflow_type`].
    pub workflow_type: WorkflowType,
    /// Draft or published.
    pub status: WorkflowStatus,
    /// See [`Workflow::definition`].
    pub definition: Option<Map<String, Value>>,
    /// See [`Workflow::metadata`].
    pub metadata: BTreeMap<String, String>,
    /// Its own retention (`None`: the tenant's).
    pub retention: Option<Retention>,
}

/// A change a client asks for: each `Some` replaces the old value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowChange {
    /// New name.
    pub name: Option<String>,
    /// New description (`Some(None)` clears it).
    pub description: Option<Option<String>>,
    /// New type.
    pub workflow_type: Option<WorkflowType>,
    /// New status.
    pub status: Option<WorkflowStatus>,
    /// New definition (`Some(None)` clears it).
    pub definition: Option<Option<Map<String, Value>>>,
    /// New metadata, replacing the old map whole.
    pub metadata: Option<BTreeMap<String, String>>,
    /// Its own retention: `Some(None)` takes it away.
    pub retention: Option<Option<Retention>>,
}

impl WorkflowChange {
    /// Whether the change is exactly a restore to draft, the one change an archived
    /// workflow accepts.
    fn is_restore(&self) -> bool {
        *self == Self { status: Some(WorkflowStatus::Draft), ..Self::default() }
    }
}

impl Workflow {
    /// A new workflow at version 1.
    #[must_use]
    pub fn create(new: NewWorkflow, now: DateTime<Utc>) -> Self {
        Self {
            id: WorkflowId::generate(),
            name: new.name,
            description: new.description,
            workflow_type: new.workflow_type,
            status: new.status,
            definition: new.definition,
            metadata: new.metadata,
            retention: new.retention,
            version: 1,
            created_at: now,
            updated_at: now,
        }
    }

    /// The workflow after `change`, or `None` when nothing would change.
    ///
    /// # Errors
    /// [`Error::InvalidState`] when the workflow is archived and the change is not a
    /// restore to draft, or the status may not move as asked.
    pub fn apply(&self, change: WorkflowChange, now: DateTime<Utc>) -> Result<Option<Self>, Error> {
        if self.status == WorkflowStatus::Archived && !change.is_restore() {
            return Err(Error::InvalidState(format!(
                "workflow {} is archived; only {{\"status\":\"draft\"}} is accepted to restore it",
                self.id
            )));
        }
        let mut next = self.clone();
        if let Some(status) = change.status {
            if !self.status.can_become(status) {
                return Err(Error::InvalidState(format!(
                    "workflow {} cannot move from {} to {}",
                    self.id,
                    self.status.wire(),
                    status.wire()
                )));
            }
            next.status = status;
        }
        if let Some(name) = change.name {
            next.name = name;
        }
        if let Some(description) = change.description {
            next.description = description;
        }
        if let Some(workflow_type) = change.workflow_type {
            next.workflow_type = workflow_type;
        }
        if let Some(definition) = change.definition {
            next.definition = definition;
        }
        if let Some(metadata) = change.metadata {
            next.metadata = metadata;
        }
        if let Some(retention) = change.retention {
            next.retention = retention;
        }
        if next == *self {
            return Ok(None);
        }
        next.version = self.version + 1;
        next.updated_at = now;
        Ok(Some(next))
    }

    /// The counters this workflow is counted under (see [`counter_name`]).
    #[must_use]
    pub fn counters(&self) -> Vec<String> {
        let (s, t) = (Some(self.status), Some(self.workflow_type));
        vec![counter_name(None, None), counter_name(s, None), counter_name(None, t), counter_name(s, t)]
    }
}

/// The counter behind the `total` of a list with these filters.
#[must_use]
pub fn counter_name(status: Option<WorkflowStatus>, workflow_type: Option<WorkflowType>) -> String {
    let mut name = "workflows".to_owned();
    if let Some(status) = status {
        name.push_str("|status=");
        name.push_str(status.wire());
    }
    if let Some(workflow_type) = workflow_type {
        name.push_str("|type=");
        name.push_str(workflow_type.wire());
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use WorkflowStatus::{Archived, Draft, Published};

    fn workflow(status: WorkflowStatus) -> Workflow {
        let now = Utc::now();
        let mut w = Workflow::create(
            NewWorkflow {
                name: "triage".to_owned(),
                description: None,
                workflow_type: WorkflowType::Crewai,
                status: Draft,
                definition: None,
                metadata: BTreeMap::new(),
                retention: None,
            },
            now,
        );
        w.status = status;
        w
    }

    #[test]
    fn the_transition_table_of_the_contract() {
        let allowed =
            [(Draft, Published), (Draft, Archived), (Published, Draft), (Published, Archived), (Archived, Draft)];
        for from in WorkflowStatus::ALL {
            for to in WorkflowStatus::ALL {
                let expected = from == to && *from != Archived || allowed.contains(&(*from, *to));
                assert_eq!(from.can_become(*to), expected, "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn archived_accepts_only_a_restore_to_draft() {
        let archived = workflow(Archived);
        let rename = WorkflowChange { name: Some("x".to_owned()), ..WorkflowChange::default() };
        assert!(matches!(archived.apply(rename, Utc::now()), Err(Error::InvalidState(_))));
        let publish = WorkflowChange { status: Some(Published), ..WorkflowChange::default() };
        assert!(matches!(archived.apply(publish, Utc::now()), Err(Error::InvalidState(_))));
        let restore_and_rename =
            WorkflowChange { status: Some(Draft), name: Some("x".to_owned()), ..WorkflowChange::default() };
        assert!(archived.apply(restore_and_rename, Utc::now()).is_err());
        let restore = WorkflowChange { status: Some(Draft), ..WorkflowChange::default() };
        let restored = archived.apply(restore, Utc::now()).expect("allowed").expect("changed");
        assert_eq!((restored.status, restored.version), (Draft, 2));
    }

    #[test]
    fn a_change_that_changes_nothing_keeps_the_version() {
        let draft = workflow(Draft);
        let same = WorkflowChange { name: Some(draft.name.clone()), status: Some(Draft), ..WorkflowChange::default() };
        assert_eq!(draft.apply(same, Utc::now()).expect("allowed"), None);
    }

    #[test]
    fn counters_cover_every_filter_combination() {
        let w = workflow(Published);
        assert_eq!(
            w.counters(),
            [
                "workflows",
                "workflows|status=published",
                "workflows|type=crewai",
                "workflows|status=published|type=crewai"
            ]
        );
    }
}
