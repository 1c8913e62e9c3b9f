//! The stream protocols `/synod/pseudograd/2` and `/synod/checkpoint/2`: one libp2p stream per
//! object. (Version 1 was chunked request-response; a version-1 peer and a version-2 peer fail
//! protocol negotiation instead of reading each other's frames as malformed and banning each
//! other. The announcements' signing domain stays `synod/pseudograd/1`.)
//!
//! The requester opens a stream (`libp2p-stream`, so the bytes never pass through the swarm's
//! event loop), writes one [`FetchRequest`] frame and reads one [`FetchHeader`] frame; if the
//! header is [`FetchHeader::Data`] exactly `total` raw bytes follow and the server closes the
//! stream. Frames are a u32 little-endian length followed by a SCALE value; a reader refuses a
//! frame over its limit before reading it, and a malformed frame is an `InvalidData` error (the
//! server bans the sender of a malformed request).
//!
//! The body is one `write_all` into the stream on one side and reads straight into the result
//! buffer on the other: no per-chunk stream, SCALE copy or round trip through the event loop.
//!
//! Both sides bound their time ([`Limits`]): every read or write must progress within
//! `stall`, and the body must keep ahead of the line `min_rate × (t − stall)` (bytes done by
//! `t` seconds after its header), so a peer that announces and never delivers, or trickles a
//! byte at a time, is cut as soon as it falls behind: it costs a fetcher (or holds a serving
//! slot for) about `stall`, not the whole body's `stall + total / min_rate`, nor the round.

use std::io;
use std::time::Duration;

use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use libp2p::StreamProtocol;
use parity_scale_codec::{Decode, DecodeAll, Encode};

use crate::NetError;

/// Protocol of pseudo-gradient payloads.
pub const PSEUDOGRAD_PROTOCOL: StreamProtocol = StreamProtocol::new("/synod/pseudograd/2");
/// Protocol of checkpoint files.
pub const CHECKPOINT_PROTOCOL: StreamProtocol = StreamProtocol::new("/synod/checkpoint/2");
/// Largest request frame, bytes.
pub const MAX_REQUEST_FRAME: u32 = 1024;
/// Largest header frame, bytes.
const MAX_HEADER_FRAME: u32 = 64;
/// Most bytes asked of one read, or written in one write, of a body: each must go through
/// within [`Limits::stall`].
pub const STEP: usize = 1 << 20;

/// A request for a whole payload or checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub enum FetchRequest {
    /// Member `member`'s pseudo-gradient of `round` in `pool`, whose blake3 is `digest`.
    Pseudograd {
        /// Pool id.
        pool: u64,
        /// Outer round.
        round: u32,
        /// Member index of the payload's author.
        member: u32,
        /// blake3 of the whole payload.
        digest: [u8; 32],
    },
    /// The checkpoint file whose blake3 is `hash`.
    Checkpoint {
        /// blake3 of the file.
        hash: [u8; 32],
    },
}

/// The server's answer, before the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub enum FetchHeader {
    /// `total` bytes follow, then the stream ends.
    Data {
        /// Size of the object in bytes.
        total: u64,
    },
    /// This peer does not hold the object.
    NotFound,
    /// The requester is not a member, the server is busy, or the request does not belong on
    /// this protocol.
    Refused,
}

/// Time bounds of one transfer.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest wait for any single read or write to make progress.
    pub stall: Duration,
    /// Slowest acceptable rate, bytes per second, after the first `stall`: the first `n`
    /// bytes of a body are due `stall + n / min_rate` after its header ([`Limits::body_time`]
    /// of `n`); a transfer behind that line is cut.
    pub min_rate: u64,
}

impl Default for Limits {
    /// 10 s without progress (Prime's ElasticDeviceMesh's dead-peer time), then at least
    /// 250 kB/s from the header on (the body's first n bytes within 10 s + n / 250 kB/s): an
    /// author uploading to 30 peers at once over 100 Mbit/s gives each ≈ 0.4 MB/s.
    fn default() -> Self {
        Self {
            stall: Duration::from_secs(10),
            min_rate: 250_000,
        }
    }
}

impl Limits {
    /// Slowest rate, bytes per second, at which a transfer is never cut: at least `min_rate`
    /// (the line), and one [`STEP`] within `stall` (each write or read of a body must go
    /// through within it).
    pub fn slowest_kept_rate(&self) -> f64 {
        let step = STEP as f64 / self.stall.as_secs_f64().max(1e-9);
        step.max(self.min_rate as f64)
    }

    /// Longest the first `total` bytes of a body may take: `stall + total / min_rate`
    /// (saturating; nanosecond precision).
    pub fn body_time(&self, total: u64) -> Duration {
        let nanos = u128::from(total) * 1_000_000_000 / u128::from(self.min_rate.max(1));
        self.stall.saturating_add(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }
}

/// The minimum-throughput line of one body ([`Limits`]), from the moment its header went out
/// (server) or came in (requester).
struct Pace {
    start: tokio::time::Instant,
    limits: Limits,
}

impl Pace {
    fn new(limits: Limits) -> Self {
        Self {
            start: tokio::time::Instant::now(),
            limits,
        }
    }

    /// Runs one read or write of the body that must be done before the line reaches `due`
    /// bytes (a read: the bytes already in; a write: those in after it) and within `stall`.
    ///
    /// # Errors
    /// `TimedOut` ("peer stalled" or "peer below the minimum rate"); `f`'s errors.
    async fn step<T>(
        &self,
        due: u64,
        f: impl std::future::Future<Output = io::Result<T>>,
    ) -> io::Result<T> {
        let left = self
            .start
            .checked_add(self.limits.body_time(due))
            .map(|at| at.saturating_duration_since(tokio::time::Instant::now()));
        let (wait, why) = match left {
            Some(left) if left < self.limits.stall => (left, "peer below the minimum rate"),
            _ => (self.limits.stall, "peer stalled"),
        };
        tokio::time::timeout(wait, f)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, why))?
    }
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

async fn timed<T>(
    d: Duration,
    f: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    tokio::time::timeout(d, f)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "peer stalled"))?
}

/// Reads one frame of at most `max` bytes.
///
/// # Errors
/// `InvalidData` for a frame over `max` or not a SCALE `V`; the stream's I/O errors.
pub async fn read_frame<T: AsyncRead + Unpin, V: Decode>(io: &mut T, max: u32) -> io::Result<V> {
    let mut len = [0u8; 4];
    io.read_exact(&mut len).await?;
    let len = u32::from_le_bytes(len);
    if len > max {
        return Err(invalid(format!(
            "frame of {len} bytes over the {max}-byte limit"
        )));
    }
    let mut buf = vec![0u8; len as usize];
    io.read_exact(&mut buf).await?;
    V::decode_all(&mut buf.as_slice()).map_err(|e| invalid(e.to_string()))
}

/// Writes one frame.
///
/// # Errors
/// The stream's I/O errors.
pub async fn write_frame<T: AsyncWrite + Unpin, V: Encode>(io: &mut T, v: &V) -> io::Result<()> {
    let bytes = v.encode();
    let len = u32::try_from(bytes.len()).map_err(|_| invalid("frame too large"))?;
    let mut frame = len.to_le_bytes().to_vec();
    frame.extend_from_slice(&bytes);
    io.write_all(&frame).await?;
    io.flush().await
}

/// What the requester expects of the object.
#[derive(Clone, Copy, Debug)]
pub struct Expect {
    /// The exact size (a payload's signed announcement), or `None` for any size up to `max`.
    pub size: Option<u64>,
    /// Largest acceptable size, bytes.
    pub max: u64,
    /// blake3 of the object.
    pub digest: [u8; 32],
}

/// The requester's side: writes `req`, reads the header and the body, checks size and blake3.
/// The buffer's capacity is reserved up front (a failed reservation is an error, never an
/// abort) but it is written, and so made resident, only as bytes arrive: memory follows what
/// the peer sent, not the size it declared.
///
/// # Errors
/// [`NetError::NotFound`]; [`NetError::TooLarge`] for a size over `expect.max`;
/// [`NetError::DigestMismatch`]; [`NetError::Refused`]; [`NetError::Request`] for a size other than the
/// announced one, a truncated body, a malformed header, a stall or a transport error.
pub async fn request<T: AsyncRead + AsyncWrite + Unpin>(
    io: &mut T,
    req: &FetchRequest,
    expect: Expect,
    limits: Limits,
) -> Result<Vec<u8>, NetError> {
    request_signalled(io, req, expect, limits, None).await
}

/// As [`request`], and sets `answered` once the server has answered with the object's header
/// (it holds the object and is sending it): a requester that asks several sources for one
/// object asks no more once one has answered.
///
/// # Errors
/// As [`request`].
pub async fn request_signalled<T: AsyncRead + AsyncWrite + Unpin>(
    io: &mut T,
    req: &FetchRequest,
    expect: Expect,
    limits: Limits,
    answered: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Vec<u8>, NetError> {
    let fail = |e: io::Error| NetError::Request(e.to_string());
    timed(limits.stall, write_frame(io, req))
        .await
        .map_err(fail)?;
    let header = timed(limits.stall, read_frame(io, MAX_HEADER_FRAME))
        .await
        .map_err(fail)?;
    let total = match header {
        FetchHeader::Data { total } => total,
        FetchHeader::NotFound => return Err(NetError::NotFound),
        FetchHeader::Refused => return Err(NetError::Refused),
    };
    if total > expect.max || usize::try_from(total).is_err() {
        return Err(NetError::TooLarge(total));
    }
    if expect.size.is_some_and(|s| s != total) {
        return Err(NetError::Request(format!(
            "object of {total} bytes, {} announced",
            expect.size.unwrap_or_default()
        )));
    }
    // Answered: a header of the object asked for (a header of another size is no answer).
    if let Some(a) = answered {
        a.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let (bytes, digest) = read_body(io, total, limits).await.map_err(fail)?;
    if digest != expect.digest {
        return Err(NetError::DigestMismatch);
    }
    Ok(bytes)
}

/// Reads a body of `total` bytes paced by `limits` ([`Pace`]); its bytes and blake3.
async fn read_body<T: AsyncRead + Unpin>(
    io: &mut T,
    total: u64,
    limits: Limits,
) -> io::Result<(Vec<u8>, [u8; 32])> {
    let pace = Pace::new(limits);
    let total = usize::try_from(total).map_err(|_| invalid("object larger than memory"))?;
    let mut buf: Vec<u8> = Vec::new();
    buf.try_reserve_exact(total)
        .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e.to_string()))?;
    let mut hasher = blake3::Hasher::new();
    // Read into a scratch step, hash it, append it: the result buffer is written (and made
    // resident) only with bytes that arrived. (Zero-filling it by hand instead ran std's
    // generic byte loop unoptimised — the instance is shared from an opt-level-0 crate — and
    // took a fifth of the exchange's CPU.)
    let mut step = vec![0u8; STEP.min(total)];
    while buf.len() < total {
        let want = (total - buf.len()).min(STEP);
        let n = pace
            .step(buf.len() as u64, io.read(&mut step[..want]))
            .await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("body ended after {} of {total} bytes", buf.len()),
            ));
        }
        hasher.update(&step[..n]);
        buf.extend_from_slice(&step[..n]);
    }
    Ok((buf, *hasher.finalize().as_bytes()))
}

/// What a server answers to a request.
pub enum Answer {
    /// Serve these bytes.
    Data(std::sync::Arc<Vec<u8>>),
    /// Serve the content of this file, read one step at a time on a blocking thread
    /// (`NotFound` if it cannot be opened).
    File(std::path::PathBuf),
    /// Not held here.
    NotFound,
    /// Not for this requester or this protocol.
    Refused,
}

/// The server's side: reads one request (within `limits.stall`), answers it with `lookup`,
/// writes the body and closes the stream.
///
/// # Errors
/// `InvalidData` for a malformed or oversized request (the caller bans the peer); `TimedOut`
/// for a peer that stalls; the stream's I/O errors.
pub async fn respond<T: AsyncRead + AsyncWrite + Unpin>(
    io: &mut T,
    limits: Limits,
    lookup: impl FnOnce(&FetchRequest) -> Answer,
) -> io::Result<()> {
    let req: FetchRequest = timed(limits.stall, read_frame(io, MAX_REQUEST_FRAME)).await?;
    match lookup(&req) {
        Answer::Data(bytes) => {
            let total = bytes.len() as u64;
            timed(limits.stall, write_frame(io, &FetchHeader::Data { total })).await?;
            // Every step must go out within `stall` and keep ahead of the line (a requester
            // that stops reading, or reads a drip, frees the slot in seconds).
            let (pace, mut done) = (Pace::new(limits), 0u64);
            for step in bytes.chunks(STEP) {
                done += step.len() as u64;
                pace.step(done, io.write_all(step)).await?;
            }
            timed(limits.stall, io.close()).await
        }
        Answer::File(path) => respond_file(io, limits, path).await,
        Answer::NotFound => {
            timed(limits.stall, write_frame(io, &FetchHeader::NotFound)).await?;
            timed(limits.stall, io.close()).await
        }
        Answer::Refused => {
            timed(limits.stall, write_frame(io, &FetchHeader::Refused)).await?;
            timed(limits.stall, io.close()).await
        }
    }
}

/// Fault injection (tests): reads a request and answers data with its header only, then
/// holds the stream for twice `limits.stall` sending nothing (a source that drips: the
/// requester's pace cuts it after `stall`); other answers as [`respond`].
pub(crate) async fn respond_header_only<T: AsyncRead + AsyncWrite + Unpin>(
    io: &mut T,
    limits: Limits,
    lookup: impl FnOnce(&FetchRequest) -> Answer,
) -> io::Result<()> {
    let req: FetchRequest = timed(limits.stall, read_frame(io, MAX_REQUEST_FRAME)).await?;
    let total = match lookup(&req) {
        Answer::Data(bytes) => bytes.len() as u64,
        _ => {
            timed(limits.stall, write_frame(io, &FetchHeader::NotFound)).await?;
            return timed(limits.stall, io.close()).await;
        }
    };
    timed(limits.stall, write_frame(io, &FetchHeader::Data { total })).await?;
    io.flush().await?;
    tokio::time::sleep(limits.stall.saturating_mul(2)).await;
    Ok(())
}

/// Serves the file at `path` one [`STEP`] at a time (each read on a blocking thread), so a
/// transfer holds one step in memory whatever the file's size; `NotFound` if it cannot be
/// opened. A file that shrinks while served ends the stream early (the requester sees a
/// truncated, refused object).
async fn respond_file<T: AsyncRead + AsyncWrite + Unpin>(
    io: &mut T,
    limits: Limits,
    path: std::path::PathBuf,
) -> io::Result<()> {
    use std::io::Read;
    let opened = tokio::task::spawn_blocking(move || {
        let f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        Ok::<_, io::Error>((f, len))
    })
    .await;
    let Ok(Ok((mut file, total))) = opened else {
        timed(limits.stall, write_frame(io, &FetchHeader::NotFound)).await?;
        return timed(limits.stall, io.close()).await;
    };
    timed(limits.stall, write_frame(io, &FetchHeader::Data { total })).await?;
    // Each step is read from disk and written within `stall` and ahead of the line.
    let pace = Pace::new(limits);
    let mut left = total;
    while left > 0 {
        let want = left.min(STEP as u64) as usize;
        let due = total - left + want as u64;
        let read = tokio::task::spawn_blocking(move || {
            let mut step = vec![0u8; want];
            let r = file.read_exact(&mut step);
            (file, r.map(|()| step))
        });
        let (f, step) = pace
            .step(due, async { read.await.map_err(io::Error::other) })
            .await?;
        file = f;
        left -= want as u64;
        pace.step(due, io.write_all(&step?)).await?;
    }
    timed(limits.stall, io.close()).await
}

#[cfg(test)]
mod tests;
