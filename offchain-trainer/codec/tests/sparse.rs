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
            let hi = sel.iter().fold(0f32, |m, i| m.max(cx[*i].abs()));
            let lo = sel.iter().fold(f32::INFINITY, |m, i| m.min(cx[*i].abs()));
            // Half a step of the kept range, plus what rounding lo and step toward zero to
            // bfloat16 (< 2⁻⁷ relative) takes off the top level.
            let tolerance = (hi - lo) / 6.0 + hi / 64.0;
            for (i, (a, b)) in cx.iter().zip(cy).enumerate() {
                if sel.binary_search(&i).is_ok() {
                    prop_assert!((a - b).abs() <= tolerance, "{a} vs {b}, kept range {lo}..{hi}");
                    prop_assert!(*a == 0.0 || a.is_sign_negative() == b.is_sign_negative(), "sign of {a}: {b}");
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
        // Whatever a block holds (positions out of range, runs of ones, NaN or overflowing
        // lo and step, wrong lengths), decoding ends in Ok or a typed error.
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
        mode: 4,
        chunk,
        block: chunk * 64,
        topk,
    }
    .bytes(&refs, frames)
}

#[test]
fn four_level_values_and_golomb_gaps_put_top_128_of_4096_over_108_times_below_fp32() {
    // Top-128 (the loss's match for int8): 4-bit codes with Rice-coded gaps (mode 3) gave
    // 101× here, 4-level values with Golomb-coded gaps and a bfloat16 head ≈ 109.7×; top-64
    // 178× and ≈ 191.6×.
    let x = gaussian(1 << 20, 7);
    let ratio = |k: u32| {
        let bytes = one(&[1024, 1024], &x, &EncodeOptions::sparse(4096, k));
        let d = decode(&bytes, &limits()).unwrap();
        assert_eq!(d.header.mode, Mode::SparseTopK);
        assert_eq!(d.header.topk, k);
        let kept = d.tensors[0].iter().filter(|v| **v != 0.0).count();
        assert_eq!(kept, 256 * k as usize);
        (x.len() * 4) as f64 / bytes.len() as f64
    };
    let (top128, top64) = (ratio(128), ratio(64));
    assert!(top128 >= 108.0, "top-128 bytes ratio vs fp32 {top128}");
    assert!(top64 >= 188.0, "top-64 bytes ratio vs fp32 {top64}");
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
    // 64 elements, top-3 of 16: 4 chunks of at most 4 + 3 bytes; the frame inflates to
    // 64 MiB.
    let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
    assert!(matches!(
        decode(&forge_sparse(16, 3, &[64], &[bomb]), &limits()),
        Err(DecodeError::BadBlock { block: 0, .. })
    ));
}

/// Packs a string of '0'/'1' (spaces ignored) into bytes, LSB first, padded with 0.
fn bits(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, c) in s.chars().filter(|c| !c.is_whitespace()).enumerate() {
        if n % 8 == 0 {
            out.push(0);
        }
        if c == '1' {
            *out.last_mut().unwrap() |= 1 << (n % 8);
        }
    }
    out
}

#[test]
fn forged_sparse_blocks_are_typed_errors() {
    // One chunk of 16, top-3 (Golomb divisor 4): lo, step, then per entry the gap (unary
    // quotient, 2 remainder bits, most significant first), the sign and the unary level.
    // lo and step as bfloat16: the high half of the f32 bits.
    let bf16 = |x: f32| ((x.to_bits() >> 16) as u16).to_le_bytes();
    let block = |lo: f32, step: f32, stream: &[u8]| {
        let mut raw = bf16(lo).to_vec();
        raw.extend_from_slice(&bf16(step));
        raw.extend_from_slice(stream);
        forge_sparse(16, 3, &[16], &[zstd::bulk::compress(&raw, 1).unwrap()])
    };
    let bad_block = |bytes: Vec<u8>| {
        matches!(
            decode(&bytes, &limits()),
            Err(DecodeError::BadBlock { block: 0, .. })
        )
    };
    // Positions 1, 2, 3 (gaps 1, 0, 0) with +level 0, +level 1, −level 2: 18 bits.
    let good = bits("0 01 0 0  0 00 0 10  0 00 1 110");
    let y = decode(&block(0.5, 0.5, &good), &limits())
        .unwrap()
        .tensors
        .remove(0);
    assert_eq!(&y[..4], &[0.0, 0.5, 1.0, -1.5]);
    // Gap 15 (quotient 3, remainder 3) then gap 0: position 16 of a 16-chunk.
    let past = bits("1110 11 0 0  0 00 0 0  0 00 0 0");
    assert!(bad_block(block(0.5, 0.5, &past)));
    // Unary ones to the end of the block: cut at the chunk, never read past the buffer.
    assert!(bad_block(block(0.5, 0.5, &[0xff; 6])));
    // Cut short (16 of 18 bits); a byte after the last chunk; a padding bit set.
    assert!(bad_block(block(0.5, 0.5, &good[..2])));
    assert!(bad_block(block(0.5, 0.5, &[&good[..], &[0]].concat())));
    let mut padded = good.clone();
    padded[2] |= 0x80;
    assert!(bad_block(block(0.5, 0.5, &padded)));
    for (lo, step) in [
        (f32::NAN, 0.5),
        (0.5, f32::NAN),
        (-1.0, 0.5),
        (0.5, -1.0),
        (f32::INFINITY, 0.5),
        (0.5, f32::MAX / 2.0),
    ] {
        assert!(
            matches!(
                decode(&block(lo, step, &good), &limits()),
                Err(DecodeError::BadScale { block: 0 })
            ),
            "{lo} {step}"
        );
    }
}

#[test]
fn a_chunk_head_whose_top_level_overflows_cannot_put_infinity_in_the_aggregate() {
    // lo 0.5, step f32::MAX / 2 (bfloat16 0x7eff): level 3 would decode to +∞, which no
    // norm clip bounds. One kept value at position 0, level 3.
    let mut raw = ((0.5f32.to_bits() >> 16) as u16).to_le_bytes().to_vec();
    raw.extend_from_slice(&(((f32::MAX / 2.0).to_bits() >> 16) as u16).to_le_bytes());
    raw.extend_from_slice(&bits("0 00 0 111  0 00 0 0  0 00 0 0"));
    let bytes = forge_sparse(16, 3, &[16], &[zstd::bulk::compress(&raw, 1).unwrap()]);
    assert_eq!(
        decode(&bytes, &limits()).err(),
        Some(DecodeError::BadScale { block: 0 })
    );
}

#[test]
fn the_retired_4_bit_sparse_modes_are_refused() {
    // Mode bytes 2 (fixed-width indices) and 3 (Rice-coded gaps), both older formats with
    // 4-bit codes, under a valid checksum: an old member's payload is refused, not misread.
    for mode in [2, 3] {
        let old = common::Forged {
            mode,
            chunk: 16,
            block: 16 * 64,
            topk: 3,
        };
        assert_eq!(
            decode(&old.bytes(&[&[64]], &[]), &limits()).err(),
            Some(DecodeError::UnknownField {
                field: "mode",
                value: mode.into()
            })
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

/// The bound a receiver refuses payloads by ([`synod_codec::max_encoded_len`]) holds on each
/// mode's worst input — partial chunks and blocks, the kept elements last in every chunk
/// (the longest gaps), every level and sign — and a sparse pool's bound is a small fraction of
/// a dense one's.
#[test]
fn max_encoded_len_bounds_every_mode_on_its_worst_input() {
    let shapes: [&[usize]; 3] = [&[3, 1000], &[4097], &[7]];
    let data: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(t, s)| gaussian(s.iter().product(), t as u64 + 1))
        .collect();
    let refs: Vec<TensorRef<'_>> = shapes
        .iter()
        .zip(&data)
        .map(|(shape, data)| TensorRef { shape, data })
        .collect();
    let small_blocks = |mut o: EncodeOptions| {
        o.block_elems = o.chunk_size.max(1) * 2;
        o
    };
    let fp32 = EncodeOptions {
        block_elems: 1024,
        ..EncodeOptions::fp32()
    };
    for opts in [
        EncodeOptions::default(),
        small_blocks(EncodeOptions::default()),
        fp32,
        EncodeOptions::sparse(256, 8),
        small_blocks(EncodeOptions::sparse(256, 8)),
        EncodeOptions::sparse(64, 64),
    ] {
        let len = encode(&refs, &opts).unwrap().len() as u64;
        let bound = synod_codec::max_encoded_len(&shapes, &opts);
        assert!(len <= bound, "{opts:?}: {len} > {bound}");
    }
    // Sparse at its worst: the k largest last in each chunk, levels and signs alternating.
    let (chunk, k) = (256usize, 8usize);
    for shape in [&[4096usize][..], &[4100]] {
        let n: usize = shape.iter().product();
        let x: Vec<f32> = (0..n)
            .map(|i| {
                let j = i % chunk;
                let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                if j >= chunk - k {
                    sign * (10.0 + (j % 4) as f32)
                } else {
                    sign * 1e-3 * (j % 7) as f32
                }
            })
            .collect();
        let opts = EncodeOptions::sparse(chunk as u32, k as u32);
        let len = one(shape, &x, &opts).len() as u64;
        let bound = synod_codec::max_encoded_len(&[shape], &opts);
        assert!(len <= bound, "{len} > {bound}");
    }
    // A model of 1 Mi parameters: the default sparse recipe's bound against int8's.
    let model: [&[usize]; 1] = [&[1 << 20]];
    let sparse = synod_codec::max_encoded_len(&model, &EncodeOptions::sparse(4096, 64));
    let int8 = synod_codec::max_encoded_len(&model, &EncodeOptions::default());
    assert!(sparse * 20 < int8, "sparse {sparse} vs int8 {int8}");
}
