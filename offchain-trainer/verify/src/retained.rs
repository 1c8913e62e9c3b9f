//! The evidence a member keeps of each round: `<base>/evidence/pool-<p>/<round>/<member>.payload` (the
//! encoded pseudo-gradient, synod-codec bytes, checked against the author's signed digest when
//! it was fetched) and `<member>.announcement` (the author's signed gossip message announcing
//! it, SCALE `synod_protocol::evidence::Signed`, ≤ 8 KiB). Payloads live on disk, not in
//! memory: a round of N members holds N payloads only while it can be challenged.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use synod_checkpoint::CheckpointHash;

/// Who fetched trace states for its checks ([`Retained::fetched_dir`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checker {
    /// The verifier's sampled checks of a final round.
    Verifier,
    /// A juror's checks of a disputed contribution.
    Juror,
}

/// The evidence directory of one trainer.
#[derive(Clone, Debug)]
pub struct Retained {
    dir: PathBuf,
}

impl Retained {
    /// Opens (creating) `dir`.
    ///
    /// # Errors
    /// If the directory cannot be created.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
        })
    }

    fn round_dir(&self, round: u32) -> PathBuf {
        self.dir.join(round.to_string())
    }

    /// Keeps `member`'s `payload` for `round` and, when given, its signed `announcement`
    /// (written to temporary files, then renamed).
    ///
    /// # Errors
    /// File errors.
    pub fn save(
        &self,
        round: u32,
        member: u32,
        payload: &[u8],
        announcement: Option<&[u8]>,
    ) -> Result<()> {
        self.write(round, format!("{member}.payload"), payload, false)?;
        if let Some(a) = announcement {
            self.write(round, format!("{member}.announcement"), a, false)?;
        }
        Ok(())
    }

    /// Writes `bytes` as file `name` of `round` (a temporary file, then renamed). `durable`:
    /// the bytes, the name and the round directory's own entry are on disk when this returns
    /// (fsync of the file, the round directory and the evidence directory), so a power loss
    /// cannot lose a payload we are about to sign (see [`Retained::save_own`]).
    fn write(&self, round: u32, name: String, bytes: &[u8], durable: bool) -> Result<()> {
        use std::io::Write;
        let d = self.round_dir(round);
        std::fs::create_dir_all(&d)?;
        let tmp = d.join(format!(".{name}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, d.join(name))?;
        if durable {
            std::fs::File::open(&d)?.sync_all()?;
            std::fs::File::open(&self.dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Keeps our own (member `me`'s) `payload` for `round`, computed from the checkpoint
    /// `parent` (the blake3 of the θ its inner phase started from: θ_{r−1}, or θ_{r−2} with
    /// overlapped rounds; in `<me>.parent`; the payload is written first).
    ///
    /// # Errors
    /// File errors.
    pub fn save_own(
        &self,
        round: u32,
        me: u32,
        parent: &CheckpointHash,
        payload: &[u8],
    ) -> Result<()> {
        // A crash between the two writes must not pair this payload with an older parent.
        let _ = std::fs::remove_file(self.round_dir(round).join(format!("{me}.parent")));
        self.write(round, format!("{me}.payload"), payload, true)?;
        self.write(round, format!("{me}.parent"), parent, true)
    }

    /// Our own payload of `round` if it was computed from `parent` (a payload kept for
    /// another parent, e.g. by a run against another chain, is not ours to reuse).
    pub fn own(&self, round: u32, me: u32, parent: &CheckpointHash) -> Option<Vec<u8>> {
        let kept = std::fs::read(self.round_dir(round).join(format!("{me}.parent"))).ok()?;
        (kept == parent[..])
            .then(|| self.payload(round, me))
            .flatten()
    }

    /// Where our Proof-of-Learning trace state of blake3 `hash` for `round` is kept:
    /// `<round>/trace/<hex>.state` (canonical `synod-checkpoint` bytes), deleted with the
    /// round's evidence.
    pub fn trace_path(&self, round: u32, hash: &CheckpointHash) -> PathBuf {
        self.round_dir(round)
            .join("trace")
            .join(format!("{}.state", synod_checkpoint::hex(hash)))
    }

    /// Where `by` puts the trace states it fetched from other members for its checks of
    /// `round` (`<round>/fetched/` for the verifier, `<round>/fetched-jury/` for the juror;
    /// files named by blake3): on disk rather than all in memory, since a round's checks may
    /// need many model-sized states; deleted once its checks of the round are done (each
    /// deletes its own only: jury duty runs between two of the verifier's checks), and with
    /// the round's evidence.
    pub fn fetched_dir(&self, round: u32, by: Checker) -> PathBuf {
        self.round_dir(round).join(match by {
            Checker::Verifier => "fetched",
            Checker::Juror => "fetched-jury",
        })
    }

    /// Keeps our trace state `bytes` of blake3 `hash` for `round` (a temporary file, then
    /// renamed) and returns its path.
    ///
    /// # Errors
    /// File errors.
    pub fn save_trace_state(
        &self,
        round: u32,
        hash: &CheckpointHash,
        bytes: &[u8],
    ) -> Result<PathBuf> {
        let path = self.trace_path(round, hash);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)?;
        Ok(path)
    }

    /// The state with blake3 `hash` kept with `round`'s evidence ([`Retained::trace_path`]: a
    /// trace state or a residual), read back and checked against its hash.
    ///
    /// # Errors
    /// The file is not there, or its bytes do not hash to `hash`.
    pub fn kept_state(&self, round: u32, hash: &CheckpointHash) -> Result<Vec<u8>> {
        let path = self.trace_path(round, hash);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if synod_checkpoint::hash(&bytes) != *hash {
            anyhow::bail!("{} does not hash to its name", path.display());
        }
        Ok(bytes)
    }

    /// `member`'s payload of `round`, if kept.
    pub fn payload(&self, round: u32, member: u32) -> Option<Vec<u8>> {
        std::fs::read(self.round_dir(round).join(format!("{member}.payload"))).ok()
    }

    /// `member`'s signed announcement of `round`, if kept.
    pub fn announcement(&self, round: u32, member: u32) -> Option<Vec<u8>> {
        std::fs::read(self.round_dir(round).join(format!("{member}.announcement"))).ok()
    }

    /// Rounds with kept evidence, ascending.
    pub fn rounds(&self) -> Vec<u32> {
        let mut out: Vec<u32> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().into_string().ok()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_unstable();
        out
    }

    /// Deletes the evidence of `round` (it can no longer be challenged).
    pub fn forget(&self, round: u32) {
        let _ = std::fs::remove_dir_all(self.round_dir(round));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_payloads_are_found_by_member_and_forgotten_per_round() {
        let dir = tempfile::tempdir().unwrap();
        let r = Retained::open(dir.path()).unwrap();
        r.save(3, 0, b"zero", Some(b"sig0")).unwrap();
        r.save(3, 2, b"two", None).unwrap();
        r.save(4, 1, b"one", Some(b"sig1")).unwrap();
        assert_eq!(r.rounds(), vec![3, 4]);
        assert_eq!(r.payload(3, 2).as_deref(), Some(&b"two"[..]));
        assert_eq!(r.announcement(3, 0).as_deref(), Some(&b"sig0"[..]));
        assert_eq!(r.announcement(3, 2), None);
        // A copier (member 1) announcing member 0's bytes: each is kept under its own index
        // (jurors look the accused up by index, never by digest: the digests are equal).
        r.save(3, 1, b"zero", Some(b"sig1")).unwrap();
        assert_eq!(r.payload(3, 1).as_deref(), Some(&b"zero"[..]));
        assert_eq!(r.announcement(3, 1).as_deref(), Some(&b"sig1"[..]));
        r.forget(3);
        assert_eq!(r.rounds(), vec![4]);
        assert_eq!(r.payload(3, 2), None);
    }

    #[test]
    fn a_juror_deleting_its_fetched_states_leaves_the_verifiers_in_place() {
        // Jury duty runs between two of the verifier's checks of the same round, and deletes
        // what it fetched when it is done: the verifier's states must survive it.
        let dir = tempfile::tempdir().unwrap();
        let r = Retained::open(dir.path()).unwrap();
        let (verifier, juror) = (
            r.fetched_dir(6, Checker::Verifier),
            r.fetched_dir(6, Checker::Juror),
        );
        for d in [&verifier, &juror] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("ab.state"), b"state").unwrap();
        }
        std::fs::remove_dir_all(&juror).unwrap();
        assert!(verifier.join("ab.state").exists());
        assert!(!juror.starts_with(&verifier) && !verifier.starts_with(&juror));
        // Both go with the round's evidence.
        r.forget(6);
        assert!(!verifier.exists());
    }

    #[test]
    fn own_payload_is_reused_only_for_the_parent_it_was_computed_from() {
        let dir = tempfile::tempdir().unwrap();
        let r = Retained::open(dir.path()).unwrap();
        assert_eq!(r.own(5, 2, &[1; 32]), None);
        r.save_own(5, 2, &[1; 32], b"ours").unwrap();
        assert_eq!(r.own(5, 2, &[1; 32]).as_deref(), Some(&b"ours"[..]));
        // Another θ_{r−1} (a voided parent, another chain under the same base path): recompute.
        assert_eq!(r.own(5, 2, &[9; 32]), None);
        // A payload kept without its parent (another member's evidence) is never "ours".
        r.save(5, 3, b"theirs", Some(b"sig")).unwrap();
        assert_eq!(r.own(5, 3, &[1; 32]), None);
    }
}
