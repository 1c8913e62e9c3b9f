//! Helpers shared by the model's integration tests: the corpus, the tiny model's replicas and
//! the lock that makes libtorch's process-wide thread count safe to change.
#![allow(dead_code, reason = "each test file uses a part")]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use synod_data::{BatchPlan, Corpus};
use synod_model::{tch, GptConfig, InnerConfig, TchInnerTrainer};
use tch::Device;

/// libtorch's thread count is process-wide: the tests of a file take turns.
pub static THREADS: Mutex<()> = Mutex::new(());

pub fn corpus() -> Arc<Corpus> {
    let path = std::env::var_os("SYNOD_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/tinyshakespeare.txt")
        });
    Arc::new(Corpus::from_file(&path).expect("tinyshakespeare.txt (set SYNOD_DATA)"))
}

/// The tests' inner optimizer: `inner_steps` per phase, schedule over `total_steps`.
pub fn cfg(inner_steps: u32, total_steps: u32) -> InnerConfig {
    InnerConfig {
        warmup_steps: 10,
        lr: 3e-3,
        inner_steps,
        ..InnerConfig::nanogpt(8, inner_steps, total_steps)
    }
}

/// A tiny-model replica of `worker` on the CPU with `threads` libtorch threads.
pub fn replica(cfg: InnerConfig, worker: u32, threads: i32) -> TchInnerTrainer {
    tch::set_num_threads(threads);
    let plan = BatchPlan::new(corpus(), 1337, 8, 32).unwrap();
    TchInnerTrainer::new(GptConfig::tiny(), cfg, plan, worker, Device::Cpu, 7).unwrap()
}
