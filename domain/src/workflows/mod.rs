//! Workflows: what tenants register and start executions of.

pub mod model;
pub mod store;
