//! The workflow endpoints: each parses its request, calls one `domain::workflows`
//! operation, and answers.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use http::{HeaderMap, StatusCode, header};
use serde_json::Value;
use shared::body::{Fields, JsonBody, WireEnum, json_object, one_of, string_map, text};
use shared::idempotency::{self, Answer};
use shared::ids::PathId;
use shared::ids::WorkflowId;
use shared::pagination::{PageBody, PageRequest};
use shared::query::Query;
use shared::{ApiError, TenantId};

use crate::AppState;
use domain::retention::Retention;
use domain::views::{WorkflowBody, WorkflowSummary};
use domain::workflows::model::{NewWorkflow, Workflow, WorkflowChange, WorkflowStatus, WorkflowType};
use domain::workflows::store::ListFilter;
use domain::workflows::{self as workflows, Precondition};

/// Longest name.
const NAME_MAX: usize = 200;
/// Longest description.
const DESCRIPTION_MAX: usize = 2000;
/// Largest definition, as serialized JSON.
const DEFINITION_MAX_BYTES: usize = 64 * 1024;
/// Most metadata keys.
const METADATA_MAX_KEYS: usize = 50;
/// Default `page_size` of the list.
const DEFAULT_PAGE_SIZE: u32 = 20;
/// Fields the server owns.
const READ_ONLY: &[&str] = &["id", "version", "created_at", "updated_at"];

/// A 200 (or `status`) with the workflow and its `ETag`.
fn respond(status: StatusCode, w: Workflow) -> Result<Response, ApiError> {
    Ok(answer(status, w)?.into_response())
}

/// A workflow as an answer, with its version as `ETag`.
fn answer(status: StatusCode, w: Workflow) -> Result<Answer, ApiError> {
    let version = w.version;
    Ok(Answer::json(status, &WorkflowBody::from(w))?.tagged(version))
}

fn reject_read_only(fields: &mut Fields) {
    for name in fields.names() {
        if READ_ONLY.contains(&name.as_str()) {
            fields.reject(name, "is read-only");
        }
    }
}

/// A new workflow, and its own retention as sent (checked against the plan later).
fn parse_new(body: Value) -> Result<(NewWorkflow, Option<Value>), ApiError> {
    let mut f = Fields::new(body)?;
    reject_read_only(&mut f);
    let name = f.required("name", text(1, NAME_MAX));
    let workflow_type = f.required("workflow_type", one_of(WorkflowType::ALL));
    let description = f.nullable("description", text(0, DESCRIPTION_MAX));
    let definition = f.nullable("definition", json_object(DEFINITION_MAX_BYTES));
    let metadata = f.optional("metadata", string_map(METADATA_MAX_KEYS));
    let status = f.optional("status", one_of(WorkflowStatus::INITIAL));
    let retention = f.nullable("retention", |v| Ok::<_, String>(v.clone()));
    drop_known(&mut f, READ_ONLY);
    f.finish()?;
    let (Some(name), Some(workflow_type)) = (name, workflow_type) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    let new = NewWorkflow {
        name,
        workflow_type,
        description: description.into_update().flatten(),
        definition: definition.into_update().flatten(),
        metadata: metadata.unwrap_or_default(),
        status: status.unwrap_or(WorkflowStatus::Draft),
        retention: None,
    };
    Ok((new, retention.into_update().flatten()))
}

/// Removes read-only fields (already reported) so they are not reported as unknown too.
fn drop_known(fields: &mut Fields, names: &[&'static str]) {
    for name in names {
        let _ = fields.nullable(name, |v| Ok::<_, String>(v.clone()));
    }
}

/// A change, and a change of its own retention as sent (`Some(None)`: taken away).
fn parse_change(body: Value) -> Result<(WorkflowChange, Option<Option<Value>>), ApiError> {
    let mut f = Fields::new(body)?;
    if f.is_empty() {
        return Err(ApiError::field(
            "body",
            "must contain at least one of name, description, definition, metadata, retention, status, workflow_type",
        ));
    }
    reject_read_only(&mut f);
    let name = f.optional("name", text(1, NAME_MAX));
    let workflow_type = f.optional("workflow_type", one_of(WorkflowType::ALL));
    let description = f.nullable("description", text(0, DESCRIPTION_MAX));
    let definition = f.nullable("definition", json_object(DEFINITION_MAX_BYTES));
    let metadata = f.optional("metadata", string_map(METADATA_MAX_KEYS));
    let status = f.optional("status", one_of(WorkflowStatus::ALL));
    let retention = f.nullable("retention", |v| Ok::<_, String>(v.clone()));
    drop_known(&mut f, READ_ONLY);
    f.finish()?;
    let change = WorkflowChange {
        name,
        description: description.into_update(),
        workflow_type,
        status,
        definition: definition.into_update(),
        metadata,
        retention: None,
    };
    Ok((change, retention.into_update()))
}

/// A workflow's own retention as sent, checked against the tenant's plan; a tenant whose
/// workflow has one is noted, so that its executions' endings read it.
async fn own_retention(state: &AppState, tenant: &TenantId, sent: Value) -> Result<Retention, ApiError> {
    let standing = state.retention.read(tenant).await?;
    let mut errors = Vec::new();
    let retention = domain::retention::read(sent, "retention.", standing.plan, &mut errors);
    let retention = retention.ok_or(ApiError::Validation(errors))?;
    if !standing.overrides {
        state.retention.note_overrides(tenant).await.map_err(domain::Error::from)?;
    }
    Ok(retention)
}

/// What the `If-Match` header asks for.
fn precondition(headers: &HeaderMap) -> Precondition {
    let values: Vec<&str> = headers.get_all(header::IF_MATCH).iter().filter_map(|v| v.to_str().ok()).collect();
    if values.is_empty() {
        return Precondition::None;
    }
    let tags = values.iter().flat_map(|v| v.split(',')).map(str::trim);
    let mut versions = Vec::new();
    for tag in tags {
        if tag == "*" {
            return Precondition::Any;
        }
        let tag = tag.strip_prefix("W/").unwrap_or(tag);
        if let Some(version) = tag.strip_prefix('"').and_then(|t| t.strip_suffix('"')).and_then(|t| t.parse().ok()) {
            versions.push(version);
        }
    }
    Precondition::Versions(versions)
}

fn parse_id(raw: &str) -> Result<WorkflowId, ApiError> {
    WorkflowId::parse(raw).ok_or_else(|| ApiError::not_found("workflow", raw))
}

async fn load(state: &AppState, tenant: &TenantId, id: &WorkflowId) -> Result<Workflow, ApiError> {
    Ok(workflows::load(&state.store, tenant, id).await?)
}

/// `POST /workflows`
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let (mut new, retention) = parse_new(body)?;
    if let Some(sent) = retention {
        new.retention = Some(own_retention(&state, &tenant, sent).await?);
    }
    // Known before the write: with an Idempotency-Key it is stored in the write's own
    // transaction.
    let created = |w: &Workflow| answer(StatusCode::CREATED, w.clone())?.located(&format!("workflows/{}", w.id));
    let announce = |w: &Workflow| idempotency::announce(|| created(w));
    let workflow = workflows::create(&state.store, &tenant, new, state.clock.now(), &announce).await?;
    Ok(created(&workflow)?.into_response())
}

/// `GET /workflows`
pub async fn list(
    State(state): State<AppState>,
    tenant: TenantId,
    mut query: Query,
) -> Result<Json<PageBody<WorkflowSummary>>, ApiError> {
    let filter = ListFilter {
        status: query.one_of("status"),
        workflow_type: query.one_of("workflow_type"),
        name: query.string("name").filter(|name| {
            let fits = name.chars().count() <= NAME_MAX;
            if !fits {
                query.reject("name", format!("must be at most {NAME_MAX} characters"));
            }
            fits
        }),
    };
    let page = PageRequest::read(&mut query, DEFAULT_PAGE_SIZE);
    let after = shared::pagination::starting_after(&mut query);
    query.finish()?;
    let after = after.map(|raw| parse_id(&raw)).transpose()?;
    let (workflows, total) = Box::pin(workflows::list(&state.store, &tenant, filter, page, after.as_ref())).await?;
    Ok(Json(page.respond(workflows.into_iter().map(WorkflowSummary::from).collect(), total)))
}

/// `GET /workflows/{workflow_id}`
pub async fn get(State(state): State<AppState>, tenant: TenantId, PathId(raw): PathId) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    respond(StatusCode::OK, load(&state, &tenant, &id).await?)
}

/// `PUT /workflows/{workflow_id}`
pub async fn update(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let (mut change, retention) = parse_change(body)?;
    change.retention = match retention {
        Some(Some(sent)) => Some(Some(own_retention(&state, &tenant, sent).await?)),
        Some(None) => Some(None),
        None => None,
    };
    let workflow =
        workflows::update(&state.store, &tenant, &id, &precondition(&headers), &change, state.clock.now()).await?;
    respond(StatusCode::OK, workflow)
}

/// `DELETE /workflows/{workflow_id}`
pub async fn delete(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&raw)?;
    workflows::delete(&state.store, &tenant, &id, &precondition(&headers)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn field_names(error: ApiError) -> Vec<String> {
        match error {
            ApiError::Validation(errors) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("expected 422, got {other:?}"),
        }
    }

    #[test]
    fn create_defaults_to_draft_with_empty_metadata() {
        let (new, retention) = parse_new(json!({"name": "triage", "workflow_type": "crewai"})).expect("valid");
        assert_eq!(retention, None);
        assert_eq!(new.status, WorkflowStatus::Draft);
        assert!(new.metadata.is_empty());
        assert_eq!(new.definition, None);
    }

    #[test]
    fn create_refuses_archived_read_only_and_unknown_fields_together() {
        let error = parse_new(json!({
            "name": "x", "workflow_type": "crewai", "status": "archived", "id": "wf_1", "nmae": "typo"
        }))
        .expect_err("invalid");
        assert_eq!(field_names(error), ["id", "status", "nmae"]);
    }

    #[test]
    fn change_must_not_be_empty_and_keeps_null_apart_from_absent() {
        assert_eq!(field_names(parse_change(json!({})).expect_err("empty")), ["body"]);
        let (change, retention) = parse_change(json!({"description": null})).expect("valid");
        assert_eq!(change.description, Some(None));
        assert_eq!(change.definition, None);
        assert_eq!(retention, None);
        let (_, retention) = parse_change(json!({"retention": null})).expect("valid");
        assert_eq!(retention, Some(None), "null takes the workflow's own retention away");
    }

    #[test]
    fn if_match_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(precondition(&headers), Precondition::None);
        headers.insert(header::IF_MATCH, HeaderValue::from_static("\"3\", W/\"4\""));
        assert_eq!(precondition(&headers), Precondition::Versions(vec![3, 4]));
        headers.insert(header::IF_MATCH, HeaderValue::from_static("*"));
        assert_eq!(precondition(&headers), Precondition::Any);
        headers.insert(header::IF_MATCH, HeaderValue::from_static("3"));
        assert_eq!(precondition(&headers), Precondition::Versions(vec![]));
    }
}
