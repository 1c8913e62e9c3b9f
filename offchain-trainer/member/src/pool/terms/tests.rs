//! Tests of a pool's terms: the costs a member must meet, and the honest-noise probe.

use super::*;
use synod_diloco::budget::CREATOR_MARGIN;

fn costs(step_secs: f64) -> Costs {
    Costs {
        step_secs,
        block_secs: 2.0,
        bytes_per_sec: 12.5e6,
        inner_steps: 400,
        trace_segments: 16,
        verify_segments: 2,
        members: 4,
        rate: None,
        state_bytes: 0,
        residual_bytes: 0,
        payload_bytes: 0,
        min_round_length: 0,
    }
}

#[test]
fn lazy_work_that_outlives_the_window_is_refused() {
    // H = 400 on the baby model, ≈ 50 ms per inner step on the 2-core machine, 4 members,
    // a window of 5 blocks.
    let c = costs(0.05);
    // 3 contributions × (2 segments × 25 steps + the whole phase of 400).
    assert!((c.verify_secs(1.0) - 1350.0 * 0.05).abs() < 1e-9);
    let refused = c.check(5, 300, CREATOR_MARGIN, CREATE_HINT).unwrap_err();
    assert!(
        matches!(refused, TermsError::WindowTooShort { min, .. } if min == c.min_window(CREATOR_MARGIN)),
        "{refused}"
    );
    // 202.5 s: 102 blocks after the 3 of lag.
    assert!(refused.to_string().contains("window ≥ 53"), "{refused}");
    c.check(
        c.min_window(CREATOR_MARGIN),
        300,
        CREATOR_MARGIN,
        CREATE_HINT,
    )
    .unwrap();
    // A member without the margin meets a window the creator's margin would refuse.
    c.check(c.min_window(MEMBER_MARGIN), 300, MEMBER_MARGIN, JOIN_HINT)
        .unwrap();
    assert!(c.min_window(MEMBER_MARGIN) < c.min_window(CREATOR_MARGIN));
}

#[test]
fn a_round_timeout_shorter_than_phase_duties_and_exchange_is_refused() {
    let c = Costs {
        payload_bytes: 25_000_000,
        ..costs(0.05)
    };
    // 20 s phase + 67.5 s duties + 3 × 2 s exchange = 93.5 s → 47 blocks + 3.
    assert_eq!(c.min_timeout(1.0), 50);
    let w = c.min_window(1.0);
    assert!(matches!(
        c.check(w, 49, 1.0, JOIN_HINT),
        Err(TermsError::TimeoutTooShort { min: 50, .. })
    ));
    c.check(w, 50, 1.0, JOIN_HINT).unwrap();
}

/// A creator's best play against its members: a short-enough inner phase, then a minimum
/// round length that leaves too little of the timeout to exchange and commit in.
#[test]
fn a_round_length_that_leaves_no_time_to_commit_is_refused() {
    let c = Costs {
        payload_bytes: 25_000_000,
        ..costs(0.05)
    };
    let w = c.min_window(1.0);
    c.check(w, 50, 1.0, JOIN_HINT).unwrap();
    // Commits only from block 48 of 50: the 3 blocks of inclusion no longer fit.
    let squeezed = c.with_min_round_length(48);
    assert_eq!(squeezed.min_timeout(1.0), 51);
    assert!(matches!(
        squeezed.check(w, 50, 1.0, JOIN_HINT),
        Err(TermsError::TimeoutTooShort {
            min: 51,
            min_round_length: 48,
            ..
        })
    ));
    // A length shorter than the member's own round changes nothing.
    assert_eq!(c.with_min_round_length(20).min_timeout(1.0), 50);
}

#[test]
fn a_stated_rate_lowers_the_checks_and_fetched_states_count() {
    let all = Costs {
        state_bytes: 12_500_000,
        members: 11,
        ..costs(0.01)
    };
    let low = Costs {
        rate: Some(0.2),
        ..all
    };
    // 10 contributions (the worst case) × 5 states of 1 s each, against 2 + 3·1.26 → 6.
    assert!((all.verify_secs(1.0) - 10.0 * 450.0 * 0.01 - 50.0).abs() < 1e-9);
    assert!((low.verify_secs(1.0) - 6.0 * 450.0 * 0.01 - 30.0).abs() < 1e-9);
}

#[test]
fn noise_past_half_the_tolerance_is_refused() {
    let n = |distance| Noise {
        distance,
        segment_distance: 8.2e-5,
        runs: (cpu(2), cpu(1)),
        round: 3,
    };
    check_noise(&n(1e-4)).unwrap();
    check_noise(&n(REPLAY_TOLERANCE / 2.0)).unwrap();
    // The small model at H = 100 measured 2.0·10⁻² between 16 and 4 CPU threads.
    assert!(matches!(
        check_noise(&n(0.02)),
        Err(TermsError::NoisyRecipe { .. })
    ));
    assert!(check_noise(&n(f64::NAN)).is_err());
    // Honest segments drifting past half the segment tolerance: refused too.
    let segments = |segment_distance| Noise {
        segment_distance,
        ..n(1e-4)
    };
    check_noise(&segments(SEGMENT_TOLERANCE / 2.0)).unwrap();
    assert!(matches!(
        check_noise(&segments(0.006)),
        Err(TermsError::NoisySegments { .. })
    ));
    assert!(check_noise(&segments(f64::NAN)).is_err());
}

/// A run on the CPU with `threads` threads.
fn cpu(threads: i32) -> Run {
    Run {
        device: tch::Device::Cpu,
        threads,
    }
}

#[test]
fn a_member_on_a_device_that_drifts_from_the_reference_refuses_to_join() {
    let gpu = tch::Device::Cuda(0);
    let noise = |distance, segment_distance| Noise {
        distance,
        segment_distance,
        runs: (
            Run {
                device: gpu,
                threads: 1,
            },
            cpu(2),
        ),
        round: 3,
    };
    // A GPU whose honest phase lands 6·10⁻³ from the CPU's (past half of 10⁻²): a CPU
    // verifier of its contributions would sit at the tolerance's edge, so it does not join.
    let err = device_check(gpu, false, || Ok(noise(6e-3, 1e-5))).unwrap_err();
    let err = err.downcast::<TermsError>().unwrap();
    assert!(
        matches!(&err, TermsError::DeviceDrift { device, reason }
            if device == "cuda:0" && reason.contains("replay tolerance")),
        "{err}"
    );
    assert!(err.to_string().contains("--device cpu"), "{err}");
    // Its first segment drifting past half the segment tolerance: refused too.
    let seg = device_check(gpu, false, || Ok(noise(1e-4, 6e-3))).unwrap_err();
    assert!(seg.to_string().contains("segment tolerance"), "{seg}");
    // Within half of both: it joins, and the figures are kept.
    let ok = device_check(gpu, false, || Ok(noise(1.7e-3, 1e-5))).unwrap();
    assert_eq!(ok.map(|n| n.distance), Some(1.7e-3));
    // The reference device, and a member that already joined, are not probed at all.
    let unprobed = || -> anyhow::Result<Noise> { panic!("probed") };
    assert_eq!(
        device_check(REFERENCE_DEVICE, false, unprobed).unwrap(),
        None
    );
    assert_eq!(device_check(gpu, true, unprobed).unwrap(), None);
}

#[test]
fn the_evidence_capacity_covers_every_transfer_the_others_may_hold_during_a_dispute() {
    let limits = |stall, min_rate| Limits {
        stall: std::time::Duration::from_secs(stall),
        min_rate,
    };
    // 8 members, 6 s stall, 200 kB/s: 7 others × (2 evidence + 2 bulk transfers) × 200 kB/s
    // = 5.6 MB/s (the swarm test `colluders_downloading_an_accuseds_checkpoint_cannot_starve_its_evidence`
    // gives its accused 6 MB/s).
    assert_eq!(evidence_capacity(8, &limits(6, 200_000)), 5_600_000.0);
    assert_eq!(evidence_capacity(1, &limits(10, 250_000)), 0.0);
    // A short stall raises the floor: each 1 MiB step must go through within it.
    assert!(evidence_capacity(8, &limits(1, 200_000)) > 28.0 * 1_000_000.0);
    // The default link (`--bandwidth-mbit 100`) covers pools of 13 members at the defaults
    // (10 s, 250 kB/s), not 14.
    let link = 100e6 / 8.0;
    assert!(evidence_capacity(13, &Limits::default()) <= link);
    assert!(evidence_capacity(14, &Limits::default()) > link);
}
