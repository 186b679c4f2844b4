//! Frames: a 4-byte big-endian length, then the kind (1 byte), the correlation
//! id (8 bytes, big-endian) and the body. The length counts everything after
//! it, so it is at least `FRAME_HEADER_BYTES`.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use bytes::BytesMut;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;
use tokio::io::AsyncWrite;
use tokio::io::AsyncWriteExt;

use crate::limits::FRAME_READ_CHUNK_BYTES;
use crate::limits::INTER_NODE_FRAME_BYTES_MAX;

/// The largest kind a caller may use for its requests; the kinds above are the
/// transport's own.
pub const REQUEST_KIND_MAX: u8 = 0x7f;

/// The connecting side's handshake.
pub(super) const KIND_HELLO: u8 = 0x80;
/// The accepting side's answer: who it is.
pub(super) const KIND_WELCOME: u8 = 0x81;
/// The accepting side's answer: refused, and why.
pub(super) const KIND_REFUSED: u8 = 0x82;
/// The answer to a request.
pub(super) const KIND_RESPONSE: u8 = 0x83;
/// The handler's error for a request (the body is its message).
pub(super) const KIND_ERROR: u8 = 0x84;

/// Kind and correlation id.
pub(super) const FRAME_HEADER_BYTES: usize = 1 + 8;

const LENGTH_PREFIX_BYTES: usize = 4;

/// The largest body a frame holds.
pub(super) const BODY_BYTES_MAX: usize = INTER_NODE_FRAME_BYTES_MAX as usize - FRAME_HEADER_BYTES;

const _: () = assert!(INTER_NODE_FRAME_BYTES_MAX as usize > FRAME_HEADER_BYTES);

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Frame {
    pub kind: u8,
    pub correlation: u64,
    pub body: Bytes,
}

/// Why no frame could be read; each closes the connection.
#[derive(Debug)]
pub(super) enum FrameError {
    /// The stream ended between frames: the peer closed.
    Eof,
    /// The stream ended inside a frame.
    Truncated,
    /// The length prefix is over the bound.
    TooLarge {
        length: u32,
        max: u32,
    },
    /// The length prefix is too short for a header.
    TooShort {
        length: u32,
    },
    /// No frame began within the idle deadline.
    Idle,
    /// The rest of a frame did not arrive within the transfer deadline.
    Stalled,
    Io(std::io::Error),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Eof => f.write_str("closed by the peer"),
            FrameError::Truncated => f.write_str("stream ended inside a frame"),
            FrameError::TooLarge { length, max } => {
                write!(f, "frame length {length} is over the bound of {max}")
            }
            FrameError::TooShort { length } => {
                write!(f, "frame length {length} is shorter than a frame header")
            }
            FrameError::Idle => f.write_str("idle for too long"),
            FrameError::Stalled => f.write_str("frame not completed in time"),
            FrameError::Io(error) => write!(f, "{error}"),
        }
    }
}

/// Reads one frame of at most `max` bytes. The wait for the frame to begin is
/// bounded by `idle` (if any), the rest of it by `transfer`; the length is
/// checked before anything is allocated, and the body is read in chunks so
/// memory follows the bytes that arrived.
pub(super) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: u32,
    idle: Option<Duration>,
    transfer: Duration,
) -> Result<Frame, FrameError> {
    let mut prefix = [0u8; LENGTH_PREFIX_BYTES];
    // The first byte tells a clean close (nothing of a frame) from a truncation.
    let first = async {
        match reader.read(&mut prefix[..1]).await {
            Ok(0) => Err(FrameError::Eof),
            Ok(_) => Ok(()),
            Err(error) => Err(FrameError::Io(error)),
        }
    };
    match idle {
        Some(idle) => tokio::time::timeout(idle, first)
            .await
            .map_err(|_| FrameError::Idle)??,
        None => first.await?,
    }
    let rest = async {
        reader
            .read_exact(&mut prefix[1..])
            .await
            .map_err(truncated)?;
        let length = u32::from_be_bytes(prefix);
        if length > max {
            return Err(FrameError::TooLarge { length, max });
        }
        if (length as usize) < FRAME_HEADER_BYTES {
            return Err(FrameError::TooShort { length });
        }
        let mut header = [0u8; FRAME_HEADER_BYTES];
        reader.read_exact(&mut header).await.map_err(truncated)?;
        let kind = header[0];
        let mut correlation = [0u8; 8];
        correlation.copy_from_slice(&header[1..]);
        let correlation = u64::from_be_bytes(correlation);
        let length = length as usize - FRAME_HEADER_BYTES;
        let mut body = BytesMut::with_capacity(length.min(FRAME_READ_CHUNK_BYTES));
        while body.len() < length {
            body.reserve((length - body.len()).min(FRAME_READ_CHUNK_BYTES));
            let room = (length - body.len()) as u64;
            let read = (&mut *reader)
                .take(room)
                .read_buf(&mut body)
                .await
                .map_err(FrameError::Io)?;
            if read == 0 {
                return Err(FrameError::Truncated);
            }
        }
        Ok(Frame {
            kind,
            correlation,
            body: body.freeze(),
        })
    };
    tokio::time::timeout(transfer, rest)
        .await
        .map_err(|_| FrameError::Stalled)?
}

fn truncated(error: std::io::Error) -> FrameError {
    if error.kind() == std::io::ErrorKind::UnexpectedEof {
        FrameError::Truncated
    } else {
        FrameError::Io(error)
    }
}

/// Writes one frame (not flushed). The caller checked the body against
/// `BODY_BYTES_MAX`.
pub(super) async fn write_frame<W: AsyncWrite + Unpin>(
    writer: &mut W,
    kind: u8,
    correlation: u64,
    body: &[u8],
) -> std::io::Result<()> {
    let length = u32::try_from(FRAME_HEADER_BYTES + body.len())
        .ok()
        .filter(|length| *length <= INTER_NODE_FRAME_BYTES_MAX)
        .ok_or_else(|| std::io::Error::other("frame body over the bound"))?;
    let mut head = [0u8; LENGTH_PREFIX_BYTES + FRAME_HEADER_BYTES];
    head[..4].copy_from_slice(&length.to_be_bytes());
    head[4] = kind;
    head[5..].copy_from_slice(&correlation.to_be_bytes());
    writer.write_all(&head).await?;
    writer.write_all(body).await
}

/// Writes queued frames until the queue closes, flushing whenever it runs
/// empty; each frame must be written within `INTER_NODE_FRAME_TRANSFER_TIMEOUT_MS`.
/// Both sides of a connection write this way: the peer its requests, the server
/// its answers.
pub(super) async fn write_queued<W: AsyncWrite + Unpin>(
    writer: W,
    mut queued: tokio::sync::mpsc::Receiver<Frame>,
) -> Result<(), String> {
    let mut writer = tokio::io::BufWriter::new(writer);
    let transfer =
        std::time::Duration::from_millis(crate::limits::INTER_NODE_FRAME_TRANSFER_TIMEOUT_MS);
    while let Some(frame) = queued.recv().await {
        let written = async {
            write_frame(&mut writer, frame.kind, frame.correlation, &frame.body).await?;
            if queued.is_empty() {
                tokio::io::AsyncWriteExt::flush(&mut writer).await?;
            }
            Ok::<(), std::io::Error>(())
        };
        match tokio::time::timeout(transfer, written).await {
            Err(_) => return Err("frame not written in time".to_string()),
            Ok(Err(error)) => return Err(error.to_string()),
            Ok(Ok(())) => {}
        }
    }
    Ok(())
}
