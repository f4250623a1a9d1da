//! The one encode/decode pair and the length-prefixed frame format.
//!
//! A frame is a big-endian `u32` payload length followed by the payload. The payload is
//! bincode 2 (serde, standard config, varint) or JSON, chosen by the client's `Hello`.
//! The `Hello` itself is recognised by its first byte (`{` means JSON), so a client can
//! speak either codec from its first byte on.
//!
//! Decoding is bounded. A frame's declared length is checked against the connection's cap (16 MiB
//! by default, `crate::DEFAULT_MAX_FRAME`) before its payload is read (`frame_len`). bincode
//! allocates a claimed string before reading it, so its allocation limit is picked per payload
//! (`bincode_limit`): at most sixteen times the payload (at least 64 KiB), and at least
//! `CLAIM_FACTOR` (eight) times it, because bincode also counts every decoded integer at its full
//! width and a valid frame of many small numbers must never hit the limit
//! (`tests/codec_bincode_many_numbers.rs`). `tests/codec_fuzz.rs` fuzzes decoding (arbitrary and
//! mutated frames, the `Hello`, values around the nesting limit); `TOOLVISOR_FUZZ_CASES` sets the
//! cases per property.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

/// Which serialization a connection uses after the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Codec {
    /// bincode 2.0 (serde, standard config). The default.
    #[default]
    Bincode,
    /// UTF-8 JSON, one document per frame.
    Json,
}

impl Codec {
    /// The codec a payload was written in, judged by its first byte: a JSON frame of this
    /// protocol is an object (`{`) or, for a variant without fields, a string (`"`). Neither
    /// byte can open a bincode frame, whose first byte is a variant index below 16.
    pub fn sniff(payload: &[u8]) -> Codec {
        match payload.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'{' | b'"') => Codec::Json,
            _ => Codec::Bincode,
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Codec::Bincode => "bincode",
            Codec::Json => "json",
        })
    }
}

impl std::str::FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "bincode" => Ok(Codec::Bincode),
            "json" => Ok(Codec::Json),
            other => Err(format!(
                "unknown codec {other:?}: expected \"bincode\" or \"json\""
            )),
        }
    }
}

/// A payload could not be encoded or decoded, or a frame broke the framing rules.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("malformed {codec} payload: {message}")]
    Malformed { codec: Codec, message: String },
    #[error("cannot encode a {codec} payload: {message}")]
    Encode { codec: Codec, message: String },
    #[error("frame of {len} bytes exceeds the cap of {max} bytes")]
    Oversized { len: u64, max: u32 },
    #[error("connection closed")]
    Closed,
    #[error("connection closed in the middle of a frame ({got} of {want} bytes)")]
    Truncated { got: usize, want: usize },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// bincode claims the bytes of a string before it reads them and allocates the claimed
/// length up front; its limit is a compile-time constant. It also counts every decoded
/// integer at its full width against the same limit, whatever its encoded size: a one-byte
/// varint read as a `u64` counts 8 bytes, a variant index 4. So a legitimate payload claims
/// up to [`CLAIM_FACTOR`] times its size (a `process list` of 400 processes, 56 KB, claims
/// more than 256 KiB), and decoding picks the smallest of these limits that holds that:
/// what a hostile length prefix can make it allocate is at most sixteen times the payload
/// (at least 64 KiB).
const BINCODE_LIMITS: [usize; 17] = [
    1 << 16,
    1 << 17,
    1 << 18,
    1 << 19,
    1 << 20,
    1 << 21,
    1 << 22,
    1 << 23,
    1 << 24,
    1 << 25,
    1 << 26,
    1 << 27,
    1 << 28,
    1 << 29,
    1 << 30,
    1 << 31,
    1 << 32,
];

/// What one encoded byte can count against bincode's limit at most: a one-byte varint
/// decoded as a 64-bit integer (no type of the protocol is wider).
pub const CLAIM_FACTOR: usize = 8;

/// The bincode allocation limit used for a payload of `len` bytes (see [`BINCODE_LIMITS`]).
pub fn bincode_limit(len: usize) -> usize {
    let claims = len.saturating_mul(CLAIM_FACTOR).max(BINCODE_LIMITS[0]);
    BINCODE_LIMITS
        .iter()
        .copied()
        .find(|&limit| limit >= claims)
        .unwrap_or(usize::MAX)
}

fn decode_bincode<T: DeserializeOwned>(
    bytes: &[u8],
) -> Result<(T, usize), bincode::error::DecodeError> {
    macro_rules! limited {
        ($($bits:literal)*) => {{
            let limit = bincode_limit(bytes.len());
            $(
                if limit == 1usize << $bits {
                    return bincode::serde::decode_from_slice(
                        bytes,
                        bincode::config::standard().with_limit::<{ 1usize << $bits }>(),
                    );
                }
            )*
            bincode::serde::decode_from_slice(
                bytes,
                bincode::config::standard().with_limit::<{ usize::MAX }>(),
            )
        }};
    }
    limited!(16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32)
}

/// Encode one value with `codec`. The only place a payload is serialized.
pub fn encode<T: Serialize>(codec: Codec, value: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    encode_to(codec, value, &mut out)?;
    Ok(out)
}

/// [`encode`], appending to `out` (a frame's header may already be there).
fn encode_to<T: Serialize>(codec: Codec, value: &T, out: &mut Vec<u8>) -> Result<(), CodecError> {
    match codec {
        Codec::Bincode => {
            bincode::serde::encode_into_std_write(value, out, bincode::config::standard())
                .map(drop)
                .map_err(|e| CodecError::Encode {
                    codec,
                    message: match e {
                        bincode::error::EncodeError::OtherString(message) => message,
                        other => other.to_string(),
                    },
                })
        }
        Codec::Json => serde_json::to_writer(out, value).map_err(|e| CodecError::Encode {
            codec,
            message: e.to_string(),
        }),
    }
}

/// Decode one value with `codec`. The only place a payload is deserialized. Trailing
/// bytes after a complete value are an error: a frame holds exactly one value.
pub fn decode<T: DeserializeOwned>(codec: Codec, bytes: &[u8]) -> Result<T, CodecError> {
    match codec {
        Codec::Bincode => {
            let (value, used) = decode_bincode(bytes).map_err(|e| CodecError::Malformed {
                codec,
                message: match e {
                    // A message of ours (a serde `custom` error), not bincode's Debug form.
                    bincode::error::DecodeError::OtherString(message) => message,
                    other => other.to_string(),
                },
            })?;
            if used != bytes.len() {
                return Err(CodecError::Malformed {
                    codec,
                    message: format!("{} trailing bytes after the value", bytes.len() - used),
                });
            }
            Ok(value)
        }
        Codec::Json => serde_json::from_slice(bytes).map_err(|e| CodecError::Malformed {
            codec,
            message: e.to_string(),
        }),
    }
}

/// Encode `value` and prefix it with its length, ready to write to a socket.
pub fn encode_frame<T: Serialize>(
    codec: Codec,
    value: &T,
    max: u32,
) -> Result<Vec<u8>, CodecError> {
    // The payload is written after room for its length, in the one buffer the frame leaves
    // in (no second buffer, no copy).
    let mut out = vec![0u8; 4];
    encode_to(codec, value, &mut out)?;
    let len = out.len() - 4;
    if len as u64 > u64::from(max) {
        return Err(CodecError::Oversized {
            len: len as u64,
            max,
        });
    }
    out[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(out)
}

/// Check a frame header against the cap and return the payload length.
pub fn frame_len(header: [u8; 4], max: u32) -> Result<usize, CodecError> {
    let len = u32::from_be_bytes(header);
    if len > max {
        return Err(CodecError::Oversized {
            len: u64::from(len),
            max,
        });
    }
    Ok(len as usize)
}

/// Read one frame's payload from a blocking reader. `Closed` means a clean end of stream
/// between frames.
pub fn read_frame<R: Read>(reader: &mut R, max: u32) -> Result<Vec<u8>, CodecError> {
    let mut header = [0u8; 4];
    read_full(reader, &mut header, true)?;
    let len = frame_len(header, max)?;
    let mut payload = vec![0u8; len];
    read_full(reader, &mut payload, false)?;
    Ok(payload)
}

fn read_full<R: Read>(reader: &mut R, buf: &mut [u8], at_boundary: bool) -> Result<(), CodecError> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) if got == 0 && at_boundary => return Err(CodecError::Closed),
            Ok(0) => {
                return Err(CodecError::Truncated {
                    got,
                    want: buf.len(),
                });
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Write one value as a frame to a blocking writer.
pub fn write_frame<W: Write, T: Serialize>(
    writer: &mut W,
    codec: Codec,
    value: &T,
    max: u32,
) -> Result<(), CodecError> {
    let frame = encode_frame(codec, value, max)?;
    writer.write_all(&frame)?;
    writer.flush()?;
    Ok(())
}
