// Helpers shared by the Polkadot.js scripts: submit a signed call and wait for its block with
// the module error decoded from the metadata (section, name, doc string), checks that print
// `ok:` lines or exit non-zero, event fields by name, and polling by blocks.

/** Every `section.method` submitted so far. */
export const submitted = new Set();
/** Every module error `expectError` saw, with its doc string. */
export const decodedErrors = [];

export function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}
export function check(cond, msg) {
  if (!cond) fail(msg);
  console.log(`  ok: ${msg}`);
}

/** How long a submitted transaction may take to reach a block, in ms. */
const SUBMIT_TIMEOUT_MS = 120_000;

/**
 * Signs and submits `tx`, resolves when it is in a block: { events, error }; rejects when the
 * pool drops it or after SUBMIT_TIMEOUT_MS.
 */
export function submit(api, signer, tx) {
  submitted.add(`${tx.method.section}.${tx.method.method}`);
  return new Promise((resolveTx, rejectTx) => {
    let unsub;
    const timer = setTimeout(() => {
      if (unsub) unsub();
      rejectTx(new Error(`${tx.method.section}.${tx.method.method} not in a block within ${SUBMIT_TIMEOUT_MS / 1000} s`));
    }, SUBMIT_TIMEOUT_MS);
    const resolve = (v) => { clearTimeout(timer); resolveTx(v); };
    const reject = (e) => { clearTimeout(timer); rejectTx(e); };
    tx.signAndSend(signer, { nonce: -1 }, (result) => {
      const { status, events, dispatchError } = result;
      if (status.isInBlock || status.isFinalized) {
        let error = null;
        if (dispatchError) {
          if (dispatchError.isModule) {
            const meta = api.registry.findMetaError(dispatchError.asModule);
            error = { section: meta.section, name: meta.name, docs: meta.docs.join(' ').trim() };
          } else {
            error = { section: 'dispatch', name: dispatchError.toString(), docs: '' };
          }
        }
        if (unsub) unsub();
        resolve({ events: events.map((e) => e.event), error });
      } else if (status.isInvalid || status.isDropped || status.isUsurped) {
        if (unsub) unsub();
        reject(new Error(`transaction ${status.type}`));
      }
    }).then((u) => { unsub = u; }, reject);
  });
}

export async function ok(api, signer, tx, what) {
  const r = await submit(api, signer, tx);
  if (r.error) fail(`${what}: ${r.error.section}.${r.error.name} (${r.error.docs})`);
  console.log(`  ok: ${what}`);
  return r.events;
}

export async function expectError(api, signer, tx, section, name) {
  const r = await submit(api, signer, tx);
  if (!r.error) fail(`${section}.${name} expected, the call succeeded`);
  if (r.error.section !== section || r.error.name !== name) {
    fail(`${section}.${name} expected, got ${r.error.section}.${r.error.name}`);
  }
  if (!r.error.docs) fail(`${section}.${name} has no doc string`);
  decodedErrors.push(`${section}.${name}`);
  console.log(`  ok: ${section}.${name} — "${r.error.docs}"`);
}

/**
 * Submits `tx` and expects the transaction pool to refuse it with `section.name`: a commit or a
 * vote that would fail is refused before it takes block space (the runtime's `CheckDutyCall`),
 * its pallet error's index carried as `Invalid Transaction: Custom error: N`.
 */
export async function expectRefused(api, signer, tx, section, name) {
  let refusal = null;
  try {
    await submit(api, signer, tx);
  } catch (e) {
    refusal = String(e.message ?? e);
  }
  if (refusal === null) fail(`${section}.${name} refusal expected, the call was included`);
  const code = /Custom error: (\d+)/.exec(refusal);
  if (!code) fail(`${section}.${name} refusal expected, got "${refusal}"`);
  const meta = api.registry.findMetaError(new Uint8Array([tx.callIndex[0], Number(code[1])]));
  if (meta.section !== section || meta.name !== name) {
    fail(`${section}.${name} refusal expected, got ${meta.section}.${meta.name}`);
  }
  decodedErrors.push(`${section}.${name}`);
  console.log(`  ok: refused by the pool: ${section}.${name} — "${meta.docs.join(' ').trim()}"`);
}

export function find(events, section, method) {
  return events.find((e) => e.section === section && e.method === method);
}

/** An event field by name (`event.data.hash` would be the Codec's own blake2 hash). */
export function field(event, name) {
  const i = event.meta.fields.findIndex((f) => f.name.unwrap().toString() === name);
  if (i < 0) fail(`${event.section}.${event.method} has no field ${name}`);
  return event.data[i];
}

/** Polls `probe` every second until it returns true; fails after `maxBlocks` new blocks. */
export async function waitUntil(api, what, probe, maxBlocks) {
  const best = async () => (await api.rpc.chain.getHeader()).number.toNumber();
  const start = await best();
  while (!(await probe())) {
    if ((await best()) - start > maxBlocks) fail(`${what} not seen within ${maxBlocks} blocks`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
