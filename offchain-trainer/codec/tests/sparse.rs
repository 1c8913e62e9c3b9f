//! The sparse top-k mode: what it keeps, how small it is, and hostile input.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

mod common;

use proptest::prelude::*;
use synod_codec::{decode, encode, DecodeError, DecodeLimits, EncodeOptions, Mode, TensorRef};

fn limits() -> DecodeLimits {
    DecodeLimits::for_model(1 << 22, 64)
}

fn one(shape: &[usize], x: &[f32], opts: &EncodeOptions) -> Vec<u8> {
    encode(&[TensorRef { shape, data: x }], opts).unwrap()
}

/// Indices of the `k` largest |x| (ties: lower index), ascending: the reference selection.
fn reference_top_k(x: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|a, b| x[*b].abs().total_cmp(&x[*a].abs()).then(a.cmp(b)));
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

fn gaussian(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    let mut uni = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| ((-2.0 * uni().ln()).sqrt() * (std::f64::consts::TAU * uni()).cos()) as f32)
        .collect()
}

proptest! {
    #[test]
    fn keeps_exactly_the_top_k_of_every_chunk_within_half_a_step(
        x in prop::collection::vec(-1000f32..1000f32, 1..700),
        chunk in 1u32..80,
        k in 1u32..80,
        blocks in 1u32..4,
    ) {
        let k = k.min(chunk);
        let opts = EncodeOptions {
            block_elems: chunk * blocks,
            ..EncodeOptions::sparse(chunk, k)
        };
        let y = decode(&one(&[x.len()], &x, &opts), &limits()).unwrap().tensors.remove(0);
        prop_assert_eq!(y.len(), x.len());
        for (cx, cy) in x.chunks(chunk as usize).zip(y.chunks(chunk as usize)) {
            let sel = reference_top_k(cx, k as usize);
            let step = sel.iter().fold(0f32, |m, i| m.max(cx[*i].abs())) / 7.0;
            for (i, (a, b)) in cx.iter().zip(cy).enumerate() {
                if sel.binary_search(&i).is_ok() {
                    prop_assert!((a - b).abs() <= step * 0.5 * (1.0 + 1e-5) + 1e-30, "{a} vs {b}, step {step}");
                } else {
                    prop_assert_eq!(*b, 0.0);
                }
            }
        }
    }

    #[test]
    fn sparse_encoding_is_deterministic_across_thread_counts(x in prop::collection::vec(-1f32..1f32, 1..3000)) {
        let opts = EncodeOptions { block_elems: 256, ..EncodeOptions::sparse(64, 5) };
        let a = one(&[x.len()], &x, &opts);
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let b = one_thread.install(|| one(&[x.len()], &x, &opts));
        prop_assert_eq!(a, b);
    }

    #[test]
    fn any_single_bit_flip_of_a_sparse_payload_is_rejected(
        x in prop::collection::vec(-1f32..1f32, 1..500),
        pos in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let mut bytes = one(&[x.len()], &x, &EncodeOptions::sparse(32, 4));
        let i = pos.index(bytes.len());
        bytes[i] ^= 1 << bit;
        prop_assert!(decode(&bytes, &limits()).is_err());
    }

    #[test]
    fn hostile_sparse_blocks_with_a_valid_checksum_never_panic(
        raw in prop::collection::vec(any::<u8>(), 0..200),
        n in 1u64..300,
    ) {
        // Whatever a block holds (indices out of order or out of range, code 0, NaN scales,
        // wrong lengths), decoding ends in Ok or a typed error.
        let frame = zstd::bulk::compress(&raw, 1).unwrap();
        let _ = decode(&forge_sparse(16, 3, &[n], &[frame]), &limits());
    }
}

/// A payload with a valid checksum around a sparse header (blocks of 64 chunks), rank-1
/// tensors of `shapes` elements and the given frames.
fn forge_sparse(chunk: u32, topk: u32, shapes: &[u64], frames: &[Vec<u8>]) -> Vec<u8> {
    let shapes: Vec<[u64; 1]> = shapes.iter().map(|n| [*n]).collect();
    let refs: Vec<&[u64]> = shapes.iter().map(|s| s.as_slice()).collect();
    common::Forged {
        mode: 3,
        chunk,
        block: chunk * 64,
        topk,
    }
    .bytes(&refs, frames)
}

#[test]
fn rice_coded_positions_put_top_64_of_4096_over_150_times_below_fp32() {
    // Fixed-width 12-bit indices gave 127× here; Rice-coded gaps (≈ 7.5 bits), ≈ 178×.
    let x = gaussian(1 << 20, 7);
    let bytes = one(&[1024, 1024], &x, &EncodeOptions::sparse(4096, 64));
    let ratio = (x.len() * 4) as f64 / bytes.len() as f64;
    assert!(ratio >= 150.0, "bytes ratio vs fp32 {ratio}");
    let d = decode(&bytes, &limits()).unwrap();
    assert_eq!(d.header.mode, Mode::SparseTopK);
    assert_eq!(d.header.topk, 64);
    let kept = d.tensors[0].iter().filter(|v| **v != 0.0).count();
    assert_eq!(kept, 256 * 64);
    // Top-128 (the loss's match for int8): at least the 100×.
    let bytes = one(&[1024, 1024], &x, &EncodeOptions::sparse(4096, 128));
    let ratio = (x.len() * 4) as f64 / bytes.len() as f64;
    assert!(ratio >= 100.0, "top-128 bytes ratio vs fp32 {ratio}");
}

#[test]
fn every_truncation_of_a_sparse_payload_is_a_typed_error() {
    let x: Vec<f32> = (0..3000).map(|i| (i as f32).sin()).collect();
    let bytes = one(&[30, 100], &x, &EncodeOptions::sparse(128, 9));
    assert!(decode(&bytes, &limits()).is_ok());
    common::assert_only_the_whole_payload_decodes(&bytes, &limits());
}

#[test]
fn a_sparse_decompression_bomb_is_cut_at_the_block_size() {
    // 64 elements, top-3 of 16: 4 chunks of at most 4 + 2 + 2 bytes; the frame inflates to
    // 64 MiB.
    let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
    assert!(matches!(
        decode(&forge_sparse(16, 3, &[64], &[bomb]), &limits()),
        Err(DecodeError::BadBlock { block: 0, .. })
    ));
}

#[test]
fn forged_sparse_blocks_are_typed_errors() {
    // One chunk of 16, top-3 (Rice parameter 2): scale, 3 nibbles (2 bytes), then the gaps.
    let block = |scale: f32, codes: [u8; 2], gaps: &[u8]| {
        let mut raw = scale.to_le_bytes().to_vec();
        raw.extend_from_slice(&codes);
        raw.extend_from_slice(gaps);
        forge_sparse(16, 3, &[16], &[zstd::bulk::compress(&raw, 1).unwrap()])
    };
    let bad_block = |bytes: Vec<u8>| {
        matches!(
            decode(&bytes, &limits()),
            Err(DecodeError::BadBlock { block: 0, .. })
        )
    };
    // Codes +1, +2, +3 at positions 1, 2, 3: gaps 1, 0, 0 = "0 10", "0 00", "0 00" (9 bits).
    let good = block(0.5, [0xa9, 0x0b], &[0x02, 0x00]);
    let y = decode(&good, &limits()).unwrap().tensors.remove(0);
    assert_eq!(&y[..4], &[0.0, 0.5, 1.0, 1.5]);
    // Gap 15 (quotient 3: "1110", low bits "11") then gap 0: position 16 of a 16-chunk.
    assert!(bad_block(block(0.5, [0xa9, 0x0b], &[0x37, 0x00])));
    // Unary ones to the end of the block: cut at the chunk, never read past the buffer.
    assert!(bad_block(block(0.5, [0xa9, 0x0b], &[0xff; 6])));
    // Cut short (8 of 9 bits); a byte after the last chunk.
    assert!(bad_block(block(0.5, [0xa9, 0x0b], &[0x02])));
    assert!(bad_block(block(0.5, [0xa9, 0x0b], &[0x02, 0x00, 0x00])));
    // Padding bits set after the gaps or after the odd nibble: one encoding per value.
    assert!(bad_block(block(0.5, [0xa9, 0x0b], &[0x02, 0x80])));
    assert!(bad_block(block(0.5, [0xa9, 0x1b], &[0x02, 0x00])));
    // A code nibble of 0.
    assert!(bad_block(block(0.5, [0xa0, 0x0b], &[0x02, 0x00])));
    for scale in [f32::NAN, -1.0, f32::INFINITY, f32::MAX / 2.0] {
        assert!(
            matches!(
                decode(&block(scale, [0xa9, 0x0b], &[0x02, 0x00]), &limits()),
                Err(DecodeError::BadScale { block: 0 })
            ),
            "{scale}"
        );
    }
}

#[test]
fn the_retired_fixed_width_sparse_mode_is_refused() {
    // Mode byte 2 (fixed-width indices, stops 31–34) under a valid checksum.
    let old = common::Forged {
        mode: 2,
        chunk: 16,
        block: 16 * 64,
        topk: 3,
    };
    assert_eq!(
        decode(&old.bytes(&[&[64]], &[]), &limits()).err(),
        Some(DecodeError::UnknownField {
            field: "mode",
            value: 2
        })
    );
}

#[test]
fn inconsistent_sparse_headers_are_rejected() {
    for (chunk, topk) in [(16, 0), (16, 17), (0, 1)] {
        assert!(
            matches!(
                decode(&forge_sparse(chunk, topk, &[16], &[]), &limits()),
                Err(DecodeError::Inconsistent(_))
            ),
            "chunk {chunk}, topk {topk}"
        );
        assert!(matches!(
            encode(
                &[TensorRef {
                    shape: &[4],
                    data: &[1.0; 4]
                }],
                &EncodeOptions::sparse(chunk, topk)
            ),
            Err(synod_codec::EncodeError::InvalidOptions(_))
        ));
    }
    assert!(matches!(
        encode(
            &[TensorRef {
                shape: &[2],
                data: &[1.0, f32::INFINITY]
            }],
            &EncodeOptions::sparse(4, 1)
        ),
        Err(synod_codec::EncodeError::NonFinite { index: 0 })
    ));
}
