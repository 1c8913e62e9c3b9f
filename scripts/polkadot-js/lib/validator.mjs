// The operator's path to validating, with Polkadot.js against the operator's own node:
//   author_rotateKeysWithOwner (fresh Aura + GRANDPA keys in the node's keystore, with a proof
//   that the account owns them) → trainerStaking.bond (up to the bond asked, at least
//   validatorSet.minValidatorBond) → session.setKeys(keys, proof) → validatorSet.validate.
// pallet-session queues each elected set one session ahead: the account is in session.validators
// from the start of the session after next, and then authors blocks in its Aura slots.
import { decodeAddress } from '@polkadot/util-crypto';
import { u8aToHex } from '@polkadot/util';
import { check, fail, find, ok } from './chain.mjs';

/** Active stake of `address` in planck (0 when not bonded). */
export async function activeStake(api, address) {
  const ledger = await api.query.trainerStaking.ledger(address);
  return ledger.isSome ? ledger.unwrap().active.toBigInt() : 0n;
}

/**
 * Makes `signer` a validator candidate with at least `bond` planck bonded (default: the chain's
 * minimum). `api` and its WsProvider `provider` must be connected to the node that will author
 * (its keystore receives the keys; author_* RPCs are allowed on localhost). Returns { keys, session } (hex keys, session
 * index when `validate` was included).
 */
export async function becomeValidator(api, provider, signer, bond = 0n) {
  const min = api.consts.validatorSet.minValidatorBond.toBigInt();
  const want = bond > min ? bond : min;
  const owner = u8aToHex(decodeAddress(signer.address));
  const generated = await provider.send('author_rotateKeysWithOwner', [owner]);
  check(typeof generated?.keys === 'string' && generated.keys.length === 2 + 2 * 64,
    `author_rotateKeysWithOwner: Aura + GRANDPA keys (64 bytes) ${generated?.keys}`);
  if (!generated.proof) fail('the node gave no ownership proof for the keys');
  const active = await activeStake(api, signer.address);
  if (active < want) {
    await ok(api, signer, api.tx.trainerStaking.bond(want - active), `trainerStaking.bond(${want - active} planck)`);
  }
  await ok(api, signer, api.tx.session.setKeys(generated.keys, generated.proof), 'session.setKeys(keys, proof)');
  const events = await ok(api, signer, api.tx.validatorSet.validate(), 'validatorSet.validate()');
  check(!!find(events, 'validatorSet', 'Validating'), 'validatorSet.Validating emitted');
  const session = (await api.query.session.currentIndex()).toNumber();
  return { keys: generated.keys, session };
}

/**
 * Follows new heads until `address` is in session.validators and a block authored by it is
 * imported; rejects after `maxBlocks` blocks or when the subscription fails. Unsubscribes
 * when settled. Returns { session, block } of that block.
 */
export function waitForAuthoredBlock(api, address, maxBlocks) {
  return new Promise((resolve, reject) => {
    let start = null;
    let inSet = false;
    let settled = false;
    let unsub = null;
    const settle = (f, v) => {
      if (settled) return;
      settled = true;
      if (unsub) unsub();
      f(v);
    };
    api.derive.chain.subscribeNewHeads((header) => {
      if (settled) return;
      const n = header.number.toNumber();
      start ??= n;
      if (n - start > maxBlocks) {
        settle(reject, new Error(`no block authored by ${address} within ${maxBlocks} blocks`));
        return;
      }
      (async () => {
        if (!inSet) {
          const validators = (await api.query.session.validators()).map((v) => v.toString());
          if (validators.includes(address)) {
            inSet = true;
            console.log(`  ok: in session.validators from block #${n} (${validators.length} validators)`);
          }
        }
        if (inSet && header.author?.toString() === address) {
          const session = (await api.query.session.currentIndex()).toNumber();
          settle(resolve, { session, block: n });
        }
      })().catch((e) => settle(reject, e));
    }).then((u) => {
      unsub = u;
      if (settled) u();
    }, (e) => settle(reject, e));
  });
}
