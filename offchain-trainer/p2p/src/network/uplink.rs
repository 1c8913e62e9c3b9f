//! A node's upload rate, shared by every transfer it serves ([`super::NetConfig::max_upload`]):
//! each write of a served body first reserves its bytes' time on the link, after every earlier
//! reservation, so concurrent transfers share the link piece by piece (first come, first
//! served) and together never send faster than the rate. An operator caps what serving may
//! take of its link; a test gives a loopback node the link of a real one.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use futures::{AsyncRead, AsyncWrite};
use tokio::time::{sleep_until, Instant, Sleep};

use super::lock;

/// Most bytes one reservation covers: a transfer waits for the link at most this much at a
/// time, so many transfers interleave finely.
const PIECE: usize = 64 << 10;

/// The link's schedule: when it is free again.
pub(super) struct Uplink {
    /// Bytes per second.
    rate: u64,
    /// The end of the latest reservation.
    free_at: Mutex<Instant>,
}

impl Uplink {
    /// A link sending `bytes_per_sec` (at least 1).
    pub(super) fn new(bytes_per_sec: u64) -> Self {
        Self {
            rate: bytes_per_sec.max(1),
            free_at: Mutex::new(Instant::now()),
        }
    }

    /// Reserves the link for `n` bytes after every earlier reservation; returns when they
    /// will have been sent.
    fn reserve(&self, n: usize) -> Instant {
        let nanos = (n as u128 * 1_000_000_000 / u128::from(self.rate)).min(u128::from(u64::MAX));
        let mut free_at = lock(&self.free_at);
        let end = (*free_at).max(Instant::now()) + Duration::from_nanos(nanos as u64);
        *free_at = end;
        end
    }
}

/// A served stream whose writes go out at the pace of an [`Uplink`]: bytes are written only
/// once their reservation on the link has passed, at most [`PIECE`] per reservation (reads are
/// untouched). A reservation's bytes may go out over several writes (a multiplexer splits
/// them into frames).
pub(super) struct Throttled<'a, T> {
    io: &'a mut T,
    uplink: &'a Uplink,
    /// The reservation being waited for: its end and its size (bytes).
    wait: Option<(Pin<Box<Sleep>>, usize)>,
    /// Bytes of passed reservations not written yet.
    credit: usize,
}

impl<'a, T> Throttled<'a, T> {
    pub(super) fn new(io: &'a mut T, uplink: &'a Uplink) -> Self {
        Self {
            io,
            uplink,
            wait: None,
            credit: 0,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Throttled<'_, T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Throttled<'_, T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Pin::new(&mut *this.io).poll_write(cx, buf);
        }
        if this.credit == 0 {
            let uplink = this.uplink;
            let (sleep, n) = this.wait.get_or_insert_with(|| {
                let n = buf.len().min(PIECE);
                (Box::pin(sleep_until(uplink.reserve(n))), n)
            });
            ready!(sleep.as_mut().poll(cx));
            this.credit = *n;
            this.wait = None;
        }
        let n = this.credit.min(buf.len());
        let written = ready!(Pin::new(&mut *this.io).poll_write(cx, &buf[..n]))?;
        this.credit -= written.min(this.credit);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().io).poll_close(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::AsyncWriteExt;

    #[tokio::test]
    async fn concurrent_writes_share_the_rate_and_never_exceed_it() {
        // 1 MB/s; two writers of 128 KiB each start together. Neither can finish before both
        // bodies went out at the rate (less one piece): they share the link piece by piece,
        // instead of the first finishing at half that time.
        let uplink = Uplink::new(1_000_000);
        let start = Instant::now();
        let write = || async {
            let mut sink = futures::io::sink();
            Throttled::new(&mut sink, &uplink)
                .write_all(&vec![0u8; 128 << 10])
                .await
                .unwrap();
            start.elapsed()
        };
        let (a, b) = futures::join!(write(), write());
        let both = Duration::from_secs_f64(f64::from((2 * (128u32 << 10)) - PIECE as u32) / 1e6);
        for t in [a, b] {
            assert!(t >= both, "a writer finished after {t:?}, before {both:?}");
        }
    }

    /// A sink that takes at most 16 KiB per write, as a stream multiplexer's frames do.
    struct Framed(usize);

    impl AsyncWrite for Framed {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(16 << 10);
            self.get_mut().0 += n;
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_reservation_is_spent_over_a_multiplexers_short_writes() {
        // 128 KiB through a sink that takes 16 KiB per write: two reservations of 64 KiB, not
        // eight (a reservation per write would send a quarter of the rate).
        let uplink = Uplink::new(1_000_000);
        let start = Instant::now();
        let mut sink = Framed(0);
        Throttled::new(&mut sink, &uplink)
            .write_all(&vec![0u8; 128 << 10])
            .await
            .unwrap();
        assert_eq!(sink.0, 128 << 10);
        let reserved = *lock(&uplink.free_at) - start;
        let body = Duration::from_secs_f64(f64::from(128u32 << 10) / 1e6);
        assert!(
            reserved < 2 * body,
            "the link was reserved for {reserved:?} to send {body:?} worth"
        );
    }
}
