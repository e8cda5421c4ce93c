//! What a stream record reports: the dispatcher's reading of one record of a DynamoDB
//! stream, as Lambda's event source mapping hands it over (`dynamodb.NewImage` in
//! DynamoDB's JSON). Two streams feed it:
//!
//! - the `events` table's (the outbox): an item's events, written in the transaction
//!   of the change they report ([`super::events::stage`]);
//! - the `executions` table's: an execution's item, written by its start (marked so),
//!   is its `execution.started` event, so a start writes no outbox item;
//! - the `checkpoints` table's: a checkpoint's by-execution entry, written in the
//!   checkpoint's own transaction, is its `checkpoint.created` event (an opt-in type, so
//!   a checkpoint write carries no outbox item of its own and costs nothing more
//!   whether anyone subscribes or not).

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use serde_json::Value;
use shared::TenantId;
use shared::dynamo::{Item, StoreError};

use super::deliveries::owner;
use super::events::{Event, decode};

/// What a record reports.
#[derive(Debug)]
pub enum Reported {
    /// Events of a tenant.
    Events(TenantId, Vec<Event>),
    /// Nothing to deliver: not a new item, or an item of the table that is no event.
    Nothing,
}

/// The events `record` reports.
///
/// # Errors
/// [`StoreError::Corrupt`] for an item this code cannot read (never readable on a
/// retry either: the dispatcher passes it over).
pub fn reported(record: &Value) -> Result<Reported, StoreError> {
    if record["eventName"] != "INSERT" {
        return Ok(Reported::Nothing);
    }
    let item = image(&record["dynamodb"]["NewImage"])
        .ok_or_else(|| StoreError::Corrupt("a stream record without a readable NewImage".to_owned()))?;
    let tenant = |raw: &str| {
        owner(raw).ok_or_else(|| StoreError::Corrupt(format!("an item outside a tenant's partition: {raw}")))
    };
    if let (Some(partition), Some(encoded)) = (text(&item, "tenant_id"), text(&item, "events")) {
        // The tenant's shard (`ten_…#07`), or its own partition (an item from before).
        let partition = partition.split_once('#').map_or(partition, |(tenant, _)| tenant);
        return Ok(Reported::Events(tenant(partition)?, decode(encoded)?));
    }
    if let Some((partition, execution)) = crate::runs::executions::store::started_entry(&item)? {
        let partition = partition.split_once('#').map_or(partition.as_str(), |(tenant, _)| tenant);
        return Ok(Reported::Events(tenant(partition)?, vec![Event::execution_started(&execution)]));
    }
    match crate::runs::checkpoints::store::created_entry(item)? {
        Some((partition, checkpoint)) => {
            Ok(Reported::Events(tenant(&partition)?, vec![Event::checkpoint(&checkpoint)]))
        }
        None => Ok(Reported::Nothing),
    }
}

fn text<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| v.as_s().ok()).map(String::as_str)
}

/// An item from DynamoDB's JSON form (`{"name": {"S": "…"}, …}`), as stream records
/// carry it; `None` when it is not of that form.
#[must_use]
pub fn image(json: &Value) -> Option<Item> {
    json.as_object()?.iter().map(|(name, value)| Some((name.clone(), attribute(value)?))).collect()
}

fn attribute(json: &Value) -> Option<AttributeValue> {
    let (kind, value) = json.as_object().filter(|o| o.len() == 1)?.iter().next()?;
    let texts = || value.as_array()?.iter().map(|v| v.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>();
    let blob = |v: &Value| base64::engine::general_purpose::STANDARD.decode(v.as_str()?).ok().map(Blob::new);
    Some(match kind.as_str() {
        "S" => AttributeValue::S(value.as_str()?.to_owned()),
        "N" => AttributeValue::N(value.as_str()?.to_owned()),
        "B" => AttributeValue::B(blob(value)?),
        "BOOL" => AttributeValue::Bool(value.as_bool()?),
        "NULL" => AttributeValue::Null(value.as_bool()?),
        "SS" => AttributeValue::Ss(texts()?),
        "NS" => AttributeValue::Ns(texts()?),
        "BS" => AttributeValue::Bs(value.as_array()?.iter().map(blob).collect::<Option<_>>()?),
        "L" => AttributeValue::L(value.as_array()?.iter().map(attribute).collect::<Option<_>>()?),
        "M" => AttributeValue::M(image(value)?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_image_in_dynamodbs_json_reads_as_the_item_it_was() {
        let item = image(&json!({
            "s": {"S": "a"}, "n": {"N": "42"}, "b": {"B": "AAEC"}, "t": {"BOOL": true}, "z": {"NULL": true},
            "l": {"L": [{"S": "x"}, {"N": "1"}]}, "m": {"M": {"k": {"SS": ["p", "q"]}}}, "ns": {"NS": ["1", "2"]},
        }))
        .expect("an image");
        assert_eq!(item["s"], AttributeValue::S("a".into()));
        assert_eq!(item["n"], AttributeValue::N("42".into()));
        assert_eq!(item["b"], AttributeValue::B(Blob::new(vec![0, 1, 2])));
        assert_eq!(item["t"], AttributeValue::Bool(true));
        assert_eq!(item["z"], AttributeValue::Null(true));
        assert_eq!(item["l"], AttributeValue::L(vec![AttributeValue::S("x".into()), AttributeValue::N("1".into())]));
        assert_eq!(item["m"].as_m().expect("a map")["k"], AttributeValue::Ss(vec!["p".into(), "q".into()]));
        assert_eq!(item["ns"], AttributeValue::Ns(vec!["1".into(), "2".into()]));
        assert!(image(&json!({"s": {"X": "a"}})).is_none(), "an unknown type is not read");
        assert!(image(&json!({"s": {"S": "a", "N": "1"}})).is_none(), "two types are not one value");
    }

    #[test]
    fn a_checkpoints_by_execution_entry_reports_its_creation_under_the_checkpoints_own_id() {
        let hex = "0190aa00bb00cc00dd00ee00ff001122";
        let tenant = format!("ten_{hex}");
        let entry = |entry: &str| {
            json!({
                "tenant_id": {"S": tenant}, "entry": {"S": entry}, "id": {"S": format!("cp_{hex}")},
                "execution_id": {"S": format!("exec_{hex}")}, "workflow_id": {"S": format!("wf_{hex}")},
                "sequence": {"N": "7"}, "name": {"S": "plan"}, "parent_checkpoint_id": {"NULL": true},
                "attempt": {"N": "1"}, "metadata": {"M": {"node": {"S": "plan"}}}, "state_size_bytes": {"N": "12"},
                "created_at": {"S": "2026-11-27T05:00:00.000Z"}, "state_parts": {"N": "0"},
            })
        };
        let record = |image: Value| json!({"eventName": "INSERT", "dynamodb": {"NewImage": image}});
        let Ok(Reported::Events(owner, events)) = reported(&record(entry(&format!("exec_{hex}#0000000007")))) else {
            panic!("the by-execution entry reports its checkpoint");
        };
        assert_eq!(owner.as_str(), tenant);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, super::super::EventType::CheckpointCreated);
        assert_eq!(events[0].id.as_str(), format!("evt_{hex}"), "the same event however often it is read");
        assert_eq!(events[0].data["sequence"], 7);
        assert_eq!(events[0].workflow_id.as_deref(), Some(format!("wf_{hex}").as_str()));
        // The by-id entry (with the state) is not the report; a by-execution key that is
        // not its checkpoint's is corrupt.
        assert!(matches!(reported(&record(entry(&format!("cp_{hex}")))), Ok(Reported::Nothing)));
        assert!(reported(&record(entry(&format!("exec_{hex}#0000000008")))).is_err());
        // An execution that keeps its checkpoints apart: its own partition, same owner.
        let mut apart = entry(&format!("exec_{hex}#0000000007"));
        apart["tenant_id"] = json!({"S": format!("{tenant}#exec_{hex}")});
        let Ok(Reported::Events(owner, _)) = reported(&record(apart)) else { panic!("reported") };
        assert_eq!(owner.as_str(), tenant);
    }

    #[test]
    fn an_execution_item_its_start_marked_reports_it_started_under_the_executions_own_id() {
        let hex = "0190aa00bb00cc00dd00ee00ff001122";
        let tenant = format!("ten_{hex}");
        let item = |marked: bool| {
            let mut item = json!({
                "tenant_id": {"S": format!("{tenant}#02")}, "id": {"S": format!("exec_{hex}")},
                "workflow_id": {"S": format!("wf_{hex}")}, "status": {"S": "running"},
                "input": {"M": {"inline": {"B": "AAEC"}, "external": {"BOOL": false}}},
                "output": {"M": {"external": {"BOOL": false}}},
                "error_type": {"NULL": true}, "error_message": {"NULL": true}, "cancel_reason": {"NULL": true},
                "client_key": {"S": "run-1"}, "metadata": {"M": {}}, "attempt": {"N": "1"},
                "current_checkpoint_id": {"NULL": true}, "checkpoint_count": {"N": "0"}, "last_sequence": {"N": "0"},
                "failure_ids": {"L": []}, "version": {"N": "1"}, "created_at": {"S": "2026-12-05T05:00:00.000Z"},
                "updated_at": {"S": "2026-12-05T05:00:00.000Z"}, "ended_at": {"NULL": true},
                "tenant_status": {"S": format!("{tenant}#02#running")},
                "tenant_workflow": {"S": format!("{tenant}#02#wf_{hex}")},
                "tenant_workflow_status": {"S": format!("{tenant}#02#wf_{hex}#running")},
            });
            if marked {
                item["started_by_stream"] = json!({"BOOL": true});
            }
            json!({"eventName": "INSERT", "dynamodb": {"NewImage": item}})
        };
        let Ok(Reported::Events(owner, events)) = reported(&item(true)) else { panic!("the start reports") };
        assert_eq!(owner.as_str(), tenant, "the tenant of the shard the item is in");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, super::super::EventType::ExecutionStarted);
        assert_eq!(events[0].id.as_str(), format!("evt_{hex}"), "the same event however often it is read");
        assert_eq!(events[0].data["status"], "running");
        assert_eq!(events[0].data["key"], "run-1");
        assert_eq!(events[0].data["created_at"], "2026-12-05T05:00:00.000Z");
        assert_eq!(events[0].workflow_id.as_deref(), Some(format!("wf_{hex}").as_str()));
        // An item an earlier version started: its event is in the outbox.
        assert!(matches!(reported(&item(false)), Ok(Reported::Nothing)));
    }

    #[test]
    fn an_outbox_item_reports_its_events_for_the_tenant_of_its_shard() {
        let tenant = "ten_0190aa00bb00cc00dd00ee00ff001122";
        let record = |partition: String| json!({"eventName": "INSERT", "dynamodb": {"NewImage": {"tenant_id": {"S": partition}, "events": {"S": "[]"}}}});
        for partition in [format!("{tenant}#07"), tenant.to_owned()] {
            let Ok(Reported::Events(owner, _)) = reported(&record(partition)) else { panic!("reported") };
            assert_eq!(owner.as_str(), tenant);
        }
        assert!(reported(&record("nobody#07".to_owned())).is_err());
    }

    #[test]
    fn only_a_new_item_reports_and_another_tables_item_reports_nothing() {
        let record = |name: &str, image: Value| json!({"eventName": name, "dynamodb": {"NewImage": image}});
        let pointer =
            json!({"tenant_id": {"S": "ten_x"}, "entry": {"S": "exec_0#key#k"}, "checkpoint_id": {"S": "cp_0"}});
        assert!(matches!(reported(&record("MODIFY", json!({}))), Ok(Reported::Nothing)));
        assert!(matches!(reported(&record("INSERT", pointer)), Ok(Reported::Nothing)));
        assert!(reported(&record("INSERT", json!({"tenant_id": {"S": "t"}, "events": {"S": "[]"}}))).is_err());
    }
}
