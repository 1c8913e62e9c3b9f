//! The duty worker's thread: the training thread hands it rounds and the chain subscription
//! tells it of finalized blocks and of what they made due in the pool's rounds (the actions of
//! the protocol's round state machine, [`super::super::follow`]); it runs one pass of the
//! duties per wake-up, beside the rounds, until the pool is over or the member stops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use synod_protocol::Action;

/// How long the duty worker waits for a finalized block before it runs a pass anyway (the
/// chain's subscription may have ended; the chain is then polled at this pace).
const IDLE_PASS: Duration = Duration::from_secs(12);

/// What the duty worker is told.
pub(in crate::pool::member) enum DutyMsg {
    /// The chain finalized a block (told by the member's `Chain::follow` subscription).
    Finalized,
    /// A finalized block made `action` due in `round` of the pool (the protocol's round state
    /// machine, stepped by the subscription: [`super::super::follow::PoolRounds`]); told
    /// before the block's [`DutyMsg::Finalized`].
    Round(u32, Action),
    /// The subscription missed blocks (it reconnected): what it told may have missed a
    /// round's finality.
    Resync,
    /// The subscription has ended: no more [`DutyMsg::Round`] will come.
    Unfollowed,
    /// The evidence of `round` is kept: verify it once the round is final.
    Verify(u32),
    /// The pool is over: finish the duties (at most this long), then stop.
    Finish(Duration),
    /// The member is stopping (its `run` failed): stop after the pass under way.
    Stop,
}

/// What the worker's thread drives ([`super::DutyWorker`] for a member).
pub(in crate::pool::member) trait Duty: Send + 'static {
    /// Takes the kept evidence of `round` to verify once the round is final.
    fn hand_over(&mut self, round: u32);
    /// Takes what the chain made due in `round` ([`DutyMsg::Round`]).
    fn told(&mut self, round: u32, action: Action);
    /// The subscription missed blocks ([`DutyMsg::Resync`]).
    fn resync(&mut self);
    /// The subscription has ended ([`DutyMsg::Unfollowed`]): what it told may go stale.
    fn unfollowed(&mut self);
    /// One pass of every duty; never fails (problems are logged and retried next pass).
    fn pass(&mut self);
    /// After the pool's last round: passes until nothing is left to do (at most `max_wait`,
    /// plus the pass under way), each pass's time added to `busy_us` (microseconds).
    fn finish(&mut self, max_wait: Duration, busy_us: &AtomicU64);
}

/// The training thread's side of the duty worker.
pub(in crate::pool::member) struct DutyHandle {
    tx: Sender<DutyMsg>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Microseconds of duty passes not yet reported ([`DutyHandle::take_busy_secs`]).
    busy_us: Arc<AtomicU64>,
}

impl DutyHandle {
    /// Starts `duty` on a thread of its own. It is woken by what `rx` receives: `tx` is this
    /// handle's sender (clones of it go to whoever tells it of finalized blocks).
    ///
    /// # Errors
    /// The thread cannot be spawned.
    pub fn start<D: Duty>(duty: D, tx: Sender<DutyMsg>, rx: Receiver<DutyMsg>) -> Result<Self> {
        let busy_us = Arc::new(AtomicU64::new(0));
        let busy = busy_us.clone();
        let thread = std::thread::Builder::new()
            .name("duties".into())
            .spawn(move || run(duty, &rx, &busy))
            .context("starting the duty worker")?;
        Ok(Self {
            tx,
            thread: Some(thread),
            busy_us,
        })
    }

    /// Hands the worker the kept evidence of `round` to verify once it is final; returns at
    /// once (the worker may be in the middle of a replay).
    ///
    /// # Errors
    /// The worker has stopped (it panicked): a member that no longer verifies, judges or
    /// reports must not go on (as a juror it would be slashed for every missed vote).
    pub fn verify(&self, round: u32) -> Result<()> {
        if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
            bail!("the duty worker has stopped");
        }
        let _ = self.tx.send(DutyMsg::Verify(round));
        Ok(())
    }

    /// Seconds the worker spent in duty passes since the previous call (they ran beside the
    /// rounds, not within them).
    pub fn take_busy_secs(&self) -> f64 {
        self.busy_us.swap(0, Ordering::Relaxed) as f64 / 1e6
    }

    /// Tells the worker the pool is over and waits until it has finished its duties
    /// ([`Duty::finish`]).
    pub fn finish(&mut self, max_wait: Duration) {
        let _ = self.tx.send(DutyMsg::Finish(max_wait));
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::warn!("the duty worker panicked");
            }
        }
    }
}

impl Drop for DutyHandle {
    /// A member stopping without [`DutyHandle::finish`] (its `run` failed) tells the worker
    /// to stop after the pass under way, without waiting for it (the process is ending).
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.tx.send(DutyMsg::Stop);
        }
    }
}

/// The worker's loop: a pass at each finalized block (one pass for any number of blocks
/// finalized while the previous pass ran) or round handed over, or after [`IDLE_PASS`] without
/// either; after [`DutyMsg::Finish`], [`Duty::finish`]. Returns at [`DutyMsg::Stop`] (its
/// handle dropped: `run` failed) or when every sender is gone.
fn run<D: Duty>(mut duty: D, rx: &Receiver<DutyMsg>, busy_us: &AtomicU64) {
    loop {
        let mut finish = None;
        let mut stop = false;
        let mut take = |msg, duty: &mut D| match msg {
            DutyMsg::Finalized => {}
            DutyMsg::Round(round, action) => duty.told(round, action),
            DutyMsg::Resync => duty.resync(),
            DutyMsg::Unfollowed => duty.unfollowed(),
            DutyMsg::Verify(round) => duty.hand_over(round),
            DutyMsg::Finish(max_wait) => finish = Some(max_wait),
            DutyMsg::Stop => stop = true,
        };
        match rx.recv_timeout(IDLE_PASS) {
            Ok(msg) => take(msg, &mut duty),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(msg) = rx.try_recv() {
            take(msg, &mut duty);
        }
        if stop {
            return;
        }
        if let Some(max_wait) = finish {
            duty.finish(max_wait, busy_us);
            return;
        }
        timed_pass(&mut duty, busy_us);
    }
}

/// [`Duty::pass`], its time added to `busy_us` (microseconds).
pub(in crate::pool::member) fn timed_pass<D: Duty>(duty: &mut D, busy_us: &AtomicU64) {
    let t = Instant::now();
    duty.pass();
    busy_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, sync_channel, SyncSender};
    use std::sync::Mutex;

    const LONG: Duration = Duration::from_secs(30);

    /// A verifier whose replay of each handed-over round starts (reported on `started`) and
    /// then lasts until the test releases it (`release`): as long as the test wants.
    struct SlowReplays {
        queue: Vec<u32>,
        started: SyncSender<u32>,
        release: Receiver<()>,
        checked: Arc<Mutex<Vec<u32>>>,
        passes: Arc<AtomicU64>,
    }

    impl Duty for SlowReplays {
        fn hand_over(&mut self, round: u32) {
            self.queue.push(round);
        }
        fn told(&mut self, _: u32, _: Action) {}
        fn resync(&mut self) {}
        fn unfollowed(&mut self) {}
        fn pass(&mut self) {
            self.passes.fetch_add(1, Ordering::Relaxed);
            for round in std::mem::take(&mut self.queue) {
                let _ = self.started.send(round);
                if self.release.recv_timeout(LONG).is_ok() {
                    self.checked.lock().unwrap().push(round);
                }
            }
        }
        fn finish(&mut self, _: Duration, busy_us: &AtomicU64) {
            timed_pass(self, busy_us);
        }
    }

    struct Fixture {
        handle: DutyHandle,
        tx: Sender<DutyMsg>,
        started: Receiver<u32>,
        release: Sender<()>,
        checked: Arc<Mutex<Vec<u32>>>,
        passes: Arc<AtomicU64>,
    }

    fn fixture() -> Fixture {
        let (started_tx, started) = sync_channel(8);
        let (release, release_rx) = channel();
        let checked = Arc::new(Mutex::new(Vec::new()));
        let passes = Arc::new(AtomicU64::new(0));
        let duty = SlowReplays {
            queue: Vec::new(),
            started: started_tx,
            release: release_rx,
            checked: checked.clone(),
            passes: passes.clone(),
        };
        let (tx, rx) = channel();
        let handle = DutyHandle::start(duty, tx.clone(), rx).unwrap();
        Fixture {
            handle,
            tx,
            started,
            release,
            checked,
            passes,
        }
    }

    #[test]
    fn a_replay_longer_than_the_next_inner_phase_runs_beside_it() {
        let f = fixture();
        // The training thread hands round 1 over and goes on: the worker starts replaying it.
        f.handle.verify(1).unwrap();
        assert_eq!(f.started.recv_timeout(LONG), Ok(1));
        // Round 2's inner phase, exchange and hand-over run on this thread while the replay of
        // round 1 is still under way (it ends only when released below): a duty run on the
        // training thread would never get here.
        f.handle.verify(2).unwrap();
        assert!(
            f.checked.lock().unwrap().is_empty(),
            "round 1's replay still runs"
        );
        f.release.send(()).unwrap();
        // Round 2 is taken up by the next pass, once round 1's replay has ended.
        assert_eq!(f.started.recv_timeout(LONG), Ok(2));
        f.release.send(()).unwrap();
        let mut handle = f.handle;
        handle.finish(LONG);
        assert_eq!(*f.checked.lock().unwrap(), vec![1, 2]);
        assert!(handle.take_busy_secs() > 0.0);
    }

    /// A duty with a bug: its first pass panics.
    struct Panics;

    impl Duty for Panics {
        fn hand_over(&mut self, _: u32) {}
        fn told(&mut self, _: u32, _: Action) {}
        fn resync(&mut self) {}
        fn unfollowed(&mut self) {}
        fn pass(&mut self) {
            panic!("a bug in a duty");
        }
        fn finish(&mut self, _: Duration, _: &AtomicU64) {}
    }

    #[test]
    fn a_worker_that_stopped_refuses_the_next_round() {
        let mut f = fixture();
        f.handle.finish(LONG);
        assert!(f.handle.verify(3).is_err());
        // A worker that panicked: the member's next hand-over fails (its `run` ends) instead
        // of training on without verifying, judging or reporting.
        let (tx, rx) = channel();
        let handle = DutyHandle::start(Panics, tx, rx).unwrap();
        assert!(handle.verify(1).is_ok(), "the worker was running");
        let t = Instant::now();
        while handle.verify(2).is_ok() && t.elapsed() < LONG {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(handle.verify(2).is_err());
    }

    #[test]
    fn every_finalized_block_wakes_a_pass_and_a_dropped_handle_stops_the_worker() {
        let f = fixture();
        for _ in 0..3 {
            let before = f.passes.load(Ordering::Relaxed);
            f.tx.send(DutyMsg::Finalized).unwrap();
            let t = Instant::now();
            while f.passes.load(Ordering::Relaxed) == before && t.elapsed() < LONG {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(
                f.passes.load(Ordering::Relaxed) > before,
                "no pass after a block"
            );
        }
        // The member stopped (its `run` failed: the handle dropped) while the chain
        // subscription, which holds a sender, lives on: the worker's thread ends instead of
        // waiting for more blocks.
        let Fixture { mut handle, tx, .. } = f;
        let thread = handle.thread.take().unwrap();
        handle.thread = Some(std::thread::spawn(|| {})); // so that the drop tells the worker
        drop(handle);
        let t = Instant::now();
        while !thread.is_finished() && t.elapsed() < LONG {
            tx.send(DutyMsg::Finalized).unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(thread.is_finished(), "the worker outlived its member");
    }
}
