//! The duty worker's one memory of the replays it ran, by contribution and by the part of its
//! trace each replay decided: a verifier drawn as a juror, or a juror seated on several
//! challenges of one contribution, replays it once per part (a replay costs up to an inner
//! phase, and a cheater's contribution draws several challenges, each seating most jurors).
//!
//! A replay of one payload and one part is deterministic: the states are fetched by the hashes
//! the payload's author signed, and θ_{r−1} by its hash; a replay answers for the payload it
//! replayed (its blake3 is in the key). What answers what:
//! - a whole-phase replay answers a verifier's check and a whole-phase dispute;
//! - the check of a disputed part answers another dispute of that part;
//! - a part a check found wrong (`Replay::failed`: beyond conviction, or confirmed by the whole
//!   replay) answers a dispute of that part: dishonest.

use std::collections::BTreeMap;

use crate::pool::verify::replay::{Dispute, Replay};

/// A part of a contribution's trace as a map key: (0, 0) the whole phase, (1, 0) the encoding,
/// (2, i) segment `i`.
type Part = (u8, u32);

fn part(d: Dispute) -> Part {
    match d {
        Dispute::Phase => (0, 0),
        Dispute::Encoding => (1, 0),
        Dispute::Segment(i) => (2, i),
    }
}

/// Replays by (round, member index, blake3 of the payload replayed, part decided): the payload
/// kept for a member can be replaced (the other payload of a member that signed two, when the
/// final set holds that one), and a replay answers for the payload it replayed only. A round's
/// entries are forgotten with its evidence ([`Replays::forget`]), so the map holds at most the
/// kept rounds' contributions times the parts disputed
/// ([`synod_protocol::MAX_TRACE_SEGMENTS`] + 2 per payload).
#[derive(Debug, Default)]
pub(super) struct Replays(BTreeMap<(u32, u32, [u8; 32], Part), Replay>);

impl Replays {
    /// The replay that answers a check of `asked` of `member`'s payload `digest` for `round`
    /// ([`Dispute::Phase`]: the whole phase, also a verifier's check), if one ran.
    pub(super) fn get(
        &self,
        round: u32,
        member: u32,
        digest: &[u8; 32],
        asked: Dispute,
    ) -> Option<Replay> {
        self.0.get(&(round, member, *digest, part(asked))).copied()
    }

    /// Records `rep`, the replay of `member`'s payload `digest` for `round` for a check that
    /// asked `asked` (a disputed part; `None` for a verifier's sampled segments, which answer no
    /// dispute unless they replayed the whole phase or found a part wrong).
    pub(super) fn record(
        &mut self,
        round: u32,
        member: u32,
        digest: &[u8; 32],
        asked: Option<Dispute>,
        rep: Replay,
    ) {
        let key = |p: Dispute| (round, member, *digest, part(p));
        if rep.whole.is_some() {
            self.0.insert(key(Dispute::Phase), rep);
        }
        if let Some(d) = asked.filter(|d| *d != Dispute::Phase) {
            self.0.insert(key(d), rep);
        }
        if let Some(failed) = rep.failed.filter(|_| !rep.honest) {
            self.0.entry(key(failed)).or_insert(rep);
        }
    }

    /// Forgets the replays of `round` (its evidence is gone).
    pub(super) fn forget(&mut self, round: u32) {
        self.0.retain(|(r, ..), _| *r != round);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::verify::replay::WholeReplay;

    fn rep(honest: bool, whole: Option<WholeReplay>, failed: Option<Dispute>) -> Replay {
        Replay {
            distance: if honest { 0.001 } else { 0.9 },
            honest,
            secs: 6.0,
            segments: 1,
            whole,
            failed,
        }
    }

    /// A juror seated on several challenges of one contribution replays each disputed part
    /// once; a verifier that found a part wrong, or replayed the whole phase, has answered the
    /// juror's dispute of that part, or of the whole phase, already.
    #[test]
    fn a_contribution_is_replayed_once_per_part_by_its_verifier_and_its_jurors() {
        const P: [u8; 32] = [7; 32];
        let mut r = Replays::default();
        // A juror's check of segment 2 answers the next challenge of segment 2 only.
        let seg2 = Dispute::Segment(2);
        r.record(3, 1, &P, Some(seg2), rep(false, None, Some(seg2)));
        assert!(!r.get(3, 1, &P, seg2).unwrap().honest);
        assert!(r.get(3, 1, &P, Dispute::Segment(1)).is_none());
        assert!(r.get(3, 1, &P, Dispute::Encoding).is_none());
        assert!(
            r.get(3, 1, &P, Dispute::Phase).is_none(),
            "a part's check is no whole replay"
        );
        assert!(r.get(3, 2, &P, seg2).is_none(), "another member");
        assert!(r.get(4, 1, &P, seg2).is_none(), "another round");
        // Another payload kept for the same member (the other payload of a member that signed
        // two): replayed anew.
        assert!(r.get(3, 1, &[8; 32], seg2).is_none(), "another payload");
        // A verifier's sampled segments that passed answer nothing.
        r.record(3, 2, &P, None, rep(true, None, None));
        assert!(r.get(3, 2, &P, Dispute::Phase).is_none());
        // A verifier whose segment check found the encoding wrong, confirmed by its whole
        // replay: the juror's dispute of the encoding, or of the phase, needs no replay.
        r.record(
            3,
            3,
            &P,
            None,
            rep(false, Some(WholeReplay::Mismatch), Some(Dispute::Encoding)),
        );
        assert!(!r.get(3, 3, &P, Dispute::Encoding).unwrap().honest);
        assert!(!r.get(3, 3, &P, Dispute::Phase).unwrap().honest);
        assert!(r.get(3, 3, &P, Dispute::Segment(0)).is_none());
        // A whole replay forced by unserved states answers the dispute it was run for and the
        // whole phase, not other parts (the states may be served to the next check).
        r.record(
            5,
            1,
            &P,
            Some(Dispute::Segment(4)),
            rep(true, Some(WholeReplay::Unserved), None),
        );
        assert!(r.get(5, 1, &P, Dispute::Segment(4)).unwrap().honest);
        assert!(r.get(5, 1, &P, Dispute::Phase).unwrap().honest);
        assert!(r.get(5, 1, &P, Dispute::Segment(3)).is_none());
        // A part named by an honest replay (no conviction) answers nothing for that part.
        r.record(6, 1, &P, None, rep(true, None, Some(Dispute::Segment(1))));
        assert!(r.get(6, 1, &P, Dispute::Segment(1)).is_none());
        r.forget(3);
        assert!(r.get(3, 1, &P, seg2).is_none());
        assert!(r.get(3, 3, &P, Dispute::Phase).is_none());
        assert!(
            r.get(5, 1, &P, Dispute::Phase).is_some(),
            "other rounds are kept"
        );
    }
}
