//! Exports (`/api/v1/exports`): a tenant's records, or one workflow's, as JSON Lines,
//! gzip, in parts written in rounds by the jobs function (`domain::runs::export`). Only
//! a full key may make or read one (`shared::scopes`): an export holds every record.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use domain::runs::export::model::{Export, ExportCounts};
use http::{StatusCode, header};
use serde::Serialize;
use shared::body::{Fields, OptionalJsonBody, WireEnum};
use shared::idempotency::{self, Answer};
use shared::ids::{ExportId, PathId, WorkflowId};
use shared::{ApiError, TenantId};

use crate::AppState;

/// One part on the wire.
#[derive(Debug, Serialize)]
struct PartBody {
    number: usize,
    url: String,
    bytes: u64,
    lines: u64,
}

/// An export on the wire.
#[derive(Debug, Serialize)]
pub struct ExportBody {
    id: String,
    workflow_id: Option<String>,
    status: &'static str,
    error: Option<String>,
    counts: ExportCounts,
    parts: Vec<PartBody>,
    created_at: String,
    updated_at: String,
    ended_at: Option<String>,
    expires_at: String,
    object: &'static str,
}

impl From<&Export> for ExportBody {
    fn from(e: &Export) -> Self {
        Self {
            id: e.id.to_string(),
            workflow_id: e.workflow_id.as_ref().map(ToString::to_string),
            status: e.status.wire(),
            error: e.error.clone(),
            counts: e.counts.clone(),
            parts: e
                .parts
                .iter()
                .enumerate()
                .map(|(at, p)| PartBody {
                    number: at + 1,
                    url: format!("{}/exports/{}/parts/{}", shared::http::BASE_PATH, e.id, at + 1),
                    bytes: p.bytes,
                    lines: p.lines,
                })
                .collect(),
            created_at: shared::time::format(e.created_at),
            updated_at: shared::time::format(e.updated_at),
            ended_at: e.ended_at.map(shared::time::format),
            expires_at: shared::time::format(e.expires_at()),
            object: "export",
        }
    }
}

fn parse_id(raw: &str) -> Result<ExportId, ApiError> {
    ExportId::parse(raw).ok_or_else(|| ApiError::not_found("export", raw))
}

/// `POST /exports`: `{"workflow_id": …}` (optional) exports that workflow's records only.
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body)?;
    let workflow =
        f.optional("workflow_id", |v| v.as_str().map(str::to_owned).ok_or_else(|| "must be a string".to_owned()));
    f.finish()?;
    let workflow =
        workflow.map(|raw| WorkflowId::parse(&raw).ok_or_else(|| ApiError::not_found("workflow", &raw))).transpose()?;
    let answer = |export: &Export| {
        Answer::json(StatusCode::ACCEPTED, &ExportBody::from(export))?.located(&format!("exports/{}", export.id))
    };
    let announce = |export: &Export| idempotency::announce(|| answer(export));
    let export = state.runs.export_start(&tenant, workflow.as_ref(), state.clock.as_ref(), &announce).await?;
    Ok(answer(&export)?.into_response())
}

/// `GET /exports/{export_id}`
pub async fn get(State(state): State<AppState>, tenant: TenantId, PathId(raw): PathId) -> Result<Response, ApiError> {
    let export = state.runs.export(&tenant, &parse_id(&raw)?, state.clock.as_ref()).await?;
    Ok(Answer::json(StatusCode::OK, &ExportBody::from(&export))?.into_response())
}

/// `GET /exports/{export_id}/parts/{number}`: the part's gzip bytes (JSON Lines).
pub async fn part(
    State(state): State<AppState>,
    tenant: TenantId,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let Ok(Path((raw, number))) = path else { return Err(ApiError::not_found("export part", "")) };
    let id = parse_id(&raw)?;
    let at = number
        .parse::<usize>()
        .ok()
        .filter(|n| *n >= 1 && number == n.to_string())
        .ok_or_else(|| ApiError::not_found("export part", format!("{raw}/parts/{number}")))?;
    let gzip = state.runs.export_part(&tenant, &id, at).await?;
    let name = format!("attachment; filename=\"{raw}-{at:05}.jsonl.gz\"");
    Ok(([(header::CONTENT_TYPE, "application/gzip".to_owned()), (header::CONTENT_DISPOSITION, name)], gzip)
        .into_response())
}
