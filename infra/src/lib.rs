//! Cairn's infrastructure as code, for the local stack and the tests: the tables and
//! routes read from `template.yaml` (the single source of truth), creating those tables
//! in DynamoDB (Local), and the operations of the `cairn-admin` command line.

pub mod admin;
pub mod erasure;
pub mod tables;
pub mod template;
pub mod ttl;
