//! What a replay will run again: the checkpoints an execution recorded after the one a
//! replay starts from, as steps (by checkpoint name) and tool calls (the names the tracing
//! integrations record in a checkpoint's `cairn.tools` metadata), read from the checkpoints'
//! entries (names and metadata; never their states).

use shared::TenantId;
use shared::ids::ExecutionId;

use super::checkpoints::model::{Checkpoint, LAST_SEQUENCE, ListWindow};
use super::executions::model::{Action, Execution};
use super::{ReplayFrom, Runs};
use crate::Error;

/// Checkpoints a preview reads at most: beyond, it says there are more.
pub const PREVIEW_MAX: usize = 1000;
/// Checkpoints a preview lists one by one (the rest are in its counts).
pub const PREVIEW_SHOWN: usize = 20;
/// The metadata key in which an integration names the tools a step called,
/// comma-separated.
pub const TOOLS_KEY: &str = "cairn.tools";
/// Distinct steps, and distinct tools, a preview names at most (the first recorded).
pub const PREVIEW_NAMES: usize = 100;

/// Names in the order first recorded, each with how often.
pub type Counted = Vec<(String, u64)>;

/// What a replay of an execution from a checkpoint would run again.
#[derive(Debug)]
pub struct ReplayPreview {
    /// The execution as it is.
    pub execution: Execution,
    /// Why a replay would be refused now (`None`: it would be accepted).
    pub refused: Option<String>,
    /// The checkpoint it starts from (`None`: the start).
    pub from: Option<Checkpoint>,
    /// Checkpoints recorded after it (at most [`PREVIEW_MAX`] counted).
    pub after: u64,
    /// Whether more than [`PREVIEW_MAX`] were recorded after it.
    pub more: bool,
    /// The steps run again: each checkpoint name, in the order first recorded, and how
    /// often.
    pub steps: Counted,
    /// The tool calls run again: each tool, in the order first recorded, and how often.
    pub tools: Counted,
    /// The first [`PREVIEW_SHOWN`] checkpoints after it.
    pub first: Vec<Checkpoint>,
    /// What the replay costs.
    pub cost: i64,
}

/// Each name in the order first seen (the first [`PREVIEW_NAMES`]), and how often.
fn tally<'a>(names: impl Iterator<Item = &'a str>) -> Counted {
    let mut counted: Counted = Vec::new();
    for name in names {
        let full = counted.len() >= PREVIEW_NAMES;
        match counted.iter_mut().find(|(seen, _)| seen == name) {
            Some((_, n)) => *n += 1,
            None if !full => counted.push((name.to_owned(), 1)),
            None => {}
        }
    }
    counted
}

/// The steps (checkpoint names; `(unnamed)` for none) and the tool calls (the
/// [`TOOLS_KEY`] metadata) of `checkpoints`.
#[must_use]
pub fn summarize(checkpoints: &[Checkpoint]) -> (Counted, Counted) {
    let steps = tally(checkpoints.iter().map(|c| c.name.as_deref().unwrap_or("(unnamed)")));
    let tools = tally(
        checkpoints
            .iter()
            .filter_map(|c| c.metadata.get(TOOLS_KEY))
            .flat_map(|list| list.split(',').map(str::trim).filter(|t| !t.is_empty())),
    );
    (steps, tools)
}

impl Runs {
    /// What replaying execution `id` from `from` would run again (nothing is changed).
    ///
    /// # Errors
    /// [`Error::NotFound`] for the execution, or a checkpoint that is not its own;
    /// storage errors.
    pub async fn replay_preview(
        &self,
        tenant: &TenantId,
        id: &ExecutionId,
        from: &ReplayFrom,
    ) -> Result<ReplayPreview, Error> {
        let execution = self.load(tenant, id).await?;
        let target = match from {
            ReplayFrom::Start => None,
            ReplayFrom::Current => execution.current_checkpoint_id.clone(),
            ReplayFrom::Checkpoint(cp) => Some(cp.clone()),
        };
        let from = match &target {
            Some(cp) => Some(self.checkpoint_of(tenant, &execution, cp).await?.checkpoint),
            None => None,
        };
        let window = ListWindow {
            from_sequence: from.as_ref().map_or(1, |c| c.sequence + 1),
            through_sequence: LAST_SEQUENCE,
            descending: false,
            metadata: std::collections::BTreeMap::new(),
        };
        let page = self.checkpoints.list(tenant, &execution, &window, 0, PREVIEW_MAX + 1).await?;
        let mut items = page.items;
        let more = items.len() > PREVIEW_MAX;
        items.truncate(PREVIEW_MAX);
        let (steps, tools) = summarize(&items);
        let refused = match execution.check(&Action::Replay { from: target }) {
            Ok(()) => None,
            Err(error) => Some(error.to_string()),
        };
        Ok(ReplayPreview {
            refused,
            from,
            after: items.len() as u64,
            more,
            steps,
            tools,
            first: items.into_iter().take(PREVIEW_SHOWN).collect(),
            cost: self.execution_cost,
            execution,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::Utc;
    use shared::ids::{CheckpointId, ExecutionId, WorkflowId};

    use super::*;

    fn checkpoint(name: Option<&str>, tools: Option<&str>) -> Checkpoint {
        Checkpoint {
            id: CheckpointId::generate(),
            execution_id: ExecutionId::generate(),
            workflow_id: WorkflowId::generate(),
            sequence: 1,
            name: name.map(str::to_owned),
            key: None,
            parent_checkpoint_id: None,
            attempt: 1,
            metadata: tools.map(|t| BTreeMap::from([(TOOLS_KEY.to_owned(), t.to_owned())])).unwrap_or_default(),
            state_size_bytes: 0,
            created_at: Utc::now(),
        }
    }

    #[test]
    fn steps_and_tool_calls_are_counted_in_the_order_first_recorded() {
        let run = [
            checkpoint(Some("agent"), None),
            checkpoint(Some("tools"), Some("web_search, fetch")),
            checkpoint(Some("agent"), None),
            checkpoint(Some("tools"), Some("web_search")),
            checkpoint(None, Some(" ,")),
        ];
        let (steps, tools) = summarize(&run);
        let owned = |v: &[(&str, u64)]| v.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect::<Vec<_>>();
        assert_eq!(steps, owned(&[("agent", 2), ("tools", 2), ("(unnamed)", 1)]));
        assert_eq!(tools, owned(&[("web_search", 2), ("fetch", 1)]));
        assert_eq!(summarize(&[]), (Vec::new(), Vec::new()));
        let many: Vec<Checkpoint> = (0..150).map(|i| checkpoint(Some(&format!("s{i}")), None)).collect();
        assert_eq!(summarize(&many).0.len(), PREVIEW_NAMES, "the first 100 names");
    }
}
