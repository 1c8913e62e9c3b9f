//! Checkpoints under the trainer's base path, addressed by their blake3
//! (`<base>/checkpoints/<hex>.safetensors`), and their retrieval from peers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use synod_checkpoint::CheckpointHash;
use synod_p2p::{Client, PeerId};

/// A content-addressed checkpoint directory (clones name the same directory).
#[derive(Clone)]
pub struct Store {
    dir: PathBuf,
    /// Largest checkpoint fetched from a peer, in bytes (the pool's model's own bound).
    max_bytes: u64,
}

impl Store {
    /// Opens (creating) `dir`; checkpoints of more than `max_bytes` bytes (the model's
    /// [`synod_diloco::max_checkpoint_bytes`]) are never fetched.
    ///
    /// # Errors
    /// If the directory cannot be created.
    pub fn open(dir: &Path, max_bytes: u64) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            max_bytes,
        })
    }

    /// The file of `hash`.
    pub fn path(&self, hash: &CheckpointHash) -> PathBuf {
        self.dir
            .join(format!("{}.safetensors", synod_checkpoint::hex(hash)))
    }

    /// Stores `bytes` (written to a temporary file, then renamed) and returns their blake3.
    ///
    /// # Errors
    /// File errors.
    pub fn put(&self, bytes: &[u8]) -> Result<CheckpointHash> {
        let h = synod_checkpoint::hash(bytes);
        let path = self.path(&h);
        if !path.exists() {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &path)?;
        }
        Ok(h)
    }

    /// The bytes of `hash` if stored and intact (a corrupt file is removed).
    pub fn get(&self, hash: &CheckpointHash) -> Option<Vec<u8>> {
        let path = self.path(hash);
        let bytes = std::fs::read(&path).ok()?;
        if synod_checkpoint::hash(&bytes) == *hash {
            Some(bytes)
        } else {
            tracing::warn!("{} does not hash to its name; removing it", path.display());
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Removes the file of `hash` (a checkpoint that lost the vote).
    pub fn remove(&self, hash: &CheckpointHash) {
        let _ = std::fs::remove_file(self.path(hash));
    }

    /// The checkpoint `hash` from this store or, failing that, from any of `peers` over
    /// `/synod/checkpoint/2` (verified against `hash`, then stored and served). Retries for up
    /// to `timeout`.
    ///
    /// # Errors
    /// If no peer delivered it in time.
    pub async fn get_or_fetch(
        &self,
        client: &Client,
        peers: &[PeerId],
        hash: CheckpointHash,
        timeout: Duration,
    ) -> Result<Vec<u8>> {
        if let Some(b) = self.get(&hash) {
            return Ok(b);
        }
        let start = Instant::now();
        let mut last = String::from("no peer to ask");
        while start.elapsed() < timeout {
            for peer in peers {
                match tokio::time::timeout(
                    Duration::from_secs(60),
                    client.fetch_checkpoint(*peer, hash, self.max_bytes),
                )
                .await
                {
                    Ok(Ok(bytes)) => {
                        self.put(&bytes)?;
                        let _ = client.serve_checkpoint(Arc::new(bytes.clone())).await;
                        tracing::info!(%peer, hash = %synod_checkpoint::hex(&hash), bytes = bytes.len(), "fetched checkpoint");
                        return Ok(bytes);
                    }
                    Ok(Err(e)) => last = format!("{peer}: {e}"),
                    Err(_) => last = format!("{peer}: timed out"),
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(anyhow!(
            "checkpoint {} not found at any peer within {} s: {last}",
            synod_checkpoint::hex(&hash),
            timeout.as_secs()
        ))
    }
}
