//! Tests of [`super`].

use super::*;
use futures::io::Cursor;
use std::sync::Arc;

/// An in-memory stream. Reads come from `input` (`None`: a peer that never sends; every
/// read stays pending), one byte per `drip` when set (a peer that trickles); writes of at
/// most `max_write` bytes are collected in `output`, larger ones stay pending (a peer that
/// stops reading).
struct Mock {
    input: Option<Cursor<Vec<u8>>>,
    output: Vec<u8>,
    max_write: usize,
    drip: Option<Duration>,
    next_drop: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl AsyncRead for Mock {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<io::Result<usize>> {
        use std::future::Future;
        let this = &mut *self;
        let mut n = buf.len();
        if let Some(every) = this.drip {
            let next = this
                .next_drop
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
            if next.as_mut().poll(cx).is_pending() {
                return std::task::Poll::Pending;
            }
            this.next_drop = None;
            n = n.min(1);
        }
        match this.input.as_mut() {
            Some(input) => std::pin::Pin::new(input).poll_read(cx, &mut buf[..n]),
            None => std::task::Poll::Pending,
        }
    }
}

impl AsyncWrite for Mock {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        if buf.len() > self.max_write {
            return std::task::Poll::Pending;
        }
        self.output.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_close(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A peer that sends `input` and reads everything.
fn duplex(input: Vec<u8>) -> Mock {
    Mock {
        input: Some(Cursor::new(input)),
        output: Vec::new(),
        max_write: usize::MAX,
        drip: None,
        next_drop: None,
    }
}

/// A peer that reads everything and never sends a byte.
fn silent() -> Mock {
    Mock {
        input: None,
        ..duplex(Vec::new())
    }
}

fn frame(v: &impl Encode) -> Vec<u8> {
    let b = v.encode();
    [(b.len() as u32).to_le_bytes().to_vec(), b].concat()
}

const REQ: FetchRequest = FetchRequest::Checkpoint { hash: [3; 32] };

fn expect(object: &[u8]) -> Expect {
    Expect {
        size: Some(object.len() as u64),
        max: 1 << 30,
        digest: *blake3::hash(object).as_bytes(),
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// What a server answering `answer` writes to the stream.
fn served(answer: Answer) -> Vec<u8> {
    rt().block_on(async {
        let mut io = duplex(frame(&REQ));
        respond(&mut io, Limits::default(), |r| {
            assert_eq!(r, &REQ);
            answer
        })
        .await
        .unwrap();
        io.output
    })
}

fn fetch(stream: Vec<u8>, expect: Expect) -> Result<Vec<u8>, NetError> {
    rt().block_on(async {
        let mut io = duplex(stream);
        let r = request(&mut io, &REQ, expect, Limits::default()).await;
        assert_eq!(io.output, frame(&REQ), "the request goes out first");
        r
    })
}

#[test]
fn an_object_round_trips_through_server_and_requester() {
    // 2.5 MiB: several read steps and hash steps.
    let object: Vec<u8> = (0..(5 << 19)).map(|i| (i * 7 + i / 3) as u8).collect();
    let wire = served(Answer::Data(Arc::new(object.clone())));
    assert_eq!(wire.len(), 4 + 9 + object.len());
    assert_eq!(fetch(wire.clone(), expect(&object)).unwrap(), object);
    // Any size up to max when none was announced (checkpoints).
    let any = Expect {
        size: None,
        ..expect(&object)
    };
    assert_eq!(fetch(wire, any).unwrap(), object);
    assert!(matches!(
        fetch(served(Answer::NotFound), expect(&object)),
        Err(NetError::NotFound)
    ));
    assert!(matches!(
        fetch(served(Answer::Refused), expect(&object)),
        Err(NetError::Refused)
    ));
}

#[test]
fn a_file_answer_serves_the_file_and_a_missing_file_is_not_found() {
    let dir = std::env::temp_dir().join(format!("synod-p2p-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 2.5 steps: read and sent one step at a time.
    let object: Vec<u8> = (0..(5 * STEP as u32 / 2))
        .map(|i| (i % 251) as u8)
        .collect();
    let path = dir.join("state");
    std::fs::write(&path, &object).unwrap();
    assert_eq!(
        fetch(served(Answer::File(path)), expect(&object)).unwrap(),
        object
    );
    assert!(matches!(
        fetch(served(Answer::File(dir.join("gone"))), expect(&object)),
        Err(NetError::NotFound)
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_truncation_of_a_transfer_is_an_error_never_a_short_object() {
    let object: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let wire = served(Answer::Data(Arc::new(object.clone())));
    for cut in 0..wire.len() {
        assert!(
            fetch(wire[..cut].to_vec(), expect(&object)).is_err(),
            "cut at {cut}"
        );
    }
}

#[test]
fn wrong_sizes_and_bytes_are_refused_before_or_after_the_body() {
    let object = vec![5u8; 1000];
    let wire = served(Answer::Data(Arc::new(object.clone())));
    // Over the caller's limit: refused from the header, nothing allocated for the body.
    let small = Expect {
        max: 999,
        ..expect(&object)
    };
    assert!(matches!(
        fetch(wire.clone(), small),
        Err(NetError::TooLarge(1000))
    ));
    // A size other than the signed announcement.
    let other = Expect {
        size: Some(1001),
        max: 1 << 20,
        ..expect(&object)
    };
    assert!(matches!(
        fetch(wire.clone(), other),
        Err(NetError::Request(_))
    ));
    // One flipped body byte.
    let mut flipped = wire.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert!(matches!(
        fetch(flipped, expect(&object)),
        Err(NetError::DigestMismatch)
    ));
    // A 4 GiB declared body that never comes: an error, not a 4 GiB allocation.
    let bomb = frame(&FetchHeader::Data {
        total: u64::from(u32::MAX),
    });
    let big = Expect {
        size: None,
        max: u64::MAX,
        digest: [0; 32],
    };
    assert!(matches!(fetch(bomb, big), Err(NetError::Request(_))));
    // Garbage and oversized headers.
    let mut huge = (MAX_HEADER_FRAME + 1).to_le_bytes().to_vec();
    huge.extend([0; 80]);
    assert!(matches!(
        fetch(huge, expect(&object)),
        Err(NetError::Request(_))
    ));
    assert!(matches!(
        fetch(frame(&[9u8, 9, 9]), expect(&object)),
        Err(NetError::Request(_))
    ));
}

#[test]
fn a_malformed_or_oversized_request_is_invalid_data_and_nothing_is_served() {
    rt().block_on(async {
        for bad in [
            frame(&[0xffu8; 8]),
            [
                (MAX_REQUEST_FRAME + 1).to_le_bytes().to_vec(),
                vec![0; 2000],
            ]
            .concat(),
            [frame(&REQ), vec![]].concat()[..10].to_vec(),
        ] {
            let mut io = duplex(bad);
            let e = respond(&mut io, Limits::default(), |_| {
                panic!("no lookup for a bad request")
            })
            .await
            .unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
                ),
                "{e}"
            );
            assert!(io.output.is_empty());
        }
    });
}

#[test]
fn a_peer_that_stalls_costs_the_stall_time_not_the_round() {
    // A stream that never yields a byte: the requester gives up after `stall`.
    let limits = Limits {
        stall: Duration::from_millis(50),
        min_rate: 1,
    };
    rt().block_on(async {
        let t = std::time::Instant::now();
        let r = request(&mut silent(), &REQ, expect(b"x"), limits).await;
        assert!(matches!(r, Err(NetError::Request(m)) if m.contains("stalled")));
        let e = respond(&mut silent(), limits, |_| Answer::NotFound)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t.elapsed() < Duration::from_secs(5));
    });
    assert_eq!(
        Limits::default().body_time(25_000_000),
        Duration::from_secs(110)
    );
    let huge = Limits {
        stall: Duration::MAX,
        min_rate: 1,
    };
    assert_eq!(
        huge.body_time(u64::MAX),
        Duration::MAX,
        "saturates, never panics"
    );
}

#[test]
fn a_slow_drip_is_cut_once_it_falls_behind_the_minimum_rate_not_after_the_body_time() {
    // A server that trickles one byte every 2 ms (500 B/s: never `stall`ed) of a 1 MB
    // body whose minimum rate is 10 kB/s: cut about `stall` after the header, not after
    // the body's `stall + total / min_rate` (100 s) as a whole-body deadline would.
    let limits = Limits {
        stall: Duration::from_millis(200),
        min_rate: 10_000,
    };
    let drip = |object: &[u8]| Mock {
        drip: Some(Duration::from_millis(2)),
        ..duplex(
            [
                frame(&FetchHeader::Data {
                    total: object.len() as u64,
                }),
                object.to_vec(),
            ]
            .concat(),
        )
    };
    let object = vec![7u8; 1_000_000];
    rt().block_on(async {
        let t = std::time::Instant::now();
        let r = request(&mut drip(&object), &REQ, expect(&object), limits).await;
        assert!(
            matches!(&r, Err(NetError::Request(m)) if m.contains("minimum rate")),
            "{:?}",
            r.map(|b| b.len())
        );
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    });
    // The same drip at 5× a minimum rate of 100 B/s stays ahead of the line: a body that
    // takes twice `stall` (200 bytes, 400 ms) arrives whole.
    let small = vec![9u8; 200];
    let slow = Limits {
        min_rate: 100,
        ..limits
    };
    rt().block_on(async {
        let r = request(&mut drip(&small), &REQ, expect(&small), slow).await;
        assert_eq!(r.unwrap(), small);
    });
}

#[test]
fn a_requester_that_stops_reading_frees_the_server_within_the_stall_time() {
    // It sends its request, then never reads: every write of the body stays pending. The
    // server gives up after `stall`, not after the body's whole `body_time`.
    let limits = Limits {
        stall: Duration::from_millis(50),
        min_rate: 1,
    };
    rt().block_on(async {
        let t = std::time::Instant::now();
        // The header frame (13 bytes) goes out; the body's 1 MiB steps never do.
        let mut io = Mock {
            max_write: 63,
            ..duplex(frame(&REQ))
        };
        let e = respond(&mut io, limits, |_| {
            Answer::Data(Arc::new(vec![1; 3 << 20]))
        })
        .await
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        // body_time would be 3 MiB / (1 B/s): weeks.
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    });
}
