//! Runs: executions, their checkpoints and their failures.

pub mod checkpoint;
pub mod failure;
pub mod model;
pub mod store;
