//! Which error-feedback residual a sparse payload must have been encoded with
//! ([`synod_diloco::residual`]), from the evidence a member keeps: the one rule the member
//! (encoding its payload) and its verifiers and jurors (checking it) apply.

use synod_diloco::residual::{carried_in_rule, commitments_of, NO_RESIDUAL};

use super::Retained;

/// The `carried_in` that `member`'s payload of `round` must commit to
/// ([`carried_in_rule`]): [`NO_RESIDUAL`] in round 1 or when `member` is not in
/// `included_prev` (the included set of the final checkpoint of round − 1, ascending),
/// else the `carried_out` of its round − 1 payload as kept in `retained`. `None` when that
/// payload is needed and not kept (a verifier that was not in round − 1, or after its evidence
/// was forgotten): nobody here can tell.
pub fn expected_carried_in(
    retained: &Retained,
    round: u32,
    member: u32,
    included_prev: &[u32],
) -> Option<[u8; 32]> {
    if round <= 1 || !included_prev.contains(&member) {
        return Some(NO_RESIDUAL);
    }
    let previous = retained.payload(round - 1, member)?;
    // A kept payload of a sparse pool without commitments (or a malformed one) left nothing
    // to carry.
    let out = commitments_of(member, &previous)
        .ok()
        .flatten()
        .map(|c| c.carried_out);
    Some(carried_in_rule(out, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use synod_diloco::payload::Payload;
    use synod_diloco::residual::Commitments;

    #[test]
    fn the_expected_residual_follows_the_rule_and_says_when_it_cannot_tell() {
        let dir = tempfile::tempdir().unwrap();
        let retained = Retained::open(dir.path()).unwrap();
        let c = Commitments {
            carried_in: [1; 32],
            carried_out: [2; 32],
        };
        let payload = Payload {
            trace: None,
            commitments: Some(c),
            body: b"SYNG",
        };
        retained.save(4, 7, &payload.to_bytes(), None).unwrap();
        assert_eq!(expected_carried_in(&retained, 5, 7, &[3, 7]), Some([2; 32]));
        // Left out of round 4's included set: the memory starts over.
        assert_eq!(
            expected_carried_in(&retained, 5, 7, &[3]),
            Some(NO_RESIDUAL)
        );
        assert_eq!(
            expected_carried_in(&retained, 1, 7, &[7]),
            Some(NO_RESIDUAL)
        );
        // Round 5's payload of member 3 was not kept: unknown.
        assert_eq!(expected_carried_in(&retained, 5, 3, &[3, 7]), None);
    }
}
