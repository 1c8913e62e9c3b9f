//! Tests of [`super`].

use super::*;
use crate::vote::juror_vote;

fn honest(_: &[u8]) -> Result<Replay> {
    Ok(Replay {
        distance: 1e-7,
        honest: true,
        secs: 0.0,
        segments: 0,
        whole: Some(WholeReplay::Asked),
        failed: None,
    })
}

#[test]
fn a_segment_check_fetches_the_end_and_its_segments_boundaries_but_never_the_start() {
    // 17 states: boundaries 0..=16. Segment 0 needs state 1 (0 is rebuilt), segment 15
    // needs 15 and the end; a segment past the end is ignored.
    assert_eq!(needed_states(17, &[0, 5, 15, 40]), vec![1, 5, 6, 15, 16]);
    assert_eq!(needed_states(17, &[]), vec![16]);
    assert!(needed_states(1, &[0]).is_empty() && needed_states(0, &[0]).is_empty());
}

#[test]
fn accomplice_sham_challenge_with_a_second_signed_payload_convicts_the_cheater() {
    // The cheater gossiped `kept` (honest work) but signed a second payload for the round,
    // which an accomplice uses as evidence: no juror holds those bytes to replay, yet the
    // two digests under one key for one round are proof enough.
    let kept = b"the payload everyone fetched";
    let other = *blake3::hash(b"a payload never gossiped").as_bytes();
    assert!(juror_vote(kept, &other, honest).unwrap().0);
    // The same payload is judged by its replay.
    let same = *blake3::hash(kept).as_bytes();
    assert_eq!(juror_vote(kept, &same, honest).unwrap(), (false, 1e-7));
    let bad = |_: &[u8]| {
        Ok(Replay {
            distance: 0.6,
            honest: false,
            secs: 0.0,
            segments: 0,
            whole: Some(WholeReplay::Asked),
            failed: None,
        })
    };
    assert_eq!(juror_vote(kept, &same, bad).unwrap(), (true, 0.6));
}
