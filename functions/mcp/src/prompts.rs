//! The prompts: ready-made requests an agent's user picks by name ("triage the open
//! failures"), which tell the agent how to do the work with the tools.

use serde_json::{Map, Value, json};

/// The one prompt's name.
pub const TRIAGE: &str = "triage_open_failures";

/// `prompts/list`.
#[must_use]
pub fn listed() -> Value {
    json!([{
        "name": TRIAGE,
        "title": "Triage the open failures",
        "description": "Groups the open failures by cause, finds what each cause's executions were doing \
    when they failed, and proposes (without doing it) a replay, a fix or an ignore for each.",
        "arguments": [{
            "name": "workflow_id",
            "description": "Only this workflow's failures (wf_...); all workflows when left out.",
            "required": false,
        }],
    }])
}

/// `prompts/get` for `name` with `arguments`: its messages, or why not.
///
/// # Errors
/// An unknown prompt, or an argument it does not take (the JSON-RPC error's message).
pub fn get(name: &str, arguments: &Map<String, Value>) -> Result<Value, String> {
    if name != TRIAGE {
        return Err(format!("no prompt {name:?}"));
    }
    if let Some(unknown) = arguments.keys().find(|key| key.as_str() != "workflow_id") {
        return Err(format!("prompt {TRIAGE} takes no argument {unknown:?}"));
    }
    let scope = match arguments.get("workflow_id").and_then(Value::as_str).filter(|w| !w.is_empty()) {
        Some(workflow) => format!("the open failures of workflow {workflow}"),
        None => "the open failures of every workflow".to_owned(),
    };
    let text = format!(
        "Triage {scope} in Cairn, with the Cairn tools.\n\
1. Call failure_stats, then list_failures with status \"open\" (go on with starting_after until \
you have them all, or the first 200).\n\
2. Group them by cause: list_failure_groups with status \"open\" has the groups and their counts \
(each failure's group_id names its group).\n\
3. For each cause, take its newest failure: get_failure for the details and traceback, \
get_execution for its input, list_checkpoints for the steps it reached, get_checkpoint \
with include_state for the last checkpoint before the failure, and diff_checkpoints for what \
its last steps changed.\n\
4. Report each cause: how many failures, since when, the failing step, the likely reason, and \
one proposal: replay (from which checkpoint, and what it costs: 1 credit an execution), a fix \
to make first, or ignore.\n\
Do not call replay_execution, rollback_execution, cancel_execution, resolve_failure or \
ignore_failure until the user agrees to the proposal."
    );
    Ok(json!({
        "description": format!("Triage {scope}"),
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }))
}
