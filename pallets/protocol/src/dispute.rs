//! What a challenge disputes (`docs/architecture.md`, step 7, "Narrowed disputes"): the whole
//! inner phase, or one part of the accused's signed Proof-of-Learning trace (Jia et al. 2021,
//! "Proof-of-Learning", §4.2), so that a committee checks that part only, in the spirit of the
//! refereed-delegation games that narrow a dispute to one step (Canetti, Riva, Rothblum 2011;
//! Gensyn's Verde). A narrowed dispute is decisive either way: the part that fails convicts, the
//! part that holds acquits; a part whose states the accused does not serve, or a segment that
//! fails by little, is judged by the whole replay instead, so withholding neither shields a
//! cheater nor convicts on availability.

use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;

use crate::limits::MAX_TRACE_SEGMENTS;

/// The part of a contribution a challenge disputes, and so what its jurors check.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Debug,
	Default,
)]
#[cfg_attr(feature = "scale-decode", derive(scale_decode::DecodeAsType))]
#[cfg_attr(feature = "scale-encode", derive(scale_encode::EncodeAsType))]
pub enum Dispute {
	/// The whole inner phase: jurors replay its H inner steps from θ_{r−1} and compare the
	/// encoded pseudo-gradient with the payload.
	#[default]
	Phase,
	/// The trace's ends: its first state is not the phase's start (θ_{r−1}, or θ_{r−2} with
	/// overlapped rounds) with a fresh optimizer, or the payload does not encode its last
	/// state. Jurors fetch the last state and encode it; no inner
	/// step is replayed.
	Encoding,
	/// Segment `i` of the trace (the inner steps between boundaries `i` and `i + 1`) does not
	/// replay from its start state to its end state. Jurors fetch the two states (and the last
	/// one, to check the encoding too) and replay that segment only; a segment failing by
	/// little (possibly a larger model's or another device's honest drift) is judged by a
	/// whole replay. `i < MAX_TRACE_SEGMENTS`.
	Segment(u32),
}

impl Dispute {
	/// Whether the dispute names a part the protocol can hold: a segment index below
	/// [`MAX_TRACE_SEGMENTS`] (the chain does not know a pool's segment count; a juror treats a
	/// segment beyond the accused's trace as a whole-phase dispute).
	pub fn is_valid(&self) -> bool {
		match self {
			Self::Segment(i) => *i < MAX_TRACE_SEGMENTS,
			Self::Phase | Self::Encoding => true,
		}
	}

	/// The trace segments a juror replays for it: none for [`Dispute::Phase`] (a whole replay,
	/// not a segment check) and [`Dispute::Encoding`], `[i]` for [`Dispute::Segment`].
	pub fn segments(&self) -> alloc::vec::Vec<u32> {
		match self {
			Self::Segment(i) => alloc::vec![*i],
			Self::Phase | Self::Encoding => alloc::vec::Vec::new(),
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn a_segment_past_the_longest_trace_is_no_dispute() {
		assert!(Dispute::Segment(MAX_TRACE_SEGMENTS - 1).is_valid());
		assert!(!Dispute::Segment(MAX_TRACE_SEGMENTS).is_valid());
		assert!(Dispute::Phase.is_valid() && Dispute::Encoding.is_valid());
		assert_eq!(Dispute::Segment(3).segments(), [3]);
		assert!(Dispute::Encoding.segments().is_empty());
		assert_eq!(Dispute::default(), Dispute::Phase);
	}
}
