//! The webhook endpoint and delivery endpoints.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use domain::webhooks::address::check_url;
use domain::webhooks::endpoints::DESCRIPTION_MAX;
use domain::webhooks::{Delivery, Endpoint, EndpointChange, Event, EventType, SecretBox};
use http::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};
use shared::body::{Fields, JsonBody, OptionalJsonBody, boolean, text};
use shared::dynamo::Transaction;
use shared::idempotency::{self, Answer};
use shared::ids::{DeliveryId, EndpointId, PathId, WorkflowId};
use shared::query::Query;
use shared::{ApiError, TenantId};

use crate::AppState;

/// The most event types one endpoint names.
const EVENT_TYPES_MAX: usize = 20;
/// The default and largest page of deliveries.
const DELIVERIES_DEFAULT: u32 = 20;
const DELIVERIES_MAX: u32 = 100;

/// An endpoint as the API shows it: never its secret (but in the answers that make one).
#[derive(Debug, Serialize)]
pub struct EndpointBody {
    id: String,
    url: String,
    description: Option<String>,
    event_types: Vec<&'static str>,
    workflow_id: Option<String>,
    enabled: bool,
    disabled_reason: Option<String>,
    failing_since: Option<String>,
    previous_secret_expires_at: Option<String>,
    created_at: String,
    updated_at: String,
}

impl EndpointBody {
    fn of(e: &Endpoint, now: chrono::DateTime<chrono::Utc>) -> Self {
        let overlapping =
            e.previous_secret_expires_at.clone().filter(|t| shared::time::parse(t).is_ok_and(|until| now < until));
        Self {
            id: e.endpoint_id.to_string(),
            url: e.url.clone(),
            description: e.description.clone(),
            event_types: e.event_types.iter().map(|t| t.as_str()).collect(),
            workflow_id: e.workflow_id.as_ref().map(ToString::to_string),
            enabled: e.enabled,
            disabled_reason: e.disabled_reason.clone(),
            failing_since: e.failing_since.clone(),
            previous_secret_expires_at: overlapping,
            created_at: e.created_at.clone(),
            updated_at: e.updated_at.clone(),
        }
    }
}

/// A delivery as the API shows it.
#[derive(Debug, Serialize)]
pub struct DeliveryBody {
    id: String,
    endpoint_id: String,
    event_id: String,
    event_type: String,
    status: domain::webhooks::DeliveryStatus,
    attempt_count: u32,
    attempts: Vec<domain::webhooks::AttemptRecord>,
    next_attempt_at: Option<String>,
    created_at: String,
    payload: Value,
}

impl From<&Delivery> for DeliveryBody {
    fn from(d: &Delivery) -> Self {
        Self {
            id: d.id(),
            endpoint_id: d.endpoint_id.to_string(),
            event_id: d.event_id.to_string(),
            event_type: d.event_type.clone(),
            status: d.status,
            attempt_count: d.attempt_count,
            attempts: d.attempts.clone(),
            next_attempt_at: d.next_attempt_at.clone(),
            created_at: d.created_at.clone(),
            payload: serde_json::from_str(&d.payload).unwrap_or(Value::Null),
        }
    }
}

fn secrets(state: &AppState) -> Result<&SecretBox, ApiError> {
    state.secrets.as_ref().ok_or_else(|| ApiError::Unavailable("WEBHOOK_SECRETS_KEY is not configured".into()))
}

fn endpoint_id(raw: &str) -> Result<EndpointId, ApiError> {
    EndpointId::parse(raw).ok_or_else(|| ApiError::not_found("webhook endpoint", raw))
}

/// Reads `event_types`: a list of distinct subscribable types (empty: all).
fn event_types(value: &Value) -> Result<Vec<EventType>, String> {
    let items = value.as_array().ok_or("must be an array of event types")?;
    if items.len() > EVENT_TYPES_MAX {
        return Err(format!("must name at most {EVENT_TYPES_MAX} event types"));
    }
    let mut types = Vec::new();
    for item in items {
        let name = item.as_str().unwrap_or_default();
        let kind = EventType::parse(name).ok_or_else(|| {
            let known: Vec<&str> = EventType::SUBSCRIBABLE.iter().map(|t| t.as_str()).collect();
            format!("{item} is not an event type; one of {}", known.join(", "))
        })?;
        if !types.contains(&kind) {
            types.push(kind);
        }
    }
    Ok(types)
}

/// The workflow filter, which must name one of the tenant's workflows (else 404).
async fn workflow_filter(
    state: &AppState,
    tenant: &TenantId,
    raw: Option<String>,
) -> Result<Option<WorkflowId>, ApiError> {
    let Some(raw) = raw else { return Ok(None) };
    let id = WorkflowId::parse(&raw).ok_or_else(|| ApiError::not_found("workflow", raw.as_str()))?;
    match state.workflows.get(tenant, &id).await? {
        Some(_) => Ok(Some(id)),
        None => Err(ApiError::not_found("workflow", raw)),
    }
}

fn url_field(state: &AppState) -> impl Fn(&Value) -> Result<String, String> + '_ {
    move |value| {
        let raw = value.as_str().ok_or("must be a string")?;
        Ok(check_url(raw, state.policy)?.to_string())
    }
}

/// The answer of `GET /webhook-endpoints`.
#[derive(Debug, Serialize)]
pub struct EndpointList {
    items: Vec<EndpointBody>,
    total: u64,
}

/// `GET /webhook-endpoints`: every endpoint of the tenant, newest first.
pub async fn list(
    State(state): State<AppState>,
    tenant: TenantId,
    query: Query,
) -> Result<Json<EndpointList>, ApiError> {
    query.finish()?;
    let now = state.clock.now();
    let endpoints = state.endpoints.list(&tenant).await?;
    let items: Vec<EndpointBody> = endpoints.iter().map(|e| EndpointBody::of(e, now)).collect();
    Ok(Json(EndpointList { total: items.len() as u64, items }))
}

fn with_secret(
    endpoint: &Endpoint,
    secret: Option<&str>,
    status: StatusCode,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Response, ApiError> {
    let mut body = serde_json::to_value(EndpointBody::of(endpoint, now)).map_err(ApiError::internal)?;
    body["secret"] = secret.map_or(Value::Null, |s| Value::String(s.to_owned()));
    let mut response = Answer::json(status, &body)?.into_response();
    response.extensions_mut().insert(idempotency::Secret("secret"));
    Ok(response)
}

/// `POST /webhook-endpoints`: 201 with the endpoint and its `whsec_` secret, shown this
/// once. An `Idempotency-Key` replay answers it with `secret` null.
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body)?;
    let url = f.required("url", url_field(&state));
    let description = f.nullable("description", text(0, DESCRIPTION_MAX));
    let types = f.optional("event_types", event_types);
    let workflow =
        f.nullable("workflow_id", |v| v.as_str().map(str::to_owned).ok_or_else(|| "must be a string".to_owned()));
    f.finish()?;
    let Some(url) = url else { return Err(ApiError::internal("validated fields missing")) };
    let workflow = workflow_filter(&state, &tenant, workflow.into_update().flatten()).await?;
    let key = secrets(&state)?;
    let now = state.clock.now();
    let (endpoint, secret) = state
        .endpoints
        .create(&tenant, key, url, description.into_update().flatten(), types.unwrap_or_default(), workflow, now)
        .await?;
    with_secret(&endpoint, Some(secret.expose()), StatusCode::CREATED, now)
}

/// `GET /webhook-endpoints/{endpoint_id}`
pub async fn get(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Json<EndpointBody>, ApiError> {
    let endpoint = state.endpoints.get(&tenant, &endpoint_id(&raw)?).await?;
    Ok(Json(EndpointBody::of(&endpoint, state.clock.now())))
}

/// `PATCH /webhook-endpoints/{endpoint_id}`: any of `url`, `description`,
/// `event_types`, `workflow_id`, `enabled`; enabling clears why Cairn disabled it.
pub async fn update(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    JsonBody(body): JsonBody,
) -> Result<Json<EndpointBody>, ApiError> {
    let id = endpoint_id(&raw)?;
    let mut f = Fields::new(body)?;
    if f.is_empty() {
        return Err(ApiError::field(
            "body",
            "name at least one of url, description, event_types, workflow_id, enabled",
        ));
    }
    let url = f.optional("url", url_field(&state));
    let description = f.nullable("description", text(0, DESCRIPTION_MAX));
    let types = f.optional("event_types", event_types);
    let workflow =
        f.nullable("workflow_id", |v| v.as_str().map(str::to_owned).ok_or_else(|| "must be a string".to_owned()));
    let enabled = f.optional("enabled", boolean);
    f.finish()?;
    // Unknown endpoint first: 404 whatever else the body says.
    state.endpoints.get(&tenant, &id).await?;
    let workflow_id = match workflow.into_update() {
        None => None,
        Some(raw) => Some(workflow_filter(&state, &tenant, raw).await?),
    };
    let change =
        EndpointChange { url, description: description.into_update(), event_types: types, workflow_id, enabled };
    let now = state.clock.now();
    let endpoint = state.endpoints.update(&tenant, &id, &change, now).await?;
    Ok(Json(EndpointBody::of(&endpoint, now)))
}

/// `DELETE /webhook-endpoints/{endpoint_id}`: 204; nothing more is sent to it.
pub async fn delete(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<StatusCode, ApiError> {
    state.endpoints.delete(&tenant, &endpoint_id(&raw)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /webhook-endpoints/{endpoint_id}/rotate-secret`: 200 with the new secret; the
/// old one signs beside it for 24 hours.
pub async fn rotate(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    Fields::new(body)?.finish()?;
    let id = endpoint_id(&raw)?;
    let key = secrets(&state)?;
    let now = state.clock.now();
    let (endpoint, secret) = state.endpoints.rotate(&tenant, &id, key, now).await?;
    with_secret(&endpoint, Some(secret.expose()), StatusCode::OK, now)
}

/// `POST /webhook-endpoints/{endpoint_id}/test`: 202; a signed `webhook.test` event is
/// sent to this endpoint alone, as every event is (its delivery is listed).
pub async fn test(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    Fields::new(body)?.finish()?;
    let id = endpoint_id(&raw)?;
    state.endpoints.get(&tenant, &id).await?;
    let event = Event::test(&id, state.clock.now());
    let mut tx = Transaction::new();
    domain::webhooks::events::stage(&mut tx, &state.tables, &tenant, std::slice::from_ref(&event))
        .map_err(ApiError::from)?;
    tx.commit(&state.client).await?;
    let delivery = format!("wd_{}", event.id.as_str().trim_start_matches("evt_"));
    Ok((StatusCode::ACCEPTED, Json(json!({"event_id": event.id, "delivery_id": delivery}))).into_response())
}

/// The answer of `GET /webhook-endpoints/{endpoint_id}/deliveries`.
#[derive(Debug, Serialize)]
pub struct DeliveryList {
    items: Vec<DeliveryBody>,
    has_more: bool,
}

/// `GET /webhook-endpoints/{endpoint_id}/deliveries`: newest first, `limit` (1 to 100,
/// default 20) after `starting_after` (a delivery id).
pub async fn deliveries(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    mut query: Query,
) -> Result<Json<DeliveryList>, ApiError> {
    let limit = query.integer("limit", DELIVERIES_DEFAULT, 1, DELIVERIES_MAX);
    let after = shared::pagination::starting_after(&mut query);
    query.finish()?;
    let id = endpoint_id(&raw)?;
    state.endpoints.get(&tenant, &id).await?;
    let after = match after {
        Some(raw) => Some(
            DeliveryId::parse(&raw)
                .ok_or_else(|| ApiError::field("starting_after", "must be a delivery id (wd_...)"))?,
        ),
        None => None,
    };
    let page = state.deliveries.list(&tenant, &id, after.as_ref(), limit).await?;
    Ok(Json(DeliveryList { items: page.items.iter().map(DeliveryBody::from).collect(), has_more: page.has_more }))
}

/// `POST /webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/retry`: 202; the
/// delivery is due again at once (its attempts so far stay listed).
pub async fn retry(
    State(state): State<AppState>,
    tenant: TenantId,
    axum::extract::Path((endpoint, delivery)): axum::extract::Path<(String, String)>,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    Fields::new(body)?.finish()?;
    let id = endpoint_id(&endpoint)?;
    let delivery_id = DeliveryId::parse(&delivery).ok_or_else(|| ApiError::not_found("delivery", delivery.as_str()))?;
    state.endpoints.get(&tenant, &id).await?;
    let retried = state.deliveries.retry(&tenant, &id, &delivery_id, state.clock.now()).await?;
    Ok((StatusCode::ACCEPTED, Json(DeliveryBody::from(&retried))).into_response())
}
