//! Cross-pallet tests of Synod's round protocol on the one test runtime ([`mock`]):
//!
//! - `attacks`: one test per attack of `docs/architecture.md`'s threat model, named after it; each
//!   fails on a chain without the corresponding defence and shows that nothing is lost.
//! - `properties`: random call sequences from many accounts over two pools, checking every
//!   pallet's `try_state` and conservation of issuance after every block.
#![cfg(test)]

pub mod mock;

mod attacks;
mod properties;
