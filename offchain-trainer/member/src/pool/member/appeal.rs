//! Appeals: a member that loses a committee's ruling as a party (an honest accused ruled
//! guilty, an honest challenger whose challenge was ruled innocent) appeals it before it
//! executes (`docs/architecture.md`, step 7). The appeal period is short (`AppealPeriod`
//! blocks, the last `MIN_JURY_DELAY` of them closed to appeals), so the appeal is driven by the
//! chain's `Challenges.Ruled` event on the member's runtime ([`Appealer::on_ruled`], called
//! from the finalized-block subscription), not by the duty worker, whose pass may be busy with
//! a replay for longer than the period. The duty worker's jury pass still checks the rulings
//! it reads ([`Appealer::consider`]): a ruling whose event this process did not see (it was
//! restarting) is appealed there. Both paths share one [`Appealer`], so a challenge is
//! appealed at most once.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use synod_chain::types::{AccountId, AppealInfo, ChallengeInfo, Verdict};
use synod_chain::{calls, Chain, ChainError, Signer};

/// What an appeal needs of the chain: [`OnChain`] in a member, an in-memory chain in tests.
pub(super) trait AppealChain: Clone + Send + Sync + 'static {
    /// Challenge `id` while it is open.
    fn challenge(
        &self,
        id: u32,
    ) -> impl Future<Output = Result<Option<ChallengeInfo>, ChainError>> + Send;
    /// The appeal side of challenge `id` (in a pool with appeals).
    fn appeal_of(
        &self,
        id: u32,
    ) -> impl Future<Output = Result<Option<AppealInfo>, ChainError>> + Send;
    /// Submits our `Challenges.appeal(id)` and waits for its finality.
    fn appeal(&self, id: u32) -> impl Future<Output = Result<(), ChainError>> + Send;
}

/// The chain client and our signer.
#[derive(Clone)]
pub(super) struct OnChain {
    /// The chain client.
    pub chain: Chain,
    /// Our account's signer.
    pub signer: Signer,
}

impl AppealChain for OnChain {
    async fn challenge(&self, id: u32) -> Result<Option<ChallengeInfo>, ChainError> {
        self.chain.challenge(id).await
    }

    async fn appeal_of(&self, id: u32) -> Result<Option<AppealInfo>, ChainError> {
        self.chain.appeal_of(id).await
    }

    async fn appeal(&self, id: u32) -> Result<(), ChainError> {
        self.chain
            .submit(&calls::appeal(id), &self.signer)
            .await
            .map(|_| ())
    }
}

/// Appeals the rulings a member loses in its pool, each at most once (cheap to clone: the
/// record of what was appealed is shared).
#[derive(Clone)]
pub(super) struct Appealer<C> {
    chain: C,
    /// Our account.
    account: AccountId,
    /// Our pool: rulings of other pools are left to the processes that train in them.
    pool: u32,
    /// A member playing a fault (`MemberConfig::fault`) never appeals.
    plays_fault: bool,
    /// Challenges appealed, being appealed, or given up (too late, refused): not submitted
    /// again.
    done: Arc<Mutex<BTreeSet<u32>>>,
}

impl<C: AppealChain> Appealer<C> {
    /// The appealer of `account`, member of `pool`, through `chain`.
    pub fn new(chain: C, account: AccountId, pool: u32, plays_fault: bool) -> Self {
        Self {
            chain,
            account,
            pool,
            plays_fault,
            done: Arc::default(),
        }
    }

    /// On a `Challenges.Ruled` event for challenge `id` in finalized block `block`: reads the
    /// challenge and, when it is of our pool and we are a party to it, its ruling, and
    /// appeals it if we lost it ([`Self::consider`]). A failed read is logged (the duty
    /// worker's next jury pass reads it again).
    pub async fn on_ruled(&self, id: u32, block: u64) {
        if self.is_done(id) {
            return;
        }
        let read = async {
            let Some(c) = self.chain.challenge(id).await? else {
                return Ok(None);
            };
            let party = c.accused == self.account || c.challenger == self.account;
            if c.pool_id != self.pool || !party {
                return Ok(None);
            }
            let a = self.chain.appeal_of(id).await?;
            Ok::<_, ChainError>(a.map(|a| (c, a)))
        };
        match read.await {
            Ok(Some((c, a))) => self.consider(id, &c, &a, block).await,
            // Closed already (executed, or read from a node past its execution block), not
            // ours to appeal, or a pool without appeals: nothing to appeal.
            Ok(None) => {}
            Err(e) => tracing::warn!(challenge = id, "reading a ruling: {e}"),
        }
    }

    /// Appeals the ruling `a` of challenge `c` (`id`), read at finalized block `read_at`, when
    /// [`appeal_decision`] says so and it was not appealed by this process already. Too late
    /// or refused by the chain: logged once, not retried; any other failure (an RPC error) is
    /// retried by the next call.
    pub async fn consider(&self, id: u32, c: &ChallengeInfo, a: &AppealInfo, read_at: u64) {
        if c.pool_id != self.pool {
            return;
        }
        let decision = appeal_decision(c, a, &self.account, self.plays_fault, read_at);
        if decision == AppealDecision::NotOurs || !self.claim(id) {
            return;
        }
        let verdict = match decision {
            AppealDecision::Appeal(verdict) => verdict,
            AppealDecision::TooLate(verdict) => {
                tracing::warn!(
                    challenge = id,
                    ?verdict,
                    "ruling against us seen too late to appeal"
                );
                return;
            }
            AppealDecision::NotOurs => return,
        };
        match self.chain.appeal(id).await {
            Ok(()) => tracing::info!(challenge = id, ?verdict, "appealed the ruling"),
            Err(e)
                if e.is_module("Challenges", "NoRuling")
                    || e.is_module("Challenges", "AppealClosed")
                    || e.is_module("Challenges", "InsufficientAppealBond") =>
            {
                // Not retried: the ruling was appealed or executed, or the bond is missing
                // (an operator's matter, logged once).
                tracing::warn!(challenge = id, "cannot appeal: {e}");
            }
            Err(e) => {
                tracing::warn!(challenge = id, "appeal: {e}");
                self.release(id);
            }
        }
    }

    fn done(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.done.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_done(&self, id: u32) -> bool {
        self.done().contains(&id)
    }

    /// Takes challenge `id` for this call; `false` if another call has it.
    fn claim(&self, id: u32) -> bool {
        self.done().insert(id)
    }

    /// Gives challenge `id` back (its appeal failed and may be retried).
    fn release(&self, id: u32) {
        self.done().remove(&id);
    }

    /// Forgets the challenges below `id`: the duty worker's jury pass has seen each of them
    /// closed (or without an appeal side), so nothing of them is left to appeal and the record
    /// stays as small as the challenges still open.
    pub fn forget_below(&self, id: u32) {
        self.done().retain(|x| *x >= id);
    }
}

/// What a member does about a challenge's ruling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AppealDecision {
    /// Nothing: no ruling waits, it was appealed, we did not lose it, or we play a fault.
    NotOurs,
    /// We lost this ruling but the appeal committee's draw would no longer come from a block
    /// after our appeal's.
    TooLate(Verdict),
    /// Appeal it.
    Appeal(Verdict),
}

/// Whether `me` appeals the ruling `a` of challenge `c`, read at finalized block `read_at`. An
/// honest member appeals a ruling it lost: a guilty one against its own payload (it knows it
/// was honest), an innocent one on a challenge it opened (only on a failed replay). A member
/// playing a fault (`plays_fault`) never appeals. An appeal must land at least
/// `MIN_JURY_DELAY` blocks before the ruling executes.
fn appeal_decision(
    c: &ChallengeInfo,
    a: &AppealInfo,
    me: &AccountId,
    plays_fault: bool,
    read_at: u64,
) -> AppealDecision {
    let Some((verdict, executes_at)) = a.ruling.filter(|_| a.appellant.is_none()) else {
        return AppealDecision::NotOurs;
    };
    let lost = match verdict {
        Verdict::Guilty => c.accused == *me,
        Verdict::Innocent => c.challenger == *me,
        _ => false,
    };
    if !lost || plays_fault {
        AppealDecision::NotOurs
    } else if read_at + synod_protocol::timeline::MIN_JURY_DELAY > u64::from(executes_at) {
        AppealDecision::TooLate(verdict)
    } else {
        AppealDecision::Appeal(verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;
    use synod_chain::{FinalizedBlock, SynodEvent};
    use synod_protocol::Timeline;

    /// An in-memory chain: open challenges with their appeal sides; `appeal` records the call
    /// (and fails with `fail_next` first, if set).
    #[derive(Clone, Default)]
    struct FakeChain(Arc<Mutex<Fake>>);

    #[derive(Default)]
    struct Fake {
        challenges: BTreeMap<u32, (ChallengeInfo, AppealInfo)>,
        appeals: Vec<u32>,
        fail_next: Option<ChainError>,
        /// `appeal_of` reads so far.
        appeal_reads: u32,
    }

    impl FakeChain {
        fn with(id: u32, c: ChallengeInfo, a: AppealInfo) -> Self {
            let fake = Self::default();
            fake.0.lock().unwrap().challenges.insert(id, (c, a));
            fake
        }

        fn appeals(&self) -> Vec<u32> {
            self.0.lock().unwrap().appeals.clone()
        }
    }

    impl AppealChain for FakeChain {
        async fn challenge(&self, id: u32) -> Result<Option<ChallengeInfo>, ChainError> {
            Ok(self
                .0
                .lock()
                .unwrap()
                .challenges
                .get(&id)
                .map(|e| e.0.clone()))
        }

        async fn appeal_of(&self, id: u32) -> Result<Option<AppealInfo>, ChainError> {
            let mut f = self.0.lock().unwrap();
            f.appeal_reads += 1;
            Ok(f.challenges.get(&id).map(|e| e.1.clone()))
        }

        async fn appeal(&self, id: u32) -> Result<(), ChainError> {
            let mut f = self.0.lock().unwrap();
            match f.fail_next.take() {
                Some(e) => Err(e),
                None => {
                    f.appeals.push(id);
                    Ok(())
                }
            }
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn a_ruling_against_us_is_appealed_from_its_event_while_the_duty_worker_is_busy() {
        let rt = runtime();
        let chain = FakeChain::with(7, challenge(), ruled(Verdict::Guilty, 120));
        let appealer = Appealer::new(chain.clone(), account(1), 0, false);
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        // The duty worker never reads its messages: it is busy with a long replay.
        let (duty_tx, _busy_duty_worker) = std::sync::mpsc::channel();
        let (ticks, _watch) = super::super::watch::ChainWatch::new();
        let rounds = super::super::follow::PoolRounds::new(0, Timeline::for_pool(10, 5, 2, 20));
        let events = rt.spawn(super::super::follow::follow_chain(
            rx,
            rounds,
            ticks,
            None,
            duty_tx,
            appealer.clone(),
        ));
        let ruled_at_100 = FinalizedBlock {
            number: 100,
            events: vec![SynodEvent::Ruled {
                challenge: 7,
                verdict: Verdict::Guilty,
                executes_at: 120,
            }],
        };
        rt.block_on(async {
            tx.send(Ok(ruled_at_100)).await.unwrap();
            for _ in 0..500 {
                if !chain.appeals().is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        assert_eq!(chain.appeals(), [7], "appealed from the event");
        // The duty worker's later pass reads the same ruling (the appeal not yet final when it
        // read): not submitted twice.
        rt.block_on(appealer.consider(7, &challenge(), &ruled(Verdict::Guilty, 120), 101));
        assert_eq!(chain.appeals(), [7]);
        drop(tx);
        rt.block_on(events).unwrap();
    }

    #[test]
    fn rulings_we_won_or_of_another_pool_are_not_appealed() {
        let rt = runtime();
        let chain = FakeChain::with(7, challenge(), ruled(Verdict::Innocent, 120));
        // We are the accused, acquitted.
        rt.block_on(Appealer::new(chain.clone(), account(1), 0, false).on_ruled(7, 100));
        // Another pool's member of the same account, ruled against.
        let other = ChallengeInfo {
            pool_id: 1,
            ..challenge()
        };
        let guilty = ruled(Verdict::Guilty, 120);
        rt.block_on(
            Appealer::new(chain.clone(), account(1), 0, false).consider(7, &other, &guilty, 100),
        );
        assert!(chain.appeals().is_empty());
    }

    #[test]
    fn a_ruling_between_others_costs_one_read() {
        let rt = runtime();
        // Every trainer sees every `Ruled` event: one of another pool's challenge, or of a
        // challenge between two other accounts, reads the challenge and nothing more.
        let chain = FakeChain::with(7, challenge(), ruled(Verdict::Guilty, 120));
        rt.block_on(Appealer::new(chain.clone(), account(9), 0, false).on_ruled(7, 100));
        rt.block_on(Appealer::new(chain.clone(), account(1), 3, false).on_ruled(7, 100));
        assert_eq!(chain.0.lock().unwrap().appeal_reads, 0);
        assert!(chain.appeals().is_empty());
        // Ours: its ruling is read, and appealed.
        rt.block_on(Appealer::new(chain.clone(), account(1), 0, false).on_ruled(7, 100));
        assert_eq!(chain.0.lock().unwrap().appeal_reads, 1);
        assert_eq!(chain.appeals(), [7]);
    }

    #[test]
    fn closed_challenges_are_forgotten() {
        let appealer = Appealer::new(FakeChain::default(), account(1), 0, false);
        for id in [3, 5, 7] {
            assert!(appealer.claim(id));
        }
        appealer.forget_below(5);
        assert_eq!(*appealer.done(), BTreeSet::from([5, 7]));
    }

    #[test]
    fn a_failed_appeal_is_retried_and_a_refused_one_is_not() {
        let rt = runtime();
        let chain = FakeChain::with(7, challenge(), ruled(Verdict::Guilty, 120));
        let appealer = Appealer::new(chain.clone(), account(1), 0, false);
        chain.0.lock().unwrap().fail_next = Some(ChainError::Rpc("connection reset".into()));
        rt.block_on(appealer.on_ruled(7, 100));
        assert!(chain.appeals().is_empty());
        rt.block_on(appealer.on_ruled(7, 101));
        assert_eq!(chain.appeals(), [7], "retried after an RPC failure");

        let chain = FakeChain::with(7, challenge(), ruled(Verdict::Guilty, 120));
        let appealer = Appealer::new(chain.clone(), account(1), 0, false);
        chain.0.lock().unwrap().fail_next = Some(ChainError::Module {
            pallet: "Challenges".into(),
            error: "InsufficientAppealBond".into(),
            docs: String::new(),
        });
        rt.block_on(appealer.on_ruled(7, 100));
        rt.block_on(appealer.on_ruled(7, 101));
        assert!(chain.appeals().is_empty(), "refused once, not resubmitted");
    }

    fn account(b: u8) -> AccountId {
        AccountId::from([b; 32])
    }

    fn challenge() -> ChallengeInfo {
        ChallengeInfo {
            pool_id: 0,
            round: 1,
            accused: account(1),
            challenger: account(2),
            payload_digest: [0; 32],
            expires_at: 100,
            jury: Vec::new(),
        }
    }

    fn ruled(verdict: Verdict, executes_at: u32) -> AppealInfo {
        AppealInfo {
            ruling: Some((verdict, executes_at)),
            appellant: None,
        }
    }

    #[test]
    fn an_honest_member_appeals_exactly_the_rulings_it_lost_while_it_may() {
        let c = challenge();
        let (accused, challenger, juror) = (account(1), account(2), account(3));
        let guilty = ruled(Verdict::Guilty, 120);
        let innocent = ruled(Verdict::Innocent, 120);
        use AppealDecision::*;
        assert_eq!(
            appeal_decision(&c, &guilty, &accused, false, 100),
            Appeal(Verdict::Guilty)
        );
        assert_eq!(
            appeal_decision(&c, &innocent, &challenger, false, 100),
            Appeal(Verdict::Innocent)
        );
        // Won rulings, a juror's, and a member playing a fault: no appeal.
        assert_eq!(
            appeal_decision(&c, &guilty, &challenger, false, 100),
            NotOurs
        );
        assert_eq!(
            appeal_decision(&c, &innocent, &accused, false, 100),
            NotOurs
        );
        assert_eq!(appeal_decision(&c, &guilty, &juror, false, 100), NotOurs);
        assert_eq!(appeal_decision(&c, &guilty, &accused, true, 100), NotOurs);
        // No ruling yet, or appealed already.
        let voting = AppealInfo {
            ruling: None,
            appellant: None,
        };
        assert_eq!(appeal_decision(&c, &voting, &accused, false, 100), NotOurs);
        let appealed = AppealInfo {
            appellant: Some((accused, 1)),
            ..guilty.clone()
        };
        assert_eq!(
            appeal_decision(&c, &appealed, &accused, false, 100),
            NotOurs
        );
        // The last block that leaves the draw a later seed is `executes_at − 2`.
        assert_eq!(
            appeal_decision(&c, &guilty, &accused, false, 118),
            Appeal(Verdict::Guilty)
        );
        assert_eq!(
            appeal_decision(&c, &guilty, &accused, false, 119),
            TooLate(Verdict::Guilty)
        );
    }
}
