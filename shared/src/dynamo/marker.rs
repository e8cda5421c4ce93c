//! A job's marker as a write gate: what makes a job's action happen once.

use aws_sdk_dynamodb::types::TransactWriteItem;

use super::error::StoreError;
use super::write_gate::WriteGate;

/// A write gate that adds a job's marker to every transaction in its scope: a
/// conditional put, the job's record that it acted on an item, committed with the action
/// itself so that the action happens once however often the job's round runs, and what
/// else the job records with it. A transaction whose marker exists already is refused
/// with [`Refusal::Marked`](super::Refusal::Marked), nothing written.
#[derive(Debug)]
pub struct Marker {
    /// The marker first (a `Put` conditioned on its absence), then the rest.
    puts: Vec<TransactWriteItem>,
}

impl Marker {
    /// The gate of `puts`: the marker first (conditioned on its absence).
    #[must_use]
    pub fn new(puts: Vec<TransactWriteItem>) -> Self {
        Self { puts }
    }
}

impl WriteGate for Marker {
    fn admit<'a>(
        &'a self,
        items: &'a [TransactWriteItem],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<TransactWriteItem>, StoreError>> + Send + 'a>> {
        Box::pin(async move {
            let mut all: Vec<&TransactWriteItem> = items.iter().collect();
            for put in &self.puts {
                if !super::transaction::has_room_for(all.iter().copied(), put) {
                    return Err(StoreError::Other("a transaction with no room for its job's marker".into()));
                }
                all.push(put);
            }
            Ok(self.puts.clone())
        })
    }

    fn settle(&self, committed: bool, failed: Option<usize>) -> Option<StoreError> {
        (!committed && failed == Some(0)).then_some(StoreError::Refused(super::Refusal::Marked))
    }

    fn hold(&self) -> std::pin::Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + '_>> {
        Box::pin(async { Ok(()) })
    }
}
