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
        mode: 2,
        chunk,
        block: chunk * 64,
        topk,
    }
    .bytes(&refs, frames)
}

#[test]
fn top_64_of_4096_is_over_100_times_smaller_than_fp32() {
    let x = gaussian(1 << 20, 7);
    let bytes = one(&[1024, 1024], &x, &EncodeOptions::sparse(4096, 64));
    let ratio = (x.len() * 4) as f64 / bytes.len() as f64;
    assert!(ratio >= 100.0, "bytes ratio vs fp32 {ratio}");
    let d = decode(&bytes, &limits()).unwrap();
    assert_eq!(d.header.mode, Mode::SparseTopK);
    assert_eq!(d.header.topk, 64);
    let kept = d.tensors[0].iter().filter(|v| **v != 0.0).count();
    assert_eq!(kept, 256 * 64);
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
    // 64 elements, top-3 of 16: 4 chunks of 4 + 2 + 2 bytes = 32; the frame inflates to 64 MiB.
    let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
    assert!(matches!(
        decode(&forge_sparse(16, 3, &[64], &[bomb]), &limits()),
        Err(DecodeError::BadBlock { block: 0, .. })
    ));
}

#[test]
fn forged_sparse_blocks_are_typed_errors() {
    // One chunk of 16, top-3: scale, 3 × 4-bit indices (2 bytes), 3 nibbles (2 bytes).
    let block = |scale: f32, idx: [u8; 2], codes: [u8; 2]| {
        let mut raw = scale.to_le_bytes().to_vec();
        raw.extend_from_slice(&idx);
        raw.extend_from_slice(&codes);
        forge_sparse(16, 3, &[16], &[zstd::bulk::compress(&raw, 1).unwrap()])
    };
    // Indices 1, 2, 3 and codes +1, +2, +3: valid.
    let good = block(0.5, [0x21, 0x03], [0xa9, 0x0b]);
    let y = decode(&good, &limits()).unwrap().tensors.remove(0);
    assert_eq!(&y[..4], &[0.0, 0.5, 1.0, 1.5]);
    // Indices 2, 1, 3: not ascending. Indices 1, 1, 3: repeated.
    for idx in [[0x12, 0x03], [0x11, 0x03]] {
        assert!(matches!(
            decode(&block(0.5, idx, [0xa9, 0x0b]), &limits()),
            Err(DecodeError::BadBlock { block: 0, .. })
        ));
    }
    // A code nibble of 0.
    assert!(matches!(
        decode(&block(0.5, [0x21, 0x03], [0xa0, 0x0b]), &limits()),
        Err(DecodeError::BadBlock { block: 0, .. })
    ));
    for scale in [f32::NAN, -1.0, f32::INFINITY, f32::MAX / 2.0] {
        assert!(
            matches!(
                decode(&block(scale, [0x21, 0x03], [0xa9, 0x0b]), &limits()),
                Err(DecodeError::BadScale { block: 0 })
            ),
            "{scale}"
        );
    }
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
