// Becomes a Synod validator, as an operator does it from Polkadot.js (docs/operator.md):
// rotate session keys on your own node, bond, set the keys on-chain, validate, then wait until
// your node authors a block after the session change.
//
// Usage: node become-validator.mjs [ws://127.0.0.1:9944] [//Suri] [bond in SYN]
//   the URL is YOUR validator node (started with --validator); the defaults are //Eve and the
//   chain's minimum validator bond. Prints one JSON line last; exit status 0 on success.
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import { cryptoWaitReady } from '@polkadot/util-crypto';
import { fail } from './lib/chain.mjs';
import { activeStake, becomeValidator, waitForAuthoredBlock } from './lib/validator.mjs';

const url = process.argv[2] ?? 'ws://127.0.0.1:9944';
const suri = process.argv[3] ?? '//Eve';
const bondSyn = BigInt(process.argv[4] ?? 0);
const UNIT = 10n ** 12n;

/** Gives up after 10 minutes whatever hangs (an unreachable node, a stuck transaction). */
const WATCHDOG_MS = 10 * 60 * 1000;

async function main() {
  setTimeout(() => fail(`gave up after ${WATCHDOG_MS / 60000} minutes`), WATCHDOG_MS).unref();
  await cryptoWaitReady();
  const provider = new WsProvider(url);
  const health = await provider.send('system_health', []).catch(() => null);
  if (health?.isSyncing) console.log('  (the node is still syncing: its reads may lag the chain)');
  const api = await ApiPromise.create({ provider, noInitWarn: true });
  const signer = new Keyring({ type: 'sr25519', ss58Format: api.registry.chainSS58 }).addFromUri(suri);
  const length = (await api.query.validatorSet.sessionLength()).toNumber();
  console.log(`${signer.address} becomes a validator via ${url} (sessions of ${length} blocks)`);
  const { keys, session } = await becomeValidator(api, provider, signer, bondSyn * UNIT);
  console.log(`  candidate in session ${session}; elected sets are queued one session ahead`);
  const authored = await waitForAuthoredBlock(api, signer.address, 6 * length);
  console.log(`  ok: authored block #${authored.block} in session ${authored.session}`);
  console.log(JSON.stringify({
    ok: true, account: signer.address, keys, validate_session: session,
    authored_block: authored.block, authored_session: authored.session,
    stake: (await activeStake(api, signer.address)).toString(),
  }));
  await api.disconnect();
}

main().catch((e) => fail(e.stack ?? String(e)));
