//! Frames to typed requests and typed responses to frames.
//!
//! A frame here is the bytes after the 4-byte length prefix, which `server` has
//! already bounded. Decoding never trusts a length it reads: the crate's decoders
//! check every string and byte length against the bytes remaining, and array
//! lengths are covered by the allocator (see `alloc`).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use std::fmt;

/// Bytes of the fixed request header prefix: api key, api version, correlation id.
pub const REQUEST_HEADER_PREFIX_BYTES: usize = 8;
/// Bytes of the frame length prefix on the wire.
pub const FRAME_LENGTH_PREFIX_BYTES: usize = 4;

/// Why a frame cannot be served. Each ends the connection, as in Kafka, except
/// an ApiVersions request at a version we lack, which the dispatcher answers.
#[derive(Debug)]
pub enum FrameError {
    UnknownApiKey(i16),
    UnsupportedVersion { api_key: ApiKey, version: i16 },
    Malformed(String),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::UnknownApiKey(key) => write!(f, "unknown api key {key}"),
            FrameError::UnsupportedVersion { api_key, version } => {
                write!(f, "unsupported version {version} of {api_key:?}")
            }
            FrameError::Malformed(reason) => write!(f, "malformed request: {reason}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Reads api key and version without consuming them.
pub fn peek_api(frame: &Bytes) -> Result<(i16, i16), FrameError> {
    if frame.len() < REQUEST_HEADER_PREFIX_BYTES {
        return Err(FrameError::Malformed(format!(
            "frame of {} bytes is shorter than a request header",
            frame.len()
        )));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    Ok((api_key, api_version))
}

/// The client id of a request whose API or version we do not know: every request
/// header from v1 on starts with api key, version, correlation id and client id,
/// so reading it at v1 works whatever follows.
pub fn peek_client_id(frame: &Bytes) -> Option<String> {
    let header = RequestHeader::decode(&mut frame.clone(), 1).ok()?;
    header.client_id.map(|id| id.to_string())
}

/// Decodes the request header at the version the api key and api version imply,
/// leaving `frame` at the start of the body.
pub fn decode_header(frame: &mut Bytes) -> Result<(ApiKey, RequestHeader), FrameError> {
    let (key, version) = peek_api(frame)?;
    let api_key = ApiKey::try_from(key).map_err(|_| FrameError::UnknownApiKey(key))?;
    if version < 0 {
        return Err(FrameError::UnsupportedVersion { api_key, version });
    }
    let header_version = api_key.request_header_version(version);
    let header = RequestHeader::decode(frame, header_version)
        .map_err(|e| FrameError::Malformed(format!("request header: {e}")))?;
    Ok((api_key, header))
}

/// Decodes a request body at `version`.
pub fn decode_body<T: Decodable>(body: &mut Bytes, version: i16) -> Result<T, FrameError> {
    T::decode(body, version).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Encodes a response with its header, length-prefixed, ready for the socket.
pub fn encode_response<T: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Bytes, FrameError> {
    let header_version = api_key.response_header_version(version);
    encode_with_header_version(header_version, version, correlation_id, body)
}

/// Frames a response body already encoded (by the codec of the old versions):
/// length prefix, header, body.
pub fn frame_encoded_body(
    header_version: i16,
    correlation_id: i32,
    body: &[u8],
) -> Result<Bytes, FrameError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let encode_error = |e: anyhow::Error| FrameError::Malformed(format!("encoding response: {e}"));
    let size = header.compute_size(header_version).map_err(encode_error)? + body.len();
    let size_prefix = i32::try_from(size)
        .map_err(|_| FrameError::Malformed(format!("response of {size} bytes is too large")))?;
    let mut buf = BytesMut::with_capacity(FRAME_LENGTH_PREFIX_BYTES + size);
    buf.put_i32(size_prefix);
    header
        .encode(&mut buf, header_version)
        .map_err(encode_error)?;
    buf.put_slice(body);
    Ok(buf.freeze())
}

/// As `encode_response` with an explicit header version: ApiVersions answers
/// with header v0 at every version, so clients can read it before they know ours.
pub fn encode_with_header_version<T: Encodable>(
    header_version: i16,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<Bytes, FrameError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let encode_error = |e: anyhow::Error| FrameError::Malformed(format!("encoding response: {e}"));
    let size = header.compute_size(header_version).map_err(encode_error)?
        + body.compute_size(version).map_err(encode_error)?;
    let mut buf = BytesMut::with_capacity(FRAME_LENGTH_PREFIX_BYTES + size);
    let size_prefix = i32::try_from(size)
        .map_err(|_| FrameError::Malformed(format!("response of {size} bytes is too large")))?;
    buf.put_i32(size_prefix);
    header
        .encode(&mut buf, header_version)
        .map_err(encode_error)?;
    body.encode(&mut buf, version).map_err(encode_error)?;
    assert_eq!(
        buf.len(),
        FRAME_LENGTH_PREFIX_BYTES + size,
        "computed response size"
    );
    Ok(buf.freeze())
}
