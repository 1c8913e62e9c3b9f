//! A member's payload for one round, the bytes it signs, announces and serves: built and
//! taken apart here only.
//!
//! Wire form, each prefix optional:
//!
//! ```text
//! ["SYTR" n h_0 … h_{n−1}]   Proof-of-Learning trace ([`crate::trace`])
//! ["SYEF" e_in e_out]        error-feedback commitments of a sparse payload ([`crate::residual`])
//! "SYNG" …                   the encoded pseudo-gradient (`synod-codec`)
//! ```
//!
//! The member's signature covers the whole payload's digest, so the trace and the commitments
//! are fixed before any verifier draws what to check.

use crate::residual::{split_commitments, with_commitments, Commitments};
use crate::trace::{split_trace, with_trace, Trace};
use crate::DilocoError;

/// A payload's parts: what a verifier reads, what the aggregation decodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload<'a> {
    /// Boundary hashes of the inner phase, start first (`None`: untraced, replayed whole).
    pub trace: Option<Trace>,
    /// Error-feedback commitments (`None`: a dense payload, or one outside a pool).
    pub commitments: Option<Commitments>,
    /// The encoded pseudo-gradient (`synod-codec` bytes).
    pub body: &'a [u8],
}

impl<'a> Payload<'a> {
    /// Splits `member`'s payload `bytes` into its parts. Reads the prefixes only (at most
    /// [`crate::trace::MAX_TRACE_BYTES`] + [`crate::residual::COMMITMENT_BYTES`]); the body
    /// is not decoded.
    ///
    /// # Errors
    /// [`DilocoError::Trace`] for a truncated trace or a hash count out of range,
    /// [`DilocoError::Residual`] for truncated commitments.
    pub fn parse(member: u32, bytes: &'a [u8]) -> Result<Self, DilocoError> {
        let (trace, rest) =
            split_trace(bytes).map_err(|source| DilocoError::Trace { member, source })?;
        let (commitments, body) =
            split_commitments(rest).map_err(|source| DilocoError::Residual { member, source })?;
        Ok(Self {
            trace,
            commitments,
            body,
        })
    }

    /// The trace of `bytes`, if it has a well-formed one.
    pub fn trace_of(bytes: &[u8]) -> Option<Trace> {
        Payload::parse(0, bytes).ok().and_then(|p| p.trace)
    }

    /// The wire bytes: the trace (none if `None` or empty), the commitments, then the body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let body = match &self.commitments {
            Some(c) => with_commitments(c, self.body),
            None => self.body.to_vec(),
        };
        match &self.trace {
            Some(t) if !t.is_empty() => with_trace(t, &body),
            _ => body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_combination_of_prefixes_round_trips() {
        let c = Commitments {
            carried_in: [1; 32],
            carried_out: [2; 32],
        };
        for trace in [None, Some(vec![[7u8; 32]; 3])] {
            for commitments in [None, Some(c)] {
                let p = Payload {
                    trace: trace.clone(),
                    commitments,
                    body: b"SYNGcodec",
                };
                let bytes = p.to_bytes();
                assert_eq!(Payload::parse(3, &bytes).unwrap(), p);
                assert_eq!(Payload::trace_of(&bytes), trace);
            }
        }
        // An empty trace is no trace.
        let untraced = Payload {
            trace: Some(Vec::new()),
            commitments: None,
            body: b"SYNG",
        };
        assert_eq!(untraced.to_bytes(), b"SYNG");
    }

    #[test]
    fn a_malformed_prefix_names_its_sender() {
        let traced = Payload {
            trace: Some(vec![[7u8; 32]; 2]),
            commitments: None,
            body: b"",
        }
        .to_bytes();
        assert!(matches!(
            Payload::parse(5, &traced[..20]),
            Err(DilocoError::Trace { member: 5, .. })
        ));
        let committed = Payload {
            trace: None,
            commitments: Some(Commitments {
                carried_in: [1; 32],
                carried_out: [2; 32],
            }),
            body: b"",
        }
        .to_bytes();
        assert!(matches!(
            Payload::parse(6, &committed[..40]),
            Err(DilocoError::Residual { member: 6, .. })
        ));
    }
}
