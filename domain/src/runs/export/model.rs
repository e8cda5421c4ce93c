//! An export's rules: where it stands, what each round adds, and how a part is kept
//! within Lambda's limits (pure; the rounds are in `super`).

use std::io::Write as _;

use chrono::{DateTime, Duration, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use shared::body::WireEnum;
use shared::ids::{ExportId, WorkflowId};

/// The largest part, gzip bytes: its download, base64 as Lambda sends binary (4/3), is
/// 6,000,000 bytes, under Lambda's 6 MB response with room for the headers.
pub const PART_BYTES: usize = 4_500_000;
/// The most JSON a part holds before gzip (a very compressible export's parts stay a
/// size a client can inflate in memory, and a round's work bounded).
pub const PART_RAW_BYTES: usize = 64 * 1024 * 1024;
/// The most lines a round writes: with [`ROUND_READS`], what bounds a round's time.
pub const ROUND_LINES: u64 = 5_000;
/// The most records a round reads (some may be gone by the time they are read).
pub const ROUND_READS: u64 = 10_000;
/// The longest a round goes on reading: it then writes what it has (well inside the
/// 30 s the jobs function keeps free after the round it starts, `jobs::MARGIN`).
pub const ROUND_TIME: std::time::Duration = std::time::Duration::from_secs(15);
/// The most parts an export holds (its item's list of them stays far under 400 KB): an
/// export that would need more fails, saying to export one workflow at a time.
pub const MAX_PARTS: usize = 2_000;
/// How long an export and its parts are kept after it starts.
pub const KEPT_DAYS: i64 = 7;
/// An export no round has moved for this long has stopped (its rounds failed past every
/// retry): it is shown as failed, and another may start.
pub const STALLED_MINUTES: i64 = 60;
/// Raw bytes written between two sync flushes, so the gzip size so far is known to
/// within this much.
const FLUSH_EVERY: usize = 256 * 1024;

/// An export's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportStatus {
    /// Rounds are being run.
    Running,
    /// Every part is written.
    Completed,
    /// It stopped; `error` says why.
    Failed,
}

impl WireEnum for ExportStatus {
    const ALL: &'static [Self] = &[Self::Running, Self::Completed, Self::Failed];
    fn wire(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
}

/// Where the next round starts: each record kind in turn, after the last one written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum Position {
    /// Workflows, newest first, after this one.
    Workflows {
        /// The last one written.
        after: Option<String>,
    },
    /// Executions, newest first, after this one (whose checkpoints are written).
    Executions {
        /// The last one written.
        after: Option<String>,
    },
    /// The checkpoints of `execution` (whose line is written), in sequence order.
    Checkpoints {
        /// The execution.
        execution: String,
        /// The last checkpoint written, by id (as exports begun before `sequence` name it).
        after: Option<String>,
        /// The sequence of the last checkpoint written: the rest follow it even if that
        /// checkpoint is deleted before the next round.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sequence: Option<u64>,
    },
    /// Failures, newest first, after this one.
    Failures {
        /// The last one written.
        after: Option<String>,
    },
    /// Nothing is left.
    Done,
}

/// One part: gzip JSON Lines, stored in blobs under `key#NNN`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportPart {
    /// The blobs' key prefix (the round's own, so a round run twice never mixes).
    pub key: String,
    /// How many blobs it is in.
    pub chunks: u32,
    /// Its size, gzip.
    pub bytes: u64,
    /// Its lines.
    pub lines: u64,
}

/// How many records of each kind were written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportCounts {
    /// Workflows.
    pub workflows: u64,
    /// Executions.
    pub executions: u64,
    /// Checkpoints (with their states).
    pub checkpoints: u64,
    /// Failures.
    pub failures: u64,
}

/// An export of a tenant's data, or one workflow's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Its id.
    pub id: ExportId,
    /// Only this workflow's records.
    pub workflow_id: Option<WorkflowId>,
    /// Its status.
    pub status: ExportStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// Where the next round starts.
    pub position: Position,
    /// The next round's number (a stream record of an earlier one is passed over).
    pub round: u64,
    /// The parts written, in order.
    pub parts: Vec<ExportPart>,
    /// The records written.
    pub counts: ExportCounts,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// When a round last moved it.
    pub updated_at: DateTime<Utc>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
}

impl Export {
    /// A new export (of `workflow`'s records only, when given).
    #[must_use]
    pub fn start(workflow: Option<WorkflowId>, now: DateTime<Utc>) -> Self {
        Self {
            id: ExportId::generate_at(now),
            workflow_id: workflow,
            status: ExportStatus::Running,
            error: None,
            position: Position::Workflows { after: None },
            round: 0,
            parts: Vec::new(),
            counts: ExportCounts::default(),
            created_at: now,
            updated_at: now,
            ended_at: None,
        }
    }

    /// When it and its parts are deleted.
    #[must_use]
    pub fn expires_at(&self) -> DateTime<Utc> {
        self.created_at + Duration::days(KEPT_DAYS)
    }

    /// Whether no round has moved it for [`STALLED_MINUTES`] by `now` while it runs.
    #[must_use]
    pub fn stalled(&self, now: DateTime<Utc>) -> bool {
        self.status == ExportStatus::Running && self.updated_at + Duration::minutes(STALLED_MINUTES) < now
    }

    /// The export as a client sees it at `now`: one that has stalled is failed, since its
    /// last round.
    #[must_use]
    pub fn as_seen(mut self, now: DateTime<Utc>) -> Self {
        if self.stalled(now) {
            self.status = ExportStatus::Failed;
            self.error = Some(format!(
                "no round moved the export for {STALLED_MINUTES} minutes, so it stopped; its parts so far can be downloaded, and another export may start"
            ));
            self.ended_at = Some(self.updated_at);
        }
        self
    }

    /// The export after a round that wrote `part` (if any) and `counts` in all, and
    /// stopped at `position`: completed at [`Position::Done`], failed past [`MAX_PARTS`].
    #[must_use]
    pub fn after_round(
        &self,
        part: Option<ExportPart>,
        counts: ExportCounts,
        position: Position,
        now: DateTime<Utc>,
    ) -> Self {
        let mut next = self.clone();
        next.parts.extend(part);
        next.counts = counts;
        next.round += 1;
        next.updated_at = now;
        if position == Position::Done {
            next.status = ExportStatus::Completed;
            next.ended_at = Some(now);
        } else if next.parts.len() >= MAX_PARTS {
            next.status = ExportStatus::Failed;
            next.error = Some(format!(
                "the export reached {MAX_PARTS} parts before its end; export one workflow at a time (workflow_id)"
            ));
            next.ended_at = Some(now);
        }
        next.position = position;
        next
    }
}

/// One part being written: lines of JSON, gzip, kept under [`PART_BYTES`] and
/// [`PART_RAW_BYTES`].
pub struct PartWriter {
    gzip: GzEncoder<Vec<u8>>,
    /// Raw bytes written since the last flush (their gzip size is not known yet).
    pending: usize,
    raw: usize,
    lines: u64,
}

impl std::fmt::Debug for PartWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartWriter").field("raw", &self.raw).field("lines", &self.lines).finish_non_exhaustive()
    }
}

impl Default for PartWriter {
    fn default() -> Self {
        Self { gzip: GzEncoder::new(Vec::new(), Compression::default()), pending: 0, raw: 0, lines: 0 }
    }
}

/// The most gzip bytes `raw` bytes can become: deflate stores what it cannot compress
/// in blocks of at most 65,535 bytes with 5 bytes of header each (counted per 16 KiB
/// here, to be safe), plus gzip's 18 bytes of header and trailer and a flush's 10.
#[must_use]
pub fn gzip_bound(raw: usize) -> usize {
    raw + raw.div_ceil(16 * 1024) * 5 + 64
}

impl PartWriter {
    /// Lines written.
    #[must_use]
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Whether a line of `len` bytes fits: always in an empty part (one line, a
    /// checkpoint of the largest state, is far under both limits), else while the part
    /// stays under both limits whatever the line compresses to.
    #[must_use]
    pub fn fits(&self, len: usize) -> bool {
        self.lines == 0
            || (self.gzip.get_ref().len() + gzip_bound(self.pending + len + 1) <= PART_BYTES
                && self.raw + len < PART_RAW_BYTES)
    }

    /// Adds `line` (one JSON document, no newline in it).
    ///
    /// # Errors
    /// Never in practice: writing to memory.
    pub fn push(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.gzip.write_all(line)?;
        self.gzip.write_all(b"\n")?;
        self.pending += line.len() + 1;
        self.raw += line.len() + 1;
        self.lines += 1;
        if self.pending >= FLUSH_EVERY {
            self.gzip.flush()?;
            self.pending = 0;
        }
        Ok(())
    }

    /// The part's gzip bytes.
    ///
    /// # Errors
    /// Never in practice: writing to memory.
    pub fn finish(self) -> std::io::Result<Vec<u8>> {
        self.gzip.finish()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    /// Bytes that do not compress (a xorshift stream, as printable JSON text).
    fn noise(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[(x % 62) as usize]
            })
            .collect()
    }

    fn fill(lines: &[Vec<u8>]) -> (Vec<u8>, u64, usize) {
        let mut part = PartWriter::default();
        let mut raw = 0;
        for line in lines {
            if !part.fits(line.len()) {
                break;
            }
            part.push(line).expect("memory");
            raw += line.len() + 1;
        }
        let lines = part.lines();
        (part.finish().expect("memory"), lines, raw)
    }

    #[test]
    fn a_part_of_incompressible_lines_stays_under_its_limit_and_inflates_to_them() {
        let lines: Vec<Vec<u8>> = (0..400).map(|i| noise(64 * 1024 + i * 7, i as u64 + 1)).collect();
        let (gzip, written, raw) = fill(&lines);
        assert!(gzip.len() <= PART_BYTES, "{} bytes", gzip.len());
        assert!(written > 1 && (written as usize) < lines.len(), "stopped at the limit: {written}");
        // Full but for what the estimate cannot know yet: the bytes since the last flush
        // and the next line, counted as if they did not compress.
        let longest = lines.iter().map(Vec::len).max().expect("lines");
        assert!(gzip.len() + FLUSH_EVERY + 2 * longest + 1024 > PART_BYTES, "and used most of it: {}", gzip.len());
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(&gzip[..]).read_to_end(&mut text).expect("gzip");
        assert_eq!(text.len(), raw);
        let expected: Vec<u8> = lines[..written as usize].iter().flat_map(|l| l.iter().chain(b"\n")).copied().collect();
        assert_eq!(text, expected);
    }

    #[test]
    fn the_largest_line_fits_an_empty_part_and_its_download_fits_lambdas_response() {
        // A checkpoint's largest state, incompressible, with every other field at its
        // largest (64 KiB is more than they can take together).
        let largest = crate::runs::checkpoints::model::STATE_MAX_BYTES + 64 * 1024;
        assert!(gzip_bound(largest + 1) <= PART_BYTES, "one line alone is a valid part");
        let (gzip, written, _) = fill(&[noise(largest, 7), noise(largest, 8)]);
        assert_eq!(written, 1, "the next line goes to the next part");
        assert!(gzip.len() <= gzip_bound(largest + 1));
        // The download: base64 (4/3, padded) plus a generous 16 KiB of JSON envelope and headers.
        assert!(PART_BYTES.div_ceil(3) * 4 + 16 * 1024 <= shared::lambda::MAX_RESPONSE_PAYLOAD);
    }

    #[test]
    fn a_compressible_export_is_bounded_by_raw_bytes() {
        let line = vec![b'a'; 1024 * 1024];
        let lines = vec![line; 100];
        let (gzip, written, raw) = fill(&lines);
        assert!(raw < PART_RAW_BYTES && raw + 1024 * 1024 + 1 >= PART_RAW_BYTES, "{raw}");
        assert_eq!(written, 63);
        assert!(gzip.len() < 1024 * 1024, "{}", gzip.len());
    }

    #[test]
    fn an_export_no_round_moved_for_an_hour_is_seen_as_failed() {
        let now = Utc::now();
        let export = Export::start(None, now);
        assert_eq!(export.clone().as_seen(now + Duration::minutes(STALLED_MINUTES)), export, "not yet");
        let seen = export.clone().as_seen(now + Duration::minutes(STALLED_MINUTES + 1));
        assert_eq!((seen.status, seen.ended_at), (ExportStatus::Failed, Some(now)));
        assert!(seen.error.as_deref().is_some_and(|e| e.contains("another export may start")));
        let done = export.after_round(None, ExportCounts::default(), Position::Done, now);
        assert_eq!(done.clone().as_seen(now + Duration::days(1)), done, "an ended export stays as it ended");
    }

    #[test]
    fn a_round_moves_the_export_and_the_last_completes_it() {
        let now = Utc::now();
        let export = Export::start(None, now);
        let part = ExportPart { key: "k".into(), chunks: 1, bytes: 10, lines: 2 };
        let counts = ExportCounts { workflows: 2, ..ExportCounts::default() };
        let moved = export.after_round(Some(part), counts.clone(), Position::Executions { after: None }, now);
        assert_eq!((moved.round, moved.status, moved.parts.len()), (1, ExportStatus::Running, 1));
        let done = moved.after_round(None, counts, Position::Done, now);
        assert_eq!((done.round, done.status, done.parts.len()), (2, ExportStatus::Completed, 1));
        assert!(done.ended_at.is_some());
        let mut full = moved.clone();
        full.parts = vec![moved.parts[0].clone(); MAX_PARTS - 1];
        let failed = full.after_round(Some(moved.parts[0].clone()), moved.counts.clone(), moved.position.clone(), now);
        assert_eq!(failed.status, ExportStatus::Failed);
        assert!(failed.error.as_deref().is_some_and(|e| e.contains("one workflow at a time")));
    }
}
