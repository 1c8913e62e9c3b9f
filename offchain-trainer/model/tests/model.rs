//! The tch side on real text: shapes, learning, the DiLoCo ≡ plain-training degenerate case,
//! parameter transfer and PyTorch interop.
#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::path::PathBuf;
use std::sync::Arc;

use synod_codec::EncodeOptions;
use synod_data::{BatchPlan, Corpus};
use synod_diloco::{Mean, NesterovSgd, OuterState};
use synod_model::{
    eval_loss, load_params, tch, GptConfig, InnerConfig, ModelError, TchInnerTrainer,
};
use tch::{Device, Kind, Tensor};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus() -> Arc<Corpus> {
    let path = std::env::var_os("SYNOD_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/data/tinyshakespeare.txt"));
    Arc::new(Corpus::from_file(&path).expect("tinyshakespeare.txt (set SYNOD_DATA)"))
}

fn trainer(cfg: InnerConfig, worker: u32) -> TchInnerTrainer {
    tch::set_num_threads(1);
    let plan = BatchPlan::new(corpus(), 42, cfg.batch, 32).unwrap();
    TchInnerTrainer::new(GptConfig::tiny(), cfg, plan, worker, Device::Cpu, 7).unwrap()
}

#[test]
fn logits_have_the_right_shape_and_initial_loss_is_uniform() {
    let t = trainer(InnerConfig::nanogpt(4, 1, 100), 0);
    let idx = Tensor::from_slice(&[1i64, 2, 3, 4, 5, 6]).view([2, 3]);
    let logits = t.model.forward(&idx).unwrap();
    assert_eq!(logits.size(), vec![2, 3, 256]);
    assert_eq!(logits.kind(), Kind::Float);
    let loss = eval_loss(&t.model, &t.plan, 2, Device::Cpu).unwrap();
    assert!((loss - 256f64.ln()).abs() < 0.1, "initial loss {loss}");
    let too_long = Tensor::zeros([1, 33], (Kind::Int64, Device::Cpu));
    assert!(matches!(
        t.model.forward(&too_long),
        Err(ModelError::Config(_))
    ));
}

#[test]
fn training_on_shakespeare_lowers_validation_loss() {
    let cfg = InnerConfig {
        warmup_steps: 5,
        lr: 3e-3,
        ..InnerConfig::nanogpt(16, 60, 60)
    };
    let mut t = trainer(cfg, 0);
    let before = eval_loss(&t.model, &t.plan, 4, Device::Cpu).unwrap();
    for s in 0..60 {
        let b = t.plan.train_batch(0, 1, s);
        t.train_step(&[b], u64::from(s)).unwrap();
    }
    let after = eval_loss(&t.model, &t.plan, 4, Device::Cpu).unwrap();
    assert!(after < before - 1.5, "val loss {before} -> {after}");
}

#[test]
fn diloco_with_one_worker_h1_lr1_no_momentum_equals_plain_training() {
    let cfg = InnerConfig {
        keep_state: true,
        inner_steps: 1,
        warmup_steps: 2,
        ..InnerConfig::nanogpt(4, 1, 10)
    };
    let mut plain = trainer(cfg, 0);
    let mut workers = vec![trainer(cfg, 0)];
    // Tests run in parallel and libtorch's seed is global: share θ_0 explicitly.
    let mut state = OuterState::new(plain.params().unwrap(), NesterovSgd::new(1.0, 0.0));
    for round in 1..=6u32 {
        let loss = plain
            .train_step(&[plain.plan.train_batch(0, round, 0)], u64::from(round - 1))
            .unwrap();
        let (_, reports, _) = state
            .local_round(
                &mut workers,
                &Mean,
                &EncodeOptions::fp32(),
                &mut Vec::new(),
                None,
            )
            .unwrap();
        // Round 1 starts from the same θ₀ bit for bit; later rounds from θ − (θ − θ′), which is θ′
        // up to one f32 rounding per parameter (checked below), so the loss agrees to ~1e-7.
        if round == 1 {
            assert_eq!(
                reports[0].last_loss, loss,
                "round 1: the inner step saw the same parameters and batch"
            );
        } else {
            assert!(
                (reports[0].last_loss - loss).abs() <= 1e-5 * loss.abs(),
                "round {round}: {} vs {loss}",
                reports[0].last_loss
            );
        }
        let p = plain.params().unwrap();
        let mut worst = 0f32;
        for (a, b) in p.tensors().iter().zip(state.params.tensors()) {
            for (x, y) in a.data.iter().zip(&b.data) {
                worst = worst.max((x - y).abs());
            }
        }
        // θ − (θ − θ') = θ' up to one f32 rounding.
        assert!(worst < 1e-6, "round {round}: max |Δθ| = {worst}");
    }
}

#[test]
fn parameters_round_trip_and_foreign_layouts_are_refused() {
    let a = trainer(InnerConfig::nanogpt(2, 1, 1), 0);
    let b = {
        tch::manual_seed(99);
        trainer(InnerConfig::nanogpt(2, 1, 1), 1)
    };
    let pa = a.params().unwrap();
    assert_eq!(
        pa.numel(),
        2 * (12 * 32 * 32 + 13 * 32) + 256 * 32 + 32 * 32 + 2 * 32
    );
    load_params(&b.vs, &pa).unwrap();
    assert_eq!(b.params().unwrap(), pa);
    let mut with_extra = pa.clone().with_prefixed("outer_momentum.", &pa).unwrap();
    assert!(matches!(
        load_params(&b.vs, &with_extra),
        Err(ModelError::Layout(_))
    ));
    with_extra.take_prefixed("outer_momentum.");
    load_params(&b.vs, &with_extra).unwrap();
}

#[test]
fn a_synod_checkpoint_loads_in_pytorch_and_gives_the_same_logits() {
    let mut t = trainer(InnerConfig::nanogpt(4, 1, 10), 0);
    for s in 0..3 {
        let b = t.plan.train_batch(0, 1, s);
        t.train_step(&[b], u64::from(s)).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("synod-interop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ckpt = dir.join("ckpt.safetensors");
    let state = OuterState::new(t.params().unwrap(), NesterovSgd::new(0.7, 0.9));
    synod_checkpoint::write(&ckpt, &state.checkpoint_set().unwrap()).unwrap();
    let tokens: Vec<i64> = "To be, or not to be".bytes().map(i64::from).collect();
    let csv: Vec<String> = tokens.iter().map(i64::to_string).collect();
    let out = dir.join("logits.safetensors");
    let python = std::env::var("SYNOD_PYTHON").unwrap_or_else(|_| "python3".into());
    let status = std::process::Command::new(python)
        .arg(repo_root().join("offchain-trainer/python/interop_logits.py"))
        .arg(&ckpt)
        .arg(r#"{"vocab":256,"ctx":32,"n_layer":2,"n_head":2,"d_model":32}"#)
        .arg(csv.join(","))
        .arg(&out)
        .status()
        .expect("python3 with torch and safetensors (scripts/setup.sh installs them)");
    assert!(status.success());
    let theirs = synod_checkpoint::read(&out, None).unwrap().0;
    let ours = t
        .model
        .forward(&Tensor::from_slice(&tokens).view([1, -1]))
        .unwrap();
    let ours: Vec<f32> = Vec::try_from(ours.flatten(0, -1)).unwrap();
    let theirs = &theirs.tensors()[0].data;
    assert_eq!(ours.len(), theirs.len());
    let worst = ours
        .iter()
        .zip(theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-4, "max |logit difference| = {worst}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_cancelled_inner_phase_stops_before_its_next_step_and_the_replica_trains_on() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use synod_diloco::{CancelToken, DilocoError, InnerTrainer};
    let cfg = InnerConfig {
        inner_steps: 10,
        ..InnerConfig::nanogpt(4, 10, 100)
    };
    let token = CancelToken::new();
    let steps = Arc::new(AtomicU32::new(0));
    let (seen, cancel) = (steps.clone(), token.clone());
    // Cancelled from the step hook after the third step, as another thread would.
    let mut w = trainer(cfg, 0).with_step_hook(Box::new(move |done, _, _| {
        seen.fetch_add(1, Ordering::Relaxed);
        if done == 3 {
            cancel.cancel();
        }
    }));
    w.set_cancel(Some(token));
    let start = w.params().unwrap();
    match w.inner_phase(&start, 1) {
        Err(DilocoError::Cancelled { round: 1, step: 3 }) => {}
        other => panic!(
            "expected a cancellation before step 3, got {:?}",
            other.map(|r| r.1)
        ),
    }
    assert_eq!(
        steps.load(Ordering::Relaxed),
        3,
        "no step ran after the cancellation"
    );
    // Without the token the same replica runs a whole phase from the start again.
    w.set_cancel(None);
    let (_, report) = w.inner_phase(&start, 1).unwrap();
    assert_eq!(steps.load(Ordering::Relaxed), 13);
    assert!(report.mean_loss.is_finite());
}
