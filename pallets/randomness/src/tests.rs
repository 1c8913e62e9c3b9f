//! The VRF chain on a one-pallet test runtime: authors keyed by slot, blocks built as the
//! executive builds them (`on_initialize`, the inherent, `on_finalize`), `try_state` after each.

use crate::{self as pallet_randomness, *};
use frame_support::inherent::{InherentData, ProvideInherent};
use frame_support::{
	assert_noop, assert_ok, derive_impl, parameter_types,
	traits::{Hooks, UnfilteredDispatchable},
};
use sp_core::{sr25519::Pair, Pair as _};
use sp_runtime::BuildStorage;
use std::cell::RefCell;

type Block = frame_system::mocking::MockBlock<Test>;

#[frame_support::runtime]
mod runtime {
	#[runtime::runtime]
	#[runtime::derive(RuntimeCall, RuntimeEvent, RuntimeError, RuntimeOrigin, RuntimeTask)]
	pub struct Test;
	#[runtime::pallet_index(0)]
	pub type System = frame_system;
	#[runtime::pallet_index(1)]
	pub type Randomness = pallet_randomness;
}

#[derive_impl(frame_system::config_preludes::TestDefaultConfig)]
impl frame_system::Config for Test {
	type Block = Block;
}

thread_local! {
	/// The authorities, in slot order.
	static AUTHORS: RefCell<Vec<Pair>> = const { RefCell::new(Vec::new()) };
	/// The slot of the block being built.
	static SLOT: RefCell<Option<u64>> = const { RefCell::new(None) };
}

/// `authorities[slot % len]`, as the runtime reads Aura.
pub struct TestSlotAuthor;
impl frame_support::traits::Get<Option<(u64, sr25519::Public)>> for TestSlotAuthor {
	fn get() -> Option<(u64, sr25519::Public)> {
		let slot = SLOT.with(|s| *s.borrow())?;
		AUTHORS.with(|a| {
			let a = a.borrow();
			let len = a.len() as u64;
			(len > 0).then(|| (slot, a[(slot % len) as usize].public()))
		})
	}
}

parameter_types! {
	pub const KeptBlocks: u64 = 8;
}

impl Config for Test {
	type SlotAuthor = TestSlotAuthor;
	type KeptBlocks = KeptBlocks;
	type WeightInfo = ();
}

fn pair(i: u8) -> Pair {
	Pair::from_seed(&[i; 32])
}

pub(crate) fn new_test_ext(authors: usize) -> sp_io::TestExternalities {
	AUTHORS.with(|a| *a.borrow_mut() = (0..authors as u8).map(|i| pair(i + 1)).collect());
	SLOT.with(|s| *s.borrow_mut() = None);
	let t = frame_system::GenesisConfig::<Test>::default().build_storage().expect("storage");
	let mut ext = sp_io::TestExternalities::new(t);
	ext.execute_with(|| System::set_block_number(1));
	ext
}

/// The proof the author of `slot` makes (what the node's keystore signs).
fn prove(signer: &Pair, slot: u64) -> VrfProof {
	crate::prove(signer, &Current::<Test>::get(), slot)
}

fn author_of(slot: u64) -> Pair {
	AUTHORS.with(|a| {
		let a = a.borrow();
		a[(slot % a.len() as u64) as usize].clone()
	})
}

/// Opens the next block at `slot` (`on_initialize` after the parent's `on_finalize`).
fn open_block(slot: u64) -> u64 {
	open_block_at(Some(slot))
}

/// Opens the next block, with an Aura slot or none.
fn open_block_at(slot: Option<u64>) -> u64 {
	let parent = System::block_number();
	Randomness::on_finalize(parent);
	let n = parent + 1;
	System::set_block_number(n);
	SLOT.with(|s| *s.borrow_mut() = slot);
	Randomness::on_initialize(n);
	n
}

/// Builds a block at `slot` with its author's inherent, as the node would.
fn author_block(slot: u64) -> [u8; 32] {
	open_block(slot);
	assert_ok!(Randomness::note(RuntimeOrigin::none(), prove(&author_of(slot), slot)));
	Randomness::do_try_state(System::block_number()).expect("try_state");
	Current::<Test>::get()
}

#[test]
fn each_block_chains_its_authors_vrf_and_history_keeps_the_last_blocks() {
	new_test_ext(3).execute_with(|| {
		let mut seen = Vec::new();
		for slot in 10..30 {
			seen.push(author_block(slot));
		}
		Randomness::on_finalize(System::block_number());
		let n = System::block_number();
		assert_eq!(History::<Test>::get(n), Some(*seen.last().expect("seen")));
		assert_eq!(History::<Test>::get(n - 7), Some(seen[seen.len() - 8]));
		assert_eq!(History::<Test>::get(n - 8), None, "older than KeptBlocks");
		let distinct: std::collections::BTreeSet<_> = seen.iter().collect();
		assert_eq!(distinct.len(), seen.len());
		assert_eq!(
			<Randomness as synod_primitives::RandomnessAt<u64>>::randomness_at(n - 1),
			Some(seen[seen.len() - 2])
		);
		Randomness::do_try_state(n).expect("try_state");
	});
}

#[test]
fn a_proof_by_anyone_but_the_slot_author_is_refused() {
	new_test_ext(3).execute_with(|| {
		open_block(7);
		let outsider = pair(99);
		let wrong_author = author_of(8);
		for signer in [outsider, wrong_author] {
			assert_noop!(
				Randomness::note(RuntimeOrigin::none(), prove(&signer, 7)),
				Error::<Test>::BadProof
			);
		}
		// Right key, wrong slot: another input.
		assert_noop!(
			Randomness::note(RuntimeOrigin::none(), prove(&author_of(7), 10)),
			Error::<Test>::BadProof
		);
		// Garbage bytes are a typed error, not a panic.
		let garbage = VrfProof { pre_output: [0xff; 32], proof: [0xff; 64] };
		assert_noop!(Randomness::note(RuntimeOrigin::none(), garbage), Error::<Test>::BadProof);
		assert_ok!(Randomness::note(RuntimeOrigin::none(), prove(&author_of(7), 7)));
	});
}

#[test]
fn one_note_per_block_and_only_as_an_inherent() {
	new_test_ext(2).execute_with(|| {
		open_block(4);
		let proof = prove(&author_of(4), 4);
		assert!(Randomness::note(RuntimeOrigin::signed(1), proof.clone()).is_err());
		assert_ok!(Randomness::note(RuntimeOrigin::none(), proof.clone()));
		assert_noop!(Randomness::note(RuntimeOrigin::none(), proof), Error::<Test>::NotExpected);
		// Without a slot author (no Aura slot) nothing can be noted.
		open_block_at(None);
		assert_noop!(
			Randomness::note(RuntimeOrigin::none(), prove(&author_of(5), 5)),
			Error::<Test>::NotExpected
		);
	});
}

#[test]
fn the_inherent_is_made_from_the_providers_data_and_required() {
	new_test_ext(2).execute_with(|| {
		open_block(6);
		let proof = prove(&author_of(6), 6);
		let mut data = InherentData::new();
		assert!(Randomness::create_inherent(&data).is_none());
		data.put_data(INHERENT_IDENTIFIER, &proof).expect("put");
		let call = Randomness::create_inherent(&data).expect("inherent");
		assert!(Randomness::is_inherent(&call));
		assert!(matches!(Randomness::is_inherent_required(&data), Ok(Some(_))));
		assert_ok!(call.dispatch_bypass_filter(RuntimeOrigin::none()));
	});
}

/// The seed a grinding author of block `n` can reach: today's seeds are the randomness after
/// that block; the attacker varies everything it controls about its block (contents, and so
/// the block hash) and also tries skipping its slot.
#[test]
fn an_author_grinding_its_block_gets_at_most_two_seeds() {
	new_test_ext(4).execute_with(|| {
		for slot in 1..6 {
			author_block(slot);
		}
		let attacker_slot = 6;
		let mut seeds = std::collections::BTreeSet::new();
		for contents in 0..1_000u32 {
			let seed = frame_support::storage::with_transaction_unchecked(|| {
				open_block(attacker_slot);
				// Another block: the header (and a block-hash seed) commits to the contents.
				frame_system::Pallet::<Test>::deposit_log(sp_runtime::DigestItem::Other(
					contents.to_le_bytes().to_vec(),
				));
				assert_ok!(Randomness::note(
					RuntimeOrigin::none(),
					prove(&author_of(attacker_slot), attacker_slot)
				));
				let seed = Current::<Test>::get();
				frame_support::storage::TransactionOutcome::Rollback(seed)
			});
			seeds.insert(seed);
		}
		// Skipping: the next slot's (honest) author fills the block.
		let skipped = frame_support::storage::with_transaction_unchecked(|| {
			frame_support::storage::TransactionOutcome::Rollback(author_block(attacker_slot + 1))
		});
		seeds.insert(skipped);
		println!("{{\"block_contents_tried\":1000,\"distinct_seeds\":{}}}", seeds.len());
		assert_eq!(seeds.len() as u32, SEED_OPTIONS, "publish or skip, nothing else");
	});
}

/// The benchmark's fixed proof (`benchmarking.rs`) still verifies: made by [`pair`]`(1)` over
/// zero randomness at slot 0.
#[test]
fn the_benchmark_proof_verifies() {
	let (public, previous, slot, proof) = crate::benchmarking_vector();
	assert_eq!(public, pair(1).public().0);
	assert!(verify(&sr25519::Public::from_raw(public), &previous, slot, &proof).is_some());
}

/// A block whose slot has an author but that carries no VRF is invalid (as a block without a
/// timestamp): the author cannot keep the parent's randomness by leaving the inherent out.
#[test]
#[should_panic(expected = "must carry its VRF randomness inherent")]
fn a_block_without_its_vrf_is_invalid() {
	new_test_ext(2).execute_with(|| {
		open_block(3);
		Randomness::on_finalize(System::block_number());
	});
}
