//! The chunked request-response protocols `/synod/pseudograd/1` and `/synod/checkpoint/1`.
//!
//! Frames are a u32 little-endian length followed by a SCALE value. A reader refuses a frame
//! over its limit before reading it, and any malformed frame is an `InvalidData` I/O error
//! (libp2p then drops that stream; the event loop counts it against the peer).

use std::io;

use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use libp2p::StreamProtocol;
use parity_scale_codec::{Decode, DecodeAll, Encode};

/// Protocol of pseudo-gradient payload chunks.
pub const PSEUDOGRAD_PROTOCOL: StreamProtocol = StreamProtocol::new("/synod/pseudograd/1");
/// Protocol of checkpoint file chunks.
pub const CHECKPOINT_PROTOCOL: StreamProtocol = StreamProtocol::new("/synod/checkpoint/1");
/// Bytes per chunk (the largest a response carries).
pub const CHUNK_BYTES: u32 = 1 << 20;
const MAX_REQUEST_FRAME: u32 = 1024;
const MAX_RESPONSE_FRAME: u32 = CHUNK_BYTES + 1024;

/// A request for `len` bytes at `offset` of a payload or a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub enum ChunkRequest {
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
        /// Byte offset.
        offset: u64,
        /// Bytes wanted (≤ [`CHUNK_BYTES`]).
        len: u32,
    },
    /// The checkpoint file whose blake3 is `hash`.
    Checkpoint {
        /// blake3 of the file.
        hash: [u8; 32],
        /// Byte offset.
        offset: u64,
        /// Bytes wanted (≤ [`CHUNK_BYTES`]).
        len: u32,
    },
}

/// The answer to a [`ChunkRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub enum ChunkResponse {
    /// The bytes (possibly fewer than asked at the end) and the object's total size.
    Data {
        /// Total size of the object in bytes.
        total: u64,
        /// The chunk.
        bytes: Vec<u8>,
    },
    /// This peer does not hold the object.
    NotFound,
    /// The requester is not a member, or the request is out of range.
    Refused,
}

/// Length-prefixed SCALE codec with frame limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChunkCodec;

async fn read_frame<T: AsyncRead + Unpin + Send, V: Decode>(io: &mut T, max: u32) -> io::Result<V> {
    let mut len = [0u8; 4];
    io.read_exact(&mut len).await?;
    let len = u32::from_le_bytes(len);
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes over the {max}-byte limit"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    io.read_exact(&mut buf).await?;
    V::decode_all(&mut buf.as_slice())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

async fn write_frame<T: AsyncWrite + Unpin + Send, V: Encode>(io: &mut T, v: &V) -> io::Result<()> {
    let bytes = v.encode();
    let len = u32::try_from(bytes.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    io.write_all(&len.to_le_bytes()).await?;
    io.write_all(&bytes).await?;
    io.close().await
}

impl libp2p::request_response::Codec for ChunkCodec {
    type Protocol = StreamProtocol;
    type Request = ChunkRequest;
    type Response = ChunkResponse;

    async fn read_request<T: AsyncRead + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> io::Result<ChunkRequest> {
        read_frame(io, MAX_REQUEST_FRAME).await
    }

    async fn read_response<T: AsyncRead + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> io::Result<ChunkResponse> {
        read_frame(io, MAX_RESPONSE_FRAME).await
    }

    async fn write_request<T: AsyncWrite + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        req: ChunkRequest,
    ) -> io::Result<()> {
        write_frame(io, &req).await
    }

    async fn write_response<T: AsyncWrite + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        res: ChunkResponse,
    ) -> io::Result<()> {
        write_frame(io, &res).await
    }
}

/// Answers a chunk request from `object` (the whole payload or file).
pub fn serve(object: &[u8], offset: u64, len: u32) -> ChunkResponse {
    let total = object.len() as u64;
    if offset > total || len > CHUNK_BYTES {
        return ChunkResponse::Refused;
    }
    let start = offset as usize;
    let end = start.saturating_add(len as usize).min(object.len());
    ChunkResponse::Data {
        total,
        bytes: object[start..end].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libp2p::request_response::Codec;

    #[test]
    fn frames_round_trip_and_oversized_or_garbage_frames_are_invalid_data() {
        futures::executor::block_on(async {
            let req = ChunkRequest::Checkpoint {
                hash: [3; 32],
                offset: 7,
                len: 9,
            };
            let mut buf = futures::io::Cursor::new(Vec::new());
            ChunkCodec
                .write_request(&CHECKPOINT_PROTOCOL, &mut buf, req.clone())
                .await
                .unwrap();
            let mut r = futures::io::Cursor::new(buf.into_inner());
            assert_eq!(
                ChunkCodec
                    .read_request(&CHECKPOINT_PROTOCOL, &mut r)
                    .await
                    .unwrap(),
                req
            );

            let mut huge = (MAX_REQUEST_FRAME + 1).to_le_bytes().to_vec();
            huge.extend(vec![0; 16]);
            let e = ChunkCodec
                .read_request(&CHECKPOINT_PROTOCOL, &mut futures::io::Cursor::new(huge))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            let mut garbage = 4u32.to_le_bytes().to_vec();
            garbage.extend([0xff; 4]);
            let e = ChunkCodec
                .read_request(&CHECKPOINT_PROTOCOL, &mut futures::io::Cursor::new(garbage))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            let e = ChunkCodec
                .read_response(
                    &CHECKPOINT_PROTOCOL,
                    &mut futures::io::Cursor::new(vec![1, 0]),
                )
                .await
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        });
    }

    #[test]
    fn serve_bounds_every_range() {
        let obj: Vec<u8> = (0..10).collect();
        assert_eq!(
            serve(&obj, 8, 5),
            ChunkResponse::Data {
                total: 10,
                bytes: vec![8, 9]
            }
        );
        assert_eq!(
            serve(&obj, 10, 5),
            ChunkResponse::Data {
                total: 10,
                bytes: vec![]
            }
        );
        assert_eq!(serve(&obj, 11, 1), ChunkResponse::Refused);
        assert_eq!(serve(&obj, 0, CHUNK_BYTES + 1), ChunkResponse::Refused);
        assert_eq!(serve(&obj, u64::MAX, 1), ChunkResponse::Refused);
    }
}
