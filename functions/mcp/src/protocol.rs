//! JSON-RPC 2.0 as MCP's stateless Streamable HTTP transport uses it: one message per
//! POST; a request is answered `200 application/json` with its response, a notification
//! or a response `202` with no body. What is not a JSON-RPC message at all (not JSON,
//! not an object, a batch) is a problem+json 400 like any bad request to the API;
//! what is one but cannot be served gets a JSON-RPC error.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use serde_json::{Map, Value, json};
use shared::scopes::Scopes;
use shared::{ApiError, TenantId};

use crate::AppState;
use crate::{prompts, resources, tools};

/// The protocol revisions this server speaks, newest first. An `initialize` asking for
/// one of them gets it; any other gets the newest, which the client may refuse.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The header a client sends, after `initialize`, with the revision agreed.
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// The browser origins, besides loopback ones, whose pages may call (comma separated,
/// `scheme://host[:port]`, exactly as browsers send them).
pub const ALLOWED_ORIGINS: &str = "MCP_ALLOWED_ORIGINS";

/// Whether a request sent with `Origin: origin` is served. MCP clients that are not
/// browsers send no `Origin`; a browser always does, and a page that DNS rebinding
/// points at this server carries its own origin, never a loopback one, so it is refused
/// (the transport's rule against rebinding). Loopback origins are served: the MCP
/// Inspector and other local tools run in a browser there, and still need the key.
#[must_use]
pub fn origin_allowed(origin: &str, allowed: Option<&str>) -> bool {
    if allowed.unwrap_or_default().split(',').any(|listed| listed.trim() == origin && !origin.is_empty()) {
        return true;
    }
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = if rest.starts_with('[') {
        rest.split_inclusive(']').next().unwrap_or_default()
    } else {
        rest.split([':', '/']).next().unwrap_or_default()
    };
    let port_ok = rest[host.len()..].strip_prefix(':').is_none_or(|port| port.parse::<u16>().is_ok());
    port_ok && ["localhost", "127.0.0.1", "[::1]"].contains(&host)
}

/// JSON-RPC's error codes.
mod code {
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
}

/// What `initialize` tells the client about using this server.
const INSTRUCTIONS: &str = "Cairn runs AI-agent workflows: workflows are registered, each run is an \
execution that records checkpoints of its state, and a failed execution records a failure. Use the \
list tools to find things (newest first, pages), the get tools for one record. Checkpoint states are \
left out unless asked for and are cut off past 64 KiB. Ids are prefixed by kind: wf_, exec_, ckpt_, fail_.";

/// `POST /api/v1/mcp`.
pub async fn serve(
    State(state): State<AppState>,
    tenant: TenantId,
    Extension(scopes): Extension<Scopes>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // The message is read and most methods answered by plain functions, so that this
    // one's frame, under every tool's call, stays small.
    let (id, method, params) = match incoming(&headers, &body)? {
        Incoming::Answered(response) => return Ok(response),
        Incoming::Request { id, method, params } => (id, method, params),
    };
    let caller = tools::Caller { state: &state, tenant: &tenant, scopes: &scopes };
    let result = match method.as_str() {
        "tools/call" => Box::pin(call(&caller, &params)).await,
        "resources/read" => match params.get("uri").and_then(Value::as_str) {
            Some(uri) => Box::pin(resources::read(&caller, uri)).await,
            None => Err((code::INVALID_PARAMS, "resources/read needs the resource's uri".to_owned())),
        },
        _ => plain(&method, &params, &scopes),
    };
    Ok(respond(&id, result))
}

/// What a POST carries.
enum Incoming {
    /// A notification, a response, or a request answered at once (an error).
    Answered(Response),
    /// A request to serve.
    Request { id: Value, method: String, params: Map<String, Value> },
}

/// The message of a POST, checked.
///
/// # Errors
/// 400 for what is not one JSON-RPC message (or an unsupported revision), 403 for a
/// browser origin that is not allowed.
fn incoming(headers: &HeaderMap, body: &[u8]) -> Result<Incoming, ApiError> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json")));
    if !json_type {
        return Err(ApiError::MalformedRequest("an MCP message is sent as Content-Type: application/json".to_owned()));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !origin_allowed(origin, std::env::var(ALLOWED_ORIGINS).ok().as_deref()) {
            return Err(ApiError::OriginNotAllowed(origin.to_owned()));
        }
    }
    if let Some(version) = headers.get(PROTOCOL_VERSION_HEADER) {
        let version = version.to_str().unwrap_or_default();
        if !PROTOCOL_VERSIONS.contains(&version) {
            return Err(ApiError::MalformedRequest(format!(
                "MCP-Protocol-Version {version:?} is not one this server speaks ({})",
                PROTOCOL_VERSIONS.join(", ")
            )));
        }
    }
    let message: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::MalformedRequest(format!("the body is not JSON: {e}")))?;
    let Value::Object(mut message) = message else {
        return Err(ApiError::MalformedRequest(
            "an MCP message is one JSON-RPC object (batches are not taken)".to_owned(),
        ));
    };
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(ApiError::MalformedRequest("a JSON-RPC 2.0 message has \"jsonrpc\": \"2.0\"".to_owned()));
    }
    let refuse = |id: &Value, code: i64, message: &str| Ok(Incoming::Answered(error(id, code, message)));
    let id = match message.get("id") {
        // A notification, or a response to a request this server never sends: noted.
        None => return Ok(Incoming::Answered(StatusCode::ACCEPTED.into_response())),
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        Some(_) => return refuse(&Value::Null, code::INVALID_REQUEST, "the id must be a string or a number"),
    };
    if message.contains_key("result") || message.contains_key("error") {
        return Ok(Incoming::Answered(StatusCode::ACCEPTED.into_response()));
    }
    let Some(method) = message.get("method").and_then(Value::as_str).map(str::to_owned) else {
        return refuse(&id, code::INVALID_REQUEST, "a request has a method");
    };
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return refuse(&id, code::INVALID_PARAMS, "params must be an object"),
    };
    Ok(Incoming::Request { id, method, params })
}

/// The answer to every method but `tools/call`.
fn plain(method: &str, params: &Map<String, Value>, scopes: &Scopes) -> Result<Value, (i64, String)> {
    match method {
        "initialize" => initialize(params),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools::listed(scopes)})),
        // Timelines are read by URI (a template), not listed one by one.
        "resources/list" => Ok(json!({"resources": []})),
        "resources/templates/list" => Ok(json!({"resourceTemplates": resources::templates(scopes)})),
        "prompts/list" => Ok(json!({"prompts": prompts::listed()})),
        "prompts/get" => {
            let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(arguments)) => arguments.clone(),
                Some(_) => return Err((code::INVALID_PARAMS, "arguments must be an object".to_owned())),
            };
            prompts::get(name, &arguments).map_err(|message| (code::INVALID_PARAMS, message))
        }
        other => Err((code::METHOD_NOT_FOUND, format!("no method {other:?}"))),
    }
}

/// The answer to `initialize`: the revision agreed and what this server offers.
fn initialize(params: &Map<String, Value>) -> Result<Value, (i64, String)> {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked.filter(|v| PROTOCOL_VERSIONS.contains(v)).unwrap_or(PROTOCOL_VERSIONS[0]);
    Ok(json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}, "resources": {}, "prompts": {}},
        "serverInfo": {"name": "cairn", "title": "Cairn", "version": env!("CARGO_PKG_VERSION")},
        "instructions": INSTRUCTIONS,
    }))
}

/// `tools/call`: an unknown tool, or one outside the key's scopes, is a protocol error
/// (the tool does not exist for this key); what the tool itself refuses (bad arguments,
/// an unknown id) is its result, flagged `isError`, with the API's problem document.
async fn call(caller: &tools::Caller<'_>, params: &Map<String, Value>) -> Result<Value, (i64, String)> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((code::INVALID_PARAMS, "tools/call needs the tool's name".to_owned()));
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => return Err((code::INVALID_PARAMS, "arguments must be an object".to_owned())),
    };
    let Some(tool) = tools::find(name).filter(|tool| caller.scopes.allows(tool.needs)) else {
        return Err((code::INVALID_PARAMS, format!("no tool {name:?} for this key")));
    };
    Ok(tool_result(Box::pin(tools::run(caller, tool, &arguments)).await))
}

/// A tool's answer as `tools/call` gives it: structured, and the same JSON as text.
fn tool_result(answer: Result<Value, ApiError>) -> Value {
    let (value, is_error) = match answer {
        Ok(value) => (value, false),
        Err(refused) => (refused.problem(), true),
    };
    json!({
        "content": [{"type": "text", "text": value.to_string()}],
        "structuredContent": value,
        "isError": is_error,
    })
}

/// The JSON-RPC response to request `id`.
fn respond(id: &Value, result: Result<Value, (i64, String)>) -> Response {
    match result {
        Ok(result) => answer(&json!({"jsonrpc": "2.0", "id": id, "result": result})),
        Err((code, message)) => error(id, code, &message),
    }
}

fn answer(body: &Value) -> Response {
    let mut response = (StatusCode::OK, body.to_string()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

fn error(id: &Value, code: i64, message: &str) -> Response {
    answer(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

#[cfg(test)]
mod tests {
    use super::origin_allowed;

    #[test]
    fn only_loopback_and_listed_origins_are_served() {
        for origin in ["http://localhost:6274", "http://127.0.0.1", "https://[::1]:8443", "http://localhost"] {
            assert!(origin_allowed(origin, None), "{origin}");
        }
        for origin in [
            "http://evil.example.com",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io",
            "http://localhost:notaport",
            "null",
            "",
            "file://localhost",
        ] {
            assert!(!origin_allowed(origin, None), "{origin}");
        }
        let listed = Some("https://app.example.com, https://ops.example.com:8443");
        assert!(origin_allowed("https://ops.example.com:8443", listed));
        assert!(!origin_allowed("https://ops.example.com", listed), "the port is part of the origin");
        assert!(!origin_allowed("", Some("")), "an empty list lists nothing");
    }
}
