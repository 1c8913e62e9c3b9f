//! Round-trip properties and hostile-input behaviour of the pseudo-gradient codec.

mod common;

use proptest::prelude::*;
use synod_codec::{
    decode, encode, rel_l2_error, DecodeError, DecodeLimits, EncodeOptions, Mode, TensorRef,
};

fn limits() -> DecodeLimits {
    DecodeLimits::for_model(1 << 22, 64)
}

fn tensors_strategy() -> impl Strategy<Value = Vec<(Vec<usize>, Vec<f32>)>> {
    prop::collection::vec(
        prop::collection::vec(1usize..40, 0..3).prop_flat_map(|shape| {
            let n: usize = shape.iter().product();
            (Just(shape), prop::collection::vec(-1000f32..1000f32, n))
        }),
        1..6,
    )
}

fn refs(t: &[(Vec<usize>, Vec<f32>)]) -> Vec<TensorRef<'_>> {
    t.iter()
        .map(|(s, d)| TensorRef { shape: s, data: d })
        .collect()
}

proptest! {
    #[test]
    fn int8_roundtrip_error_is_within_half_a_step(t in tensors_strategy(), chunk in 1u32..64, blocks in 1u32..5) {
        let opts = EncodeOptions { mode: Mode::Int8Absmax, chunk_size: chunk, topk: 0, block_elems: chunk * blocks, zstd_level: 1 };
        let bytes = encode(&refs(&t), &opts).unwrap();
        let d = decode(&bytes, &limits()).unwrap();
        prop_assert_eq!(d.header.shapes.len(), t.len());
        for (((shape, x), y), got_shape) in t.iter().zip(&d.tensors).zip(&d.header.shapes) {
            prop_assert_eq!(got_shape, shape);
            prop_assert_eq!(x.len(), y.len());
            for (cx, cy) in x.chunks(chunk as usize).zip(y.chunks(chunk as usize)) {
                let step = cx.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                for (a, b) in cx.iter().zip(cy) {
                    // Half a step, plus f32 rounding of the dequantised value (a few ulps of |a|).
                    let slack = step * 1e-5 + a.abs() * 4.0 * f32::EPSILON + 1e-30;
                    prop_assert!((a - b).abs() <= step * 0.5 + slack, "{a} vs {b}, step {step}");
                }
            }
        }
    }

    #[test]
    fn fp32_roundtrip_is_exact(t in tensors_strategy()) {
        let bytes = encode(&refs(&t), &EncodeOptions::fp32()).unwrap();
        let d = decode(&bytes, &limits()).unwrap();
        for ((_, x), y) in t.iter().zip(&d.tensors) {
            prop_assert_eq!(x, y);
        }
    }

    #[test]
    fn encoding_is_deterministic(t in tensors_strategy()) {
        let a = encode(&refs(&t), &EncodeOptions::default()).unwrap();
        let b = encode(&refs(&t), &EncodeOptions::default()).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        prop_assert!(decode(&bytes, &limits()).is_err());
    }

    #[test]
    fn any_single_bit_flip_is_rejected(t in tensors_strategy(), pos in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut bytes = encode(&refs(&t), &EncodeOptions::default()).unwrap();
        let i = pos.index(bytes.len());
        bytes[i] ^= 1 << bit;
        prop_assert!(decode(&bytes, &limits()).is_err());
    }
}

#[test]
fn gaussian_error_is_below_one_and_a_half_percent() {
    // Box–Muller on a fixed LCG: a reproducible Gaussian vector.
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut uni = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let x: Vec<f32> = (0..100_000)
        .map(|_| ((-2.0 * uni().ln()).sqrt() * (std::f64::consts::TAU * uni()).cos()) as f32)
        .collect();
    let shape = [x.len()];
    let bytes = encode(
        &[TensorRef {
            shape: &shape,
            data: &x,
        }],
        &EncodeOptions::default(),
    )
    .unwrap();
    let y = decode(&bytes, &limits()).unwrap().tensors.remove(0);
    let err = rel_l2_error(&x, &y);
    assert!(err < 0.015 && err > 0.0, "rel L2 error {err}");
    assert!(
        bytes.len() < x.len() * 4 / 4 + x.len() / 50,
        "int8 payload {} bytes",
        bytes.len()
    );
}

#[test]
fn every_truncation_is_a_typed_error() {
    let x: Vec<f32> = (0..3000).map(|i| (i as f32).sin()).collect();
    let shape = [30, 100];
    let bytes = encode(
        &[TensorRef {
            shape: &shape,
            data: &x,
        }],
        &EncodeOptions::default(),
    )
    .unwrap();
    common::assert_only_the_whole_payload_decodes(&bytes, &limits());
}

#[test]
fn non_finite_and_misshaped_input_is_refused() {
    let shape = [3];
    let bad = [1.0, f32::NAN, 2.0];
    assert!(matches!(
        encode(
            &[TensorRef {
                shape: &shape,
                data: &bad
            }],
            &EncodeOptions::default()
        ),
        Err(synod_codec::EncodeError::NonFinite { index: 0 })
    ));
    let short = [1.0, 2.0];
    assert!(matches!(
        encode(
            &[TensorRef {
                shape: &shape,
                data: &short
            }],
            &EncodeOptions::default()
        ),
        Err(synod_codec::EncodeError::ShapeMismatch {
            index: 0,
            expected: 3,
            actual: 2
        })
    ));
}

/// Builds an int8 payload by hand (valid magic and checksum) around the given shapes and frames.
fn forge(shapes: &[&[u64]], frames: &[Vec<u8>]) -> Vec<u8> {
    common::Forged::INT8.bytes(shapes, frames)
}

#[test]
fn decompression_bomb_is_cut_at_the_block_size() {
    // Declares 1024 elements (expects 4 + 1024 bytes) but the frame inflates to 64 MiB.
    let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
    assert!(bomb.len() < 64 << 10);
    let bytes = forge(&[&[1024]], &[bomb]);
    assert!(matches!(
        decode(&bytes, &limits()),
        Err(DecodeError::BadBlock { block: 0, .. })
    ));
}

#[test]
fn declared_sizes_over_the_limits_are_rejected_before_allocation() {
    let bytes = forge(&[&[1 << 20, 1 << 20]], &[]);
    assert!(matches!(
        decode(&bytes, &limits()),
        Err(DecodeError::LimitExceeded {
            what: "tensor elements",
            ..
        })
    ));
    let overflow = forge(&[&[u64::MAX, 2]], &[]);
    assert!(decode(&overflow, &limits()).is_err());
    let many: Vec<&[u64]> = vec![&[1]; 65];
    assert!(matches!(
        decode(&forge(&many, &[]), &limits()),
        Err(DecodeError::LimitExceeded {
            what: "n_tensors",
            ..
        })
    ));
}

#[test]
fn tiny_blocks_cannot_grow_the_frame_list_past_the_output() {
    // int8, chunk 1, one element per frame: a 4-byte empty frame prefix per element would
    // cost the decoder ≈ 90 bytes of frame list per element before anything is inflated.
    let out = common::Forged {
        mode: 1,
        chunk: 1,
        block: 1,
        topk: 0,
    }
    .bytes(&[&[1 << 20]], &vec![Vec::new(); 1024]);
    assert!(matches!(
        decode(&out, &limits()),
        Err(DecodeError::LimitExceeded { what: "frames", .. })
    ));
}

#[test]
fn int8_codes_at_the_scale_limit_cannot_decode_to_infinity() {
    // 127 · fl(f32::MAX / 127) rounds to +∞; a forged code −128 overflows sooner.
    for (scale, code) in [(f32::MAX / 127.0, 127u8), (f32::MAX / 127.5, 0x80)] {
        let mut raw = scale.to_le_bytes().to_vec();
        raw.extend_from_slice(&[code; 4]);
        let frame = zstd::bulk::compress(&raw, 1).unwrap();
        assert!(
            matches!(
                decode(&forge(&[&[4]], &[frame]), &limits()),
                Err(DecodeError::BadScale { block: 0 })
            ),
            "{scale} × {code}"
        );
    }
    // The largest accepted scale with the most negative code is still finite.
    let mut raw = (f32::MAX / 128.0).to_le_bytes().to_vec();
    raw.extend_from_slice(&[0x80; 4]);
    let frame = zstd::bulk::compress(&raw, 1).unwrap();
    let d = decode(&forge(&[&[4]], &[frame]), &limits()).unwrap();
    assert!(d.tensors[0].iter().all(|v| v.is_finite()));
}

#[test]
fn nan_negative_and_overflowing_scales_are_rejected() {
    for scale in [f32::NAN, -1.0, f32::INFINITY, f32::MAX / 100.0] {
        let mut raw = scale.to_le_bytes().to_vec();
        raw.extend_from_slice(&[127u8; 4]);
        let frame = zstd::bulk::compress(&raw, 1).unwrap();
        assert!(
            matches!(
                decode(&forge(&[&[4]], &[frame]), &limits()),
                Err(DecodeError::BadScale { block: 0 })
            ),
            "{scale}"
        );
    }
}
