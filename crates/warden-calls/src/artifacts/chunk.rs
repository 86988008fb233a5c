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

use warden_core::error::GuardError;

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

/// The `read_artifact` answer for one chunk, wherever it was read from
/// (a local file or an object-store copy). Callers inside Warden read its
/// fields; it becomes JSON only at the MCP edge, with the keys clients
/// have always read (`next_offset` is `null` at the end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkAnswer {
    pub task_id: String,
    pub filename: String,
    pub encoding: Encoding,
    pub mime_type: String,
    pub content: String,
    pub size_bytes: u64,
    pub offset: u64,
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
            if let Some(error) = not_text(&bytes, offset) {
                return Err(error);
            }
            let at_end = offset + wanted as u64 == size;
            match std::str::from_utf8(&bytes) {
                Ok(_) => {}
                Err(error) if error.error_len().is_none() && !at_end => bytes.truncate(error.valid_up_to()),
                Err(error) => return Err(binary(offset + error.valid_up_to() as u64)),
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

/// Longest run of continuation bytes (`0x80..0xC0`) that can follow the
/// start of a character: a UTF-8 character is at most 4 bytes.
const MAX_CONTINUATION_BYTES: usize = 3;

/// Why a utf-8 chunk starting with `bytes` at `offset` cannot be read as
/// text, if it cannot: binary data (`encoding`: use base64), or a start in
/// the middle of a character (`offset`). Binary is decided first, so a
/// binary file is never blamed on its offset: at offset 0 nothing can be
/// mid-character, more than three leading continuation bytes are no
/// character at all, and bytes after them that are not UTF-8 are binary.
fn not_text(bytes: &[u8], offset: u64) -> Option<GuardError> {
    let leading = bytes.iter().take_while(|b| (0x80..0xC0).contains(*b)).count();
    if leading == 0 {
        return None;
    }
    if offset == 0 || leading > MAX_CONTINUATION_BYTES {
        return Some(binary(offset));
    }
    if let Err(error) = std::str::from_utf8(&bytes[leading..])
        && error.error_len().is_some()
    {
        return Some(binary(offset + (leading + error.valid_up_to()) as u64));
    }
    Some(GuardError::invalid_input(
        "offset",
        format!(
            "{offset} is in the middle of a UTF-8 character; start at a character boundary (e.g. the previous next_offset)"
        ),
    ))
}

/// The answer for bytes that are not UTF-8 text, first seen at byte `at`.
fn binary(at: u64) -> GuardError {
    GuardError::invalid_input(
        "encoding",
        format!(
            "not text: the file is not UTF-8 (byte {at} is not part of a UTF-8 character); read it with encoding 'base64'"
        ),
    )
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

    #[test]
    fn a_binary_file_is_not_text_whatever_its_first_byte() {
        // A binary file read as utf-8 says "not text: use base64" (field encoding), even when
        // its first byte is a continuation byte; a real mid-character start still names offset.
        let png_like = [0x89u8, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0xFF, 0x00];
        for data in [&[0x80u8, 0x81, 0xFF, 0x00][..], &png_like[..], &[0xBFu8; 8][..]] {
            let err = chunk(data, 0, 64, Encoding::Utf8).unwrap_err();
            assert_eq!(err.field.as_deref(), Some("encoding"), "{data:?}: {err:?}");
            assert!(err.message.contains("not text"), "{}", err.message);
            assert!(err.message.contains("base64"), "{}", err.message);
        }
        // Binary past a leading continuation byte at a later offset is binary too.
        let err = chunk(&[b'a', 0x80, 0xFF, 0xFE], 1, 64, Encoding::Utf8).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("encoding"), "{err:?}");
        // Four continuation bytes in a row belong to no character.
        let err = chunk(&[b'a', 0x80, 0x80, 0x80, 0x80], 1, 64, Encoding::Utf8).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("encoding"), "{err:?}");
        // Text started inside "€" is a mid-character offset, not binary.
        let err = chunk("a€b".as_bytes(), 2, 64, Encoding::Utf8).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("offset"), "{err:?}");
        // Invalid bytes later in a text chunk are binary too, with where.
        let err = chunk(b"abc\xFFdef", 0, 64, Encoding::Utf8).unwrap_err();
        assert!(err.message.contains("byte 3"), "{}", err.message);
    }

    #[test]
    fn the_answer_serialises_as_the_json_clients_read() {
        // read_artifact's keys, encoding's wire name, and a null next_offset at the end.
        let answer = ChunkAnswer {
            task_id: "task_1".into(),
            filename: "outputs/a.csv".into(),
            encoding: Encoding::Utf8,
            mime_type: "text/csv".into(),
            content: "a,b\n".into(),
            size_bytes: 4,
            offset: 0,
            next_offset: None,
        };
        let json = serde_json::to_value(&answer).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"task_id": "task_1", "filename": "outputs/a.csv", "encoding": "utf-8",
                "mime_type": "text/csv", "content": "a,b\n", "size_bytes": 4, "offset": 0,
                "next_offset": null})
        );
        assert_eq!(serde_json::from_value::<ChunkAnswer>(json).unwrap(), answer);
    }
}
