//! Chunked reads: byte offsets, utf-8 trimming, base64.
//!
//! In utf-8 mode a chunk that would end mid-character is trimmed back to the
//! last whole character, and a chunk that starts mid-character is an error.
//! base64 chunks are complete on their own: decode each one separately.
//! The rules work on bytes ([`span`] then [`chunk_of`]), so a local file
//! ([`read_chunk`]) and a ranged read of an object-store copy
//! (`super::remote`) answer alike.

use std::io::{Read, Seek, SeekFrom};

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::error::GuardError;

/// How a chunk's bytes are returned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Encoding {
    /// Text; fails on bytes that are not UTF-8.
    #[default]
    #[serde(rename = "utf-8", alias = "utf8")]
    Utf8,
    /// Any bytes, as standard padded base64.
    #[serde(rename = "base64")]
    Base64,
}

/// One chunk and where the next one starts (`None` at the end).
#[derive(Debug, PartialEq)]
pub struct Chunk {
    pub content: String,
    pub size_bytes: u64,
    pub next_offset: Option<u64>,
}

/// The bytes a chunk of a `size`-byte file starting at `offset` covers when
/// at most `max_bytes` are asked for: `offset..offset + n`, where `n` is
/// `max_bytes` or what is left of the file. An offset past the end is an
/// error naming `offset`; an offset equal to the size is an empty range.
/// Local and remote reads both fetch exactly this range, so they hand
/// [`chunk_of`] the same bytes.
pub fn span(size: u64, offset: u64, max_bytes: usize) -> Result<std::ops::Range<u64>, GuardError> {
    if offset > size {
        return Err(GuardError::invalid_input(
            "offset",
            format!("{offset} is past the end of the file ({size} bytes)"),
        ));
    }
    Ok(offset..offset + (size - offset).min(max_bytes as u64))
}

/// One chunk of a file of `size` bytes read from a seekable source (a
/// local file): [`span`], then [`chunk_of`] on those bytes.
pub fn read_chunk<F: Read + Seek>(
    file: &mut F,
    size: u64,
    offset: u64,
    max_bytes: usize,
    encoding: Encoding,
) -> Result<Chunk, GuardError> {
    let range = span(size, offset, max_bytes)?;
    let mut bytes = vec![0u8; (range.end - range.start) as usize];
    file.seek(SeekFrom::Start(offset))
        .map_err(|e| GuardError::failed(format!("seek: {e}")))?;
    file.read_exact(&mut bytes)
        .map_err(|e| GuardError::failed(format!("read: {e}")))?;
    chunk_of(bytes, size, offset, encoding)
}

/// The chunk made of `bytes`, the whole [`span`] of a `size`-byte file at
/// `offset` (wherever they were read from). In utf-8 mode a chunk whose
/// first byte continues a character is an error, and one that ends inside
/// a character (not at the end of the file) is trimmed back to the last
/// whole character: both decisions look only at these bytes, so no byte
/// past the span is ever needed.
pub fn chunk_of(mut bytes: Vec<u8>, size: u64, offset: u64, encoding: Encoding) -> Result<Chunk, GuardError> {
    let wanted = bytes.len();
    let content = match encoding {
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.encode(&bytes),
        Encoding::Utf8 => {
            if bytes.first().is_some_and(|b| (0x80..0xC0).contains(b)) {
                return Err(GuardError::invalid_input(
                    "offset",
                    format!(
                        "{offset} is in the middle of a UTF-8 character; start at a character boundary (e.g. the previous next_offset)"
                    ),
                ));
            }
            let at_end = offset + wanted as u64 == size;
            match std::str::from_utf8(&bytes) {
                Ok(_) => {}
                Err(error) if error.error_len().is_none() && !at_end => bytes.truncate(error.valid_up_to()),
                Err(_) => {
                    return Err(GuardError::invalid_input(
                        "encoding",
                        "the file is not valid UTF-8 text here; read it with encoding 'base64'",
                    ));
                }
            }
            if bytes.is_empty() && wanted > 0 {
                return Err(GuardError::invalid_input(
                    "max_bytes",
                    "too small to hold one whole character; ask for at least 4 bytes",
                ));
            }
            String::from_utf8(bytes.clone()).map_err(|_| GuardError::failed("utf-8 check failed"))?
        }
    };
    let read = match encoding {
        Encoding::Base64 => wanted as u64,
        Encoding::Utf8 => bytes.len() as u64,
    };
    let next = offset + read;
    Ok(Chunk {
        content,
        size_bytes: size,
        next_offset: (next < size).then_some(next),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn chunk(data: &[u8], offset: u64, max: usize, encoding: Encoding) -> Result<Chunk, GuardError> {
        read_chunk(&mut Cursor::new(data), data.len() as u64, offset, max, encoding)
    }

    #[test]
    fn utf8_chunks_never_split_a_character() {
        // "é" is two bytes: a 2-byte chunk of "aé" returns "a" and resumes at 1.
        let data = "aé€".as_bytes();
        let first = chunk(data, 0, 2, Encoding::Utf8).unwrap();
        assert_eq!(first.content, "a");
        assert_eq!(first.next_offset, Some(1));
        let second = chunk(data, 1, 4, Encoding::Utf8).unwrap();
        assert_eq!(second.content, "é");
        assert!(
            chunk(data, 2, 4, Encoding::Utf8).is_err(),
            "mid-character start is refused"
        );
        let last = chunk(data, 3, 100, Encoding::Utf8).unwrap();
        assert_eq!((last.content.as_str(), last.next_offset), ("€", None));
    }

    #[test]
    fn base64_chunks_round_trip_binary_data() {
        // Each base64 chunk decodes on its own; concatenated decodes equal the file.
        let data: Vec<u8> = (0..=255u8).collect();
        let mut offset = 0;
        let mut decoded = Vec::new();
        loop {
            let c = chunk(&data, offset, 100, Encoding::Base64).unwrap();
            decoded.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(&c.content)
                    .unwrap(),
            );
            match c.next_offset {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(decoded, data);
    }

    #[test]
    fn offsets_past_the_end_are_errors_and_the_end_is_empty() {
        // offset == size is an empty final chunk; beyond it is an error naming offset.
        let end = chunk(b"abc", 3, 10, Encoding::Utf8).unwrap();
        assert_eq!((end.content.as_str(), end.next_offset), ("", None));
        let err = chunk(b"abc", 4, 10, Encoding::Utf8).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("offset"));
    }
}
