//! Compression of large JSON values (execution input and output, checkpoint state)
//! before they are stored, so that DynamoDB's 400 KB item limit is met far more often
//! and fewer bytes are read and written.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;

/// Deflates `bytes`.
#[must_use]
pub fn compress(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = DeflateEncoder::new(Vec::with_capacity(bytes.len() / 4 + 64), Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// Inflates what [`compress`] produced, refusing to grow past `limit` bytes.
///
/// # Errors
/// When the data is not deflate data or inflates past `limit`.
pub fn decompress(bytes: &[u8], limit: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    DeflateDecoder::new(bytes).take(limit as u64 + 1).read_to_end(&mut out)?;
    if out.len() > limit {
        return Err(std::io::Error::other("inflated data exceeds its limit"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limit() {
        let text = br#"{"state": "abcabcabcabcabcabcabcabc"}"#.repeat(100);
        let packed = compress(&text);
        assert!(packed.len() < text.len() / 5);
        assert_eq!(decompress(&packed, text.len()).expect("inflates"), text);
        assert!(decompress(&packed, text.len() - 1).is_err());
        assert!(decompress(b"not deflate", 100).is_err());
    }
}
