//! Exact integer helpers: `a × b / c` without overflow, parts per billion.

/// 100 % in parts per billion (the unit of quorum and shares, as `sp_arithmetic::Perbill`).
pub const PPB: u32 = 1_000_000_000;

const LOW: u128 = u64::MAX as u128;

/// The 256-bit product `a × b` as `(high, low)` 128-bit words.
fn mul_wide(a: u128, b: u128) -> (u128, u128) {
	let (a1, a0) = (a >> 64, a & LOW);
	let (b1, b0) = (b >> 64, b & LOW);
	// Each partial product is < 2^128; `mid` < 2^66.
	let p00 = a0 * b0;
	let p01 = a0 * b1;
	let p10 = a1 * b0;
	let p11 = a1 * b1;
	let mid = (p00 >> 64) + (p01 & LOW) + (p10 & LOW);
	let low = (p00 & LOW) | (mid << 64);
	let high = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
	(high, low)
}

/// `⌊a × b / c⌋`, exact for every input (256-bit intermediate).
///
/// Returns `None` if `c == 0` or the quotient does not fit in `u128`.
pub fn mul_div_floor(a: u128, b: u128, c: u128) -> Option<u128> {
	if c == 0 {
		return None;
	}
	let (high, low) = mul_wide(a, b);
	if high >= c {
		return None;
	}
	// Long division of (high, low) by c, one bit of `low` at a time; `rem` < c throughout.
	let mut rem = high;
	let mut quotient = 0u128;
	for bit in (0..128).rev() {
		let carry = rem >> 127;
		rem = (rem << 1) | ((low >> bit) & 1);
		if carry == 1 || rem >= c {
			rem = rem.wrapping_sub(c);
			quotient |= 1 << bit;
		}
	}
	Some(quotient)
}

/// `⌊value × ppb / 10⁹⌋`: a share of `value` in parts per billion (clamped to 100 %).
pub fn ppb_floor(value: u128, ppb: u32) -> u128 {
	let ppb = u128::from(ppb.min(PPB));
	let unit = u128::from(PPB);
	// value = hi·10⁹ + lo, so value·p/10⁹ = hi·p + lo·p/10⁹, no intermediate overflow.
	(value / unit) * ppb + (value % unit) * ppb / unit
}

/// `⌈value × ppb / 10⁹⌉`: the smallest amount that is at least `ppb` of `value`.
pub fn ppb_ceil(value: u128, ppb: u32) -> u128 {
	let ppb = u128::from(ppb.min(PPB));
	let unit = u128::from(PPB);
	(value / unit) * ppb + ((value % unit) * ppb).div_ceil(unit)
}

#[cfg(test)]
mod tests {
	use super::*;
	use proptest::prelude::*;

	#[test]
	fn mul_div_extremes() {
		assert_eq!(mul_div_floor(u128::MAX, u128::MAX, u128::MAX), Some(u128::MAX));
		assert_eq!(mul_div_floor(u128::MAX, 2, 1), None);
		assert_eq!(mul_div_floor(u128::MAX, 3, 4), Some(u128::MAX / 4 * 3 + 2));
		assert_eq!(mul_div_floor(7, 0, 3), Some(0));
		assert_eq!(mul_div_floor(7, 5, 0), None);
	}

	#[test]
	fn ppb_rounding() {
		assert_eq!(ppb_floor(3, 666_666_667), 2);
		assert_eq!(ppb_ceil(3, 666_666_666), 2);
		assert_eq!(ppb_ceil(3_000, 666_666_666), 2_000);
		assert_eq!(ppb_ceil(u128::MAX, PPB), u128::MAX);
		assert_eq!(ppb_floor(u128::MAX, PPB), u128::MAX);
		assert_eq!(ppb_ceil(10, u32::MAX), 10, "above 100 % is clamped");
	}

	proptest! {
		#[test]
		fn mul_div_matches_u128_when_it_fits(a in any::<u64>(), b in any::<u64>(), c in 1..u128::MAX) {
			let exact = u128::from(a) * u128::from(b) / c;
			prop_assert_eq!(mul_div_floor(u128::from(a), u128::from(b), c), Some(exact));
		}

		#[test]
		fn mul_div_is_consistent(a in any::<u128>(), b in any::<u128>(), c in 1..u128::MAX) {
			if let Some(q) = mul_div_floor(a, b, c) {
				// q·c ≤ a·b < (q+1)·c, checked in 256 bits.
				let (qh, ql) = mul_wide(q, c);
				let (ph, pl) = mul_wide(a, b);
				prop_assert!((qh, ql) <= (ph, pl));
				let (q1h, q1l) = {
					let (h, l) = mul_wide(q, c);
					let (l2, carry) = l.overflowing_add(c);
					(h + u128::from(carry), l2)
				};
				prop_assert!((ph, pl) < (q1h, q1l));
			} else {
				prop_assert!(mul_wide(a, b).0 >= c);
			}
		}

		#[test]
		fn ppb_ceil_is_the_least_sufficient_amount(v in any::<u128>(), p in 0..=PPB) {
			let ceil = ppb_ceil(v, p);
			let floor = ppb_floor(v, p);
			prop_assert!(ceil == floor || ceil == floor + 1);
			prop_assert!(ceil <= v);
		}
	}
}
