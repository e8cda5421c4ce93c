//! What every Cairn function needs, written once: configuration, the DynamoDB client and
//! its helpers, authentication and tenant scoping, the one error type and its problem+json
//! rendering, request parsing, ids, time and pagination.
//!
//! A function crate builds its `axum::Router` from these parts and hands it to
//! [`http::run`], which adds request ids, access logs, panic safety and authentication.

pub mod auth;
pub mod blob;
pub mod body;
pub mod config;
pub mod counter_layouts;
pub mod counters;
pub mod dynamo;
pub mod error;
pub mod gate;
pub mod http;
pub mod idempotency;
pub mod ids;
pub mod lambda;
pub mod metering;
pub mod pagination;
pub mod query;
pub mod rate_limit;
pub mod request_id;
pub mod scopes;
pub mod series;
pub mod spans;
pub mod tags;
pub mod time;
pub mod tls;

/// The version prefix of every path.
pub const BASE_PATH: &str = "/api/v1";

pub use auth::TenantId;
pub use error::ApiError;
