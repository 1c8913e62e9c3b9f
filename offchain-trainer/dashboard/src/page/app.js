// Synod dashboard: reads the chain with @polkadot/api (window.polkadotApi, the UMD bundle
// served under /vendor/) and the trainers' validation loss from /api/trainers (scraped by
// `synod-trainer dashboard`). No build step.
'use strict';

const { ApiPromise, WsProvider } = window.polkadotApi;
const UNIT = 10n ** 12n; // planck per SYN
const COLOURS = ['#1c7ed6', '#e8590c', '#2f9e44', '#ae3ec9', '#f08c00', '#0ca678', '#d6336c', '#5c7cfa'];

const MAX_SLASHES = 200;
const state = { api: null, selected: null, slashes: [], acquittals: [], slashBlocks: new Set(), trainers: [], refreshing: false, pending: false };
const $ = (id) => document.getElementById(id);

function syn(planck) {
  const p = BigInt(planck);
  const milli = (p % UNIT) / (UNIT / 1000n);
  return milli === 0n ? `${p / UNIT}` : `${p / UNIT}.${milli.toString().padStart(3, '0')}`;
}
const short = (s) => (s.length <= 14 ? s : `${s.slice(0, 6)}…${s.slice(-4)}`);
function cell(text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}
function row(cells, cls) {
  const tr = document.createElement('tr');
  if (cls) tr.className = cls;
  cells.forEach((c) => tr.appendChild(c));
  return tr;
}
function fill(tbody, rows, empty, cols) {
  tbody.replaceChildren(...(rows.length ? rows : [row([Object.assign(cell(empty, 'empty'), { colSpan: cols })])]));
}

function nodeDown(rpc, why) {
  const b = $('node-down');
  b.textContent = `Cannot reach the Synod node at ${rpc} (${why}). Is synod-node running? Retrying every 2 s; the tables below show the last state read.`;
  b.hidden = false;
  $('chain').textContent = 'disconnected';
}
function nodeUp() {
  $('node-down').hidden = true;
}

async function main() {
  const cfg = await (await fetch('/config.json')).json();
  $('endpoint').textContent = cfg.rpc;
  const provider = new WsProvider(cfg.rpc, 2000);
  provider.on('disconnected', () => nodeDown(cfg.rpc, 'connection lost'));
  provider.on('error', () => nodeDown(cfg.rpc, 'connection refused'));
  provider.on('connected', nodeUp);
  setTimeout(() => provider.isConnected || nodeDown(cfg.rpc, 'no answer'), 4000);
  const api = await ApiPromise.create({ provider, throwOnConnect: false, noInitWarn: true });
  state.api = api;
  const pallets = ['trainingPools', 'checkpoints', 'challenges', 'trainerStaking'];
  if (pallets.some((p) => !api.query[p])) {
    nodeDown(cfg.rpc, `not a Synod chain: it lacks one of the pallets ${pallets.join(', ')}`);
    return;
  }
  const [chain, version] = await Promise.all([api.rpc.system.chain(), api.rpc.system.version()]);
  state.chainName = `${chain} (synod-node ${version})`;
  // Slashes and the verdicts other than Guilty (the chain stores convictions only) are events,
  // not storage: collected from finalized blocks while the page is open.
  api.rpc.chain.subscribeFinalizedHeads(async (head) => {
    const key = head.hash.toHex();
    if (state.slashBlocks.has(key)) return;
    state.slashBlocks.add(key);
    const records = await (await api.at(head.hash)).query.system.events();
    records.forEach(({ event }, i) => {
      if (event.section === 'trainerStaking' && event.method === 'Slashed') {
        state.slashes.push({ who: event.data[0].toString(), amount: event.data[1].toBigInt(), block: head.number.toNumber(), i });
      }
      if (event.section === 'challenges' && event.method === 'ChallengeClosed' && !event.data[4].isGuilty) {
        state.acquittals.push({
          id: event.data[0].toNumber(), pool: event.data[1].toNumber(), round: event.data[2].toNumber(),
          who: event.data[3].toString(), verdict: event.data[4].type, block: head.number.toNumber(),
        });
      }
    });
    state.slashes = state.slashes.slice(-MAX_SLASHES);
    state.acquittals = state.acquittals.slice(-MAX_SLASHES);
    if (state.slashBlocks.size > 4 * MAX_SLASHES) state.slashBlocks = new Set([key]);
  });
  api.rpc.chain.subscribeNewHeads(() => refresh());
  setInterval(pollTrainers, 2000);
  pollTrainers();
}

async function pollTrainers() {
  try {
    const text = await (await fetch('/api/trainers')).text();
    if (text === state.trainersText) return;
    state.trainersText = text;
    state.trainers = JSON.parse(text);
    drawChart();
    // New losses go into the rounds table too.
    if (state.api && state.api.isConnected) refresh();
  } catch (e) {
    // The dashboard server itself is gone: keep the last chart.
  }
}

// Refreshes everything from the chain at most once at a time (a head arriving meanwhile
// triggers one more refresh).
async function refresh() {
  if (state.refreshing) {
    state.pending = true;
    return;
  }
  state.refreshing = true;
  try {
    await readChain();
    nodeUp();
  } catch (e) {
    console.error(e);
  } finally {
    state.refreshing = false;
    if (state.pending) {
      state.pending = false;
      refresh();
    }
  }
}

async function readChain() {
  const [best, finalizedHash] = await Promise.all([state.api.rpc.chain.getHeader(), state.api.rpc.chain.getFinalizedHead()]);
  const finalized = await state.api.rpc.chain.getHeader(finalizedHash);
  // Every read of one refresh is at the same block, so the tables agree with each other.
  const api = await state.api.at(best.hash);
  $('chain').textContent = `${state.chainName} · best #${best.number.toNumber()} · finalized #${finalized.number.toNumber()}`;

  const pools = (await api.query.trainingPools.pools.entries())
    .map(([k, v]) => ({ id: k.args[0].toNumber(), info: v.unwrap() }))
    .sort((a, b) => a.id - b.id);
  if (state.selected === null || !pools.some((p) => p.id === state.selected)) {
    const fromHash = parseInt(location.hash.replace('#pool=', ''), 10);
    state.selected = pools.some((p) => p.id === fromHash) ? fromHash : pools.length ? pools[pools.length - 1].id : null;
  }
  fill($('pools').tBodies[0], pools.map((p) => {
    const i = p.info;
    const tr = row([
      cell(`${p.id}`, 'num'), cell(i.status.type), cell(`${i.currentRound.toNumber()} / ${i.spec.terms.rounds.toNumber()}`, 'num'),
      cell(`${i.memberCount.toNumber()}`, 'num'), cell(syn(i.totalStake.toBigInt()), 'num'),
      cell(syn(i.spec.terms.rewardPerRound.toBigInt()), 'num'), cell(`${i.spec.kind.value.innerSteps.toNumber()}`, 'num'), cell(short(i.creator.toString())),
    ], p.id === state.selected ? 'selected' : '');
    tr.dataset.pool = p.id;
    tr.onclick = () => { state.selected = p.id; location.hash = `pool=${p.id}`; refresh(); };
    return tr;
  }), 'no pools yet: create one with `synod-trainer pool create` or Polkadot.js (trainingPools.createPool)', 8);

  const pool = pools.find((p) => p.id === state.selected);
  $('pool-detail').hidden = !pool;
  if (pool) await readPool(api, pool);
}

async function readPool(api, pool) {
  const id = pool.id;
  const info = pool.info;
  const rounds = info.spec.terms.rounds.toNumber();
  $('pool-title').textContent = `Pool ${id}: ${info.status.type}, round ${info.currentRound.toNumber()} of ${rounds}, ` +
    `H = ${info.spec.kind.value.innerSteps.toNumber()}, quorum ${(info.spec.terms.quorum.toNumber() / 1e7).toFixed(1)} %, dataset ${info.spec.kind.value.datasetId.toUtf8()}`;

  const accounts = (await api.query.trainingPools.memberList(id)).map((a) => a.toString());
  const members = await Promise.all(accounts.map(async (a) => {
    const [m, ledger] = await Promise.all([api.query.trainingPools.members(id, a), api.query.trainerStaking.ledger(a)]);
    return m.isSome ? { account: a, m: m.unwrap(), active: ledger.isSome ? ledger.unwrap().active.toBigInt() : 0n } : null;
  })).then((ms) => ms.filter(Boolean));
  const indexOf = new Map(members.map((x) => [x.account, x.m.index.toNumber()]));
  fill($('members').tBodies[0], members.map((x) => row([
    cell(`${x.m.index.toNumber()}`, 'num'), cell(short(x.account)), cell(syn(x.m.stake.toBigInt()), 'num'),
    cell(syn(x.active), 'num'), cell(`${x.m.fromRound.toNumber()}`, 'num'),
  ])), 'no members', 5);

  const [finals, voided, open] = await Promise.all([
    api.query.checkpoints.finalCheckpoints.entries(id),
    api.query.checkpoints.voided.entries(id),
    api.query.checkpoints.openRounds(id),
  ]);
  const byRound = new Map();
  for (const [k, v] of finals) {
    const f = v.unwrap();
    // Member indices ascending, then accounts that are no longer members.
    const who = f.contributors.map((a) => a.toString())
      .map((a) => (indexOf.has(a) ? [indexOf.get(a), `${indexOf.get(a)}`] : [Infinity, short(a)]))
      .sort((a, b) => a[0] - b[0]).map((x) => x[1]);
    byRound.set(k.args[1].toNumber(), {
      // A field named `hash` (every codec's own blake2 getter) is renamed `hash_` by @polkadot/api.
      status: 'final', hash: f.hash_.toHex(), who: who.join(', '),
      block: f.finalizedAt.toNumber(), stake: `${syn(f.committedStake.toBigInt())} / ${syn(f.roundStake.toBigInt())}`,
    });
  }
  for (const [k, v] of voided) {
    if (v.isSome) byRound.set(k.args[1].toNumber(), { status: 'voided', hash: '', who: '', block: v.unwrap().toNumber(), stake: '' });
  }
  if (open.isSome) {
    const o = open.unwrap();
    if (!byRound.has(o.round.toNumber())) {
      byRound.set(o.round.toNumber(), { status: 'open', hash: '', who: '', block: o.deadline.toNumber(), stake: `– / ${syn(o.roundStake.toBigInt())}` });
    }
  }
  const losses = lossByRound(id);
  const sorted = [...byRound.entries()].sort((a, b) => a[0] - b[0]);
  fill($('rounds').tBodies[0], sorted.map(([r, x]) => row([
    cell(`${r}`, 'num'), cell(x.status, `status-${x.status}`), Object.assign(cell(x.hash ? short(x.hash) : ''), { title: x.hash }),
    cell(x.who), cell(x.status === 'open' ? `deadline ${x.block}` : `${x.block}`, 'num'), cell(x.stake, 'num'),
    cell(losses.has(r) ? losses.get(r).toFixed(3) : '', 'num'),
  ])), 'no round closed yet', 7);
  const boxes = [];
  for (let r = 1; r <= rounds; r++) {
    const b = document.createElement('span');
    b.className = byRound.has(r) ? byRound.get(r).status : 'todo';
    b.textContent = r;
    b.title = `round ${r}: ${byRound.has(r) ? byRound.get(r).status : 'to come'}`;
    boxes.push(b);
  }
  $('timeline').replaceChildren(...boxes);

  const [challenges, verdicts] = await Promise.all([
    api.query.challenges.openChallenges.entries(),
    api.query.challenges.verdicts.entries(),
  ]);
  const rows = [];
  for (const [k, v] of challenges) {
    const c = v.unwrap();
    if (c.poolId.toNumber() !== id) continue;
    rows.push(row([cell(`challenge ${k.args[0].toNumber()} open`), cell(`${c.round.toNumber()}`, 'num'), cell(short(c.accused.toString())),
      cell(`by ${short(c.challenger.toString())}, jury of ${c.jury.length}, expires at block ${c.expiresAt.toNumber()}`)]));
  }
  for (const [k, v] of verdicts) {
    const [p, r, who] = k.args[0];
    if (p.toNumber() !== id) continue;
    const verdict = v.unwrap().type;
    rows.push(row([cell(`verdict: ${verdict}`, verdict === 'Guilty' ? 'status-voided' : 'status-final'), cell(`${r.toNumber()}`, 'num'), cell(short(who.toString())), cell('')]));
  }
  for (const a of state.acquittals) {
    if (a.pool !== id) continue;
    rows.push(row([cell(`verdict: ${a.verdict}`, 'status-final'), cell(`${a.round}`, 'num'), cell(short(a.who)),
      cell(`challenge ${a.id} at block ${a.block} (verdicts other than Guilty are shown from the blocks finalized since this page opened)`)]));
  }
  for (const s of state.slashes) {
    if (!indexOf.has(s.who)) continue;
    rows.push(row([cell('slashed', 'status-voided'), cell(''), cell(short(s.who)),
      cell(`${syn(s.amount)} SYN at block ${s.block} (a member of this pool; slashes are shown from the blocks finalized since this page opened)`)]));
  }
  fill($('challenges').tBodies[0], rows, 'no challenges', 4);
  drawChart();
}

// Validation loss by round of the selected pool (the first trainer that reported it).
function lossByRound(pool) {
  const m = new Map();
  for (const t of state.trainers) {
    if (t.pool !== pool) continue;
    for (const p of t.points) if (!m.has(p.round)) m.set(p.round, p.val_loss);
  }
  return m;
}

function drawChart() {
  const series = state.trainers.filter((t) => t.pool === state.selected && t.points.length);
  const box = $('chart');
  if (!series.length) {
    const down = state.trainers.filter((t) => !t.up).map((t) => t.url);
    box.innerHTML = '';
    box.appendChild(Object.assign(document.createElement('p'), {
      className: 'empty',
      textContent: state.trainers.length
        ? `no validation loss reported for this pool yet${down.length ? ` (unreachable: ${down.join(', ')})` : ''}`
        : 'no trainer metrics given (synod-trainer dashboard --metrics http://127.0.0.1:9616/metrics)',
    }));
    $('chart-legend').replaceChildren();
    return;
  }
  const W = 520, H = 240, L = 44, B = 24;
  const pts = series.flatMap((t) => t.points);
  const lo = (f) => pts.reduce((m, p) => Math.min(m, f(p)), Infinity);
  const hi = (f) => pts.reduce((m, p) => Math.max(m, f(p)), -Infinity);
  const r0 = lo((p) => p.round), r1 = Math.max(hi((p) => p.round), r0 + 1);
  const y0 = lo((p) => p.val_loss), y1 = Math.max(hi((p) => p.val_loss), y0 + 1e-3);
  const x = (r) => L + ((r - r0) / (r1 - r0)) * (W - L - 10);
  const y = (v) => 10 + (1 - (v - y0) / (y1 - y0)) * (H - B - 10);
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('width', '100%');
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  add('line', { x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: '#ced4da' });
  add('line', { x1: L, y1: 10, x2: L, y2: H - B, stroke: '#ced4da' });
  add('text', { x: 2, y: 14 }, y1.toFixed(2));
  add('text', { x: 2, y: H - B }, y0.toFixed(2));
  add('text', { x: L, y: H - 6 }, `round ${r0}`);
  add('text', { x: W - 70, y: H - 6 }, `round ${r1}`);
  const legend = [];
  series.forEach((t, i) => {
    const c = COLOURS[i % COLOURS.length];
    const d = t.points.map((p, j) => `${j ? 'L' : 'M'}${x(p.round).toFixed(1)},${y(p.val_loss).toFixed(1)}`).join(' ');
    add('path', { d, fill: 'none', stroke: c, 'stroke-width': 2, class: 'series' });
    t.points.forEach((p) => add('circle', { cx: x(p.round), cy: y(p.val_loss), r: 3, fill: c, class: 'point' })
      .appendChild(Object.assign(document.createElementNS(ns, 'title'), { textContent: `round ${p.round}: ${p.val_loss.toFixed(4)}` })));
    const s = document.createElement('span');
    s.style.color = c;
    s.textContent = `● ${t.url}${t.up ? '' : ' (unreachable)'}`;
    legend.push(s);
  });
  box.replaceChildren(svg);
  $('chart-legend').replaceChildren(...legend);
}

main().catch((e) => {
  console.error(e);
  $('node-down').textContent = `Dashboard error: ${e.message || e}`;
  $('node-down').hidden = false;
});
