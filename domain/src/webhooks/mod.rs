//! Webhooks: events a change reports (written in the change's transaction), the
//! endpoints a tenant registers, and each event's delivery to each endpoint, signed as
//! Standard Webhooks specifies. Sending is the `dispatcher` function's; this module
//! decides what to send, to whom, and when to try again.

pub mod address;
pub mod deliveries;
pub mod endpoints;
pub mod events;
pub mod secrets;
pub mod stream;

pub use deliveries::{AttemptRecord, Deliveries, Delivery, DeliveryStatus};
pub use endpoints::{Endpoint, EndpointChange, Endpoints};
pub use events::{Event, EventType};
pub use secrets::{Secret, SecretBox};
