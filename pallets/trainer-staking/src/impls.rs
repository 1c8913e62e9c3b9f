//! The logic behind the calls, the [`TrainerStake`] implementation and `try_state`.

use crate::{pallet::*, Event};
use frame_support::{
	pallet_prelude::*,
	traits::{
		fungible::{Balanced, BalancedHold, MutateHold},
		tokens::{Imbalance, Precision},
		OnUnbalanced,
	},
};
use frame_system::pallet_prelude::BlockNumberFor;
use sp_runtime::{
	traits::{CheckedAdd, CheckedSub, SaturatedConversion, Saturating, Zero},
	Perbill,
};
use synod_primitives::{StakeCommitments, TrainerStake};

impl<T: Config> StakingLedger<T> {
	/// Active plus unbonding stake, in planck (what is held).
	pub fn total(&self) -> BalanceOf<T> {
		self.unlocking.iter().fold(self.active, |acc, c| acc.saturating_add(c.value))
	}
}

impl<T: Config> Pallet<T> {
	fn reason() -> T::RuntimeHoldReason {
		HoldReason::Staking.into()
	}

	pub(crate) fn do_bond(who: &T::AccountId, value: BalanceOf<T>) -> DispatchResult {
		ensure!(!value.is_zero(), Error::<T>::ZeroAmount);
		let mut ledger = Ledger::<T>::get(who)
			.unwrap_or(StakingLedger { active: Zero::zero(), unlocking: BoundedVec::new() });
		let active = ledger.active.checked_add(&value).ok_or(Error::<T>::Overflow)?;
		ensure!(active >= T::MinBond::get(), Error::<T>::BelowMinBond);
		let total = TotalStake::<T>::get().checked_add(&value).ok_or(Error::<T>::Overflow)?;
		T::Currency::hold(&Self::reason(), who, value)
			.map_err(|_| Error::<T>::InsufficientBalance)?;
		ledger.active = active;
		Ledger::<T>::insert(who, ledger);
		TotalStake::<T>::put(total);
		Self::deposit_event(Event::Bonded { who: who.clone(), amount: value });
		Ok(())
	}

	pub(crate) fn do_unbond(who: &T::AccountId, value: BalanceOf<T>) -> DispatchResult {
		ensure!(!value.is_zero(), Error::<T>::ZeroAmount);
		let mut ledger = Ledger::<T>::get(who).ok_or(Error::<T>::NotBonded)?;
		let remaining = ledger.active.checked_sub(&value).ok_or(Error::<T>::UnbondExceedsActive)?;
		ensure!(remaining >= T::Commitments::committed(who), Error::<T>::StakeCommitted);
		ensure!(remaining.is_zero() || remaining >= T::MinBond::get(), Error::<T>::BelowMinBond);
		let unlock_at =
			frame_system::Pallet::<T>::block_number().saturating_add(T::UnbondingPeriod::get());
		ledger
			.unlocking
			.try_push(UnlockChunk { value, unlock_at })
			.map_err(|_| Error::<T>::TooManyUnlockingChunks)?;
		ledger.active = remaining;
		Ledger::<T>::insert(who, ledger);
		Self::deposit_event(Event::Unbonded { who: who.clone(), amount: value, unlock_at });
		Ok(())
	}

	pub(crate) fn do_withdraw_unbonded(who: &T::AccountId) -> DispatchResult {
		let mut ledger = Ledger::<T>::get(who).ok_or(Error::<T>::NotBonded)?;
		let now = frame_system::Pallet::<T>::block_number();
		if let Some(until) = SlashableUntil::<T>::get(who) {
			ensure!(now >= until, Error::<T>::StakeBacksRound);
			SlashableUntil::<T>::remove(who);
		}
		let mut amount = BalanceOf::<T>::zero();
		ledger.unlocking.retain(|c| {
			if c.unlock_at <= now {
				amount = amount.saturating_add(c.value);
				false
			} else {
				true
			}
		});
		ensure!(!amount.is_zero(), Error::<T>::NothingToWithdraw);
		let released = T::Currency::release(&Self::reason(), who, amount, Precision::BestEffort)?;
		TotalStake::<T>::mutate(|t| *t = t.saturating_sub(released));
		if ledger.active.is_zero() && ledger.unlocking.is_empty() {
			Ledger::<T>::remove(who);
			SlashableUntil::<T>::remove(who);
		} else {
			Ledger::<T>::insert(who, ledger);
		}
		Self::deposit_event(Event::Withdrawn { who: who.clone(), amount: released });
		Ok(())
	}

	/// Takes `amount` off `ledger`: active stake first, then the newest unbonding chunks.
	fn reduce_ledger(ledger: &mut StakingLedger<T>, mut amount: BalanceOf<T>) {
		let from_active = amount.min(ledger.active);
		ledger.active = ledger.active.saturating_sub(from_active);
		amount = amount.saturating_sub(from_active);
		for chunk in ledger.unlocking.iter_mut().rev() {
			if amount.is_zero() {
				break;
			}
			let cut = amount.min(chunk.value);
			chunk.value = chunk.value.saturating_sub(cut);
			amount = amount.saturating_sub(cut);
		}
		ledger.unlocking.retain(|c| !c.value.is_zero());
	}

	/// Checks that each ledger's total equals the account's staking hold and that
	/// [`TotalStake`] is their sum.
	pub fn do_try_state() -> Result<(), sp_runtime::TryRuntimeError> {
		use frame_support::traits::fungible::InspectHold;
		let mut sum = BalanceOf::<T>::zero();
		for (who, ledger) in Ledger::<T>::iter() {
			let held = T::Currency::balance_on_hold(&Self::reason(), &who);
			ensure!(held == ledger.total(), "staking hold differs from the ledger total");
			ensure!(!ledger.total().is_zero(), "empty ledger kept in storage");
		}
		for (who, _) in SlashableUntil::<T>::iter() {
			ensure!(Ledger::<T>::contains_key(&who), "slashable horizon without a ledger");
		}
		for (_, ledger) in Ledger::<T>::iter() {
			sum = sum.saturating_add(ledger.total());
		}
		ensure!(sum == TotalStake::<T>::get(), "TotalStake differs from the sum of ledgers");
		Ok(())
	}
}

impl<T: Config> TrainerStake<T::AccountId> for Pallet<T> {
	type Balance = BalanceOf<T>;

	fn active_stake(who: &T::AccountId) -> BalanceOf<T> {
		Ledger::<T>::get(who).map(|l| l.active).unwrap_or_default()
	}

	fn held_stake(who: &T::AccountId) -> BalanceOf<T> {
		Ledger::<T>::get(who).map(|l| l.total()).unwrap_or_default()
	}

	fn keep_slashable(who: &T::AccountId, until: synod_primitives::protocol::Block) {
		if !Ledger::<T>::contains_key(who) {
			return;
		}
		let until: BlockNumberFor<T> = until.saturated_into();
		SlashableUntil::<T>::mutate(who, |u| {
			if u.is_none_or(|old| old < until) {
				*u = Some(until);
			}
		});
	}

	fn slash(
		who: &T::AccountId,
		amount: BalanceOf<T>,
		reporter: Option<(&T::AccountId, Perbill)>,
	) -> BalanceOf<T> {
		let Some(mut ledger) = Ledger::<T>::get(who) else {
			return Zero::zero();
		};
		let amount = amount.min(ledger.total());
		if amount.is_zero() {
			return Zero::zero();
		}
		let (credit, _) =
			<T::Currency as BalancedHold<T::AccountId>>::slash(&Self::reason(), who, amount);
		let slashed = credit.peek();
		Self::reduce_ledger(&mut ledger, slashed);
		TotalStake::<T>::mutate(|t| *t = t.saturating_sub(slashed));
		if ledger.total().is_zero() {
			Ledger::<T>::remove(who);
			SlashableUntil::<T>::remove(who);
		} else {
			Ledger::<T>::insert(who, ledger);
		}
		let mut reporter_amount = BalanceOf::<T>::zero();
		let rest = match reporter {
			Some((r, share)) => {
				let (to_reporter, rest) = credit.split(share.mul_floor(slashed));
				let offered = to_reporter.peek();
				match <T::Currency as Balanced<T::AccountId>>::resolve(r, to_reporter) {
					Ok(()) => {
						reporter_amount = offered;
						rest
					},
					// The reporter cannot receive it (e.g. below the existential deposit).
					Err(back) => rest.merge(back),
				}
			},
			None => credit,
		};
		T::Slash::on_unbalanced(rest);
		Self::deposit_event(Event::Slashed {
			who: who.clone(),
			amount: slashed,
			reporter: reporter.map(|(r, _)| r.clone()),
			reporter_amount,
		});
		slashed
	}
}
