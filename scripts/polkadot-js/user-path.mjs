// The user path on a Synod chain, with Polkadot.js and no custom types:
//   bond → create pool → join → commit → final checkpoint → opt out of juries → challenge → jury
//   drawn from a later block → stake-weighted votes → rewards by stake → claim, plus
//   leave/cancel/unbond/withdraw and the permissionless fallbacks (void an expired round, settle
//   a round, advance a challenge), so that every call of the six Synod pallets is submitted.
// Every failed call's module error is decoded from the metadata with its doc string, and every
// module error of the six pallets is checked to carry one. A challenge's evidence is the
// accused's ML-DSA-65 signed announcement, as a trainer gossips it: signed here with
// @noble/post-quantum (FIPS 204, the same as RustCrypto's ml-dsa) and SCALE-encoded by hand
// (it is an off-chain message, not a chain type).
//
// Usage: node user-path.mjs [ws://127.0.0.1:9944]
// Exit status 0 when every expectation held; prints one JSON summary line last.
import { ApiPromise, WsProvider } from '@polkadot/api';
import { Keyring } from '@polkadot/keyring';
import { cryptoWaitReady, ed25519PairFromSeed, ed25519Sign } from '@polkadot/util-crypto';
import { u8aToHex, u8aConcat, compactToU8a, bnToU8a, stringToU8a } from '@polkadot/util';
import { ml_dsa65 } from '@noble/post-quantum/ml-dsa.js';
import {
  check, decodedErrors, expectError, expectRefused, fail, field, find, ok, submit, submitted, waitUntil,
} from './lib/chain.mjs';

const url = process.argv[2] ?? 'ws://127.0.0.1:9944';
const UNIT = 10n ** 12n;
const PALLETS = ['TrainerStaking', 'TrainingPools', 'Checkpoints', 'Challenges', 'Rewards', 'ValidatorSet'];
const CALLS = {
  trainerStaking: ['bond', 'unbond', 'withdrawUnbonded'],
  trainingPools: ['createPool', 'joinPool', 'leavePool', 'cancelPool', 'releaseMemberDeposit', 'reapPool', 'setAllowedTrainers'],
  checkpoints: ['commitCheckpoint', 'voidExpiredRound'],
  challenges: ['openChallenge', 'vote', 'registerJuror', 'unregisterJuror', 'advanceChallenge', 'appeal'],
  rewards: ['claimRewards', 'settleRound'],
  validatorSet: ['validate', 'chill'],
};

const hash32 = (b) => u8aToHex(new Uint8Array(32).fill(b));
/** Member `b`'s ML-DSA-65 key pair, from the seed [b; 32]. */
const memberKeys = (b) => ml_dsa65.keygen(new Uint8Array(32).fill(b));
const mlDsaKey = (b) => u8aToHex(memberKeys(b).publicKey);
/** Member `b`'s libp2p (Ed25519) key pair, from the seed [b; 32]. */
const peerKeys = (b) => ed25519PairFromSeed(new Uint8Array(32).fill(b));
/** Its peer id: the key inlined in an identity multihash (`synod_protocol::peer`). */
const peerIdBytes = (b) => u8aConcat(new Uint8Array([0, 36, 8, 1, 18, 32]), peerKeys(b).publicKey);
const peerId = (b) => u8aToHex(peerIdBytes(b));
const le = (n, bits) => bnToU8a(n, { bitLength: bits, isLe: true });
/**
 * The proof that account `who` holds the key of peer id `b` for joining `pool`: the key's
 * Ed25519 signature of "synod/peer-id/1" ‖ genesis hash ‖ pool (u32 LE) ‖ account id.
 */
const peerProof = (api, b, pool, who) =>
  u8aToHex(ed25519Sign(peerProofMessage(api.genesisHash.toU8a(), pool, who.publicKey), peerKeys(b)));
/** The bytes `peerProof` signs (`synod_protocol::peer::proof_message`). */
const peerProofMessage = (genesis, pool, account) =>
  u8aConcat(stringToU8a('synod/peer-id/1'), genesis, le(pool, 32), account);
/** `peerProofMessage([1; 32], 7, [2; 32])`: the vector `pallets/protocol/src/peer.rs` checks too. */
const PEER_PROOF_KNOWN_ANSWER = '0x73796e6f642f706565722d69642f31' + '01'.repeat(32) + '07000000' + '02'.repeat(32);
const bytes = (u8a) => u8aConcat(compactToU8a(u8a.length), u8a);

/**
 * A signed announcement (`synod_protocol::evidence::Signed`, SCALE) by member `b` (index
 * `member`) of payload `digest` for `round` of `pool`: Envelope { pool: u64, round: u32,
 * member: u32, peer_id: Vec<u8>, body: Alive { seq: u64, payload: Some({ digest, size: u64 }) } }
 * signed over "synod/pseudograd/1" ‖ SCALE(envelope) with the key of seed `signer`.
 */
function announcement(pool, round, member, b, digest, signer = b) {
  const envelope = u8aConcat(le(pool, 64), le(round, 32), le(member, 32), bytes(peerIdBytes(b)),
    new Uint8Array([0]), le(1, 64), new Uint8Array([1]), new Uint8Array(32).fill(digest), le(1000, 64));
  const signature = ml_dsa65.sign(u8aConcat(stringToU8a('synod/pseudograd/1'), envelope),
    memberKeys(signer).secretKey, { extraEntropy: false });
  return u8aToHex(u8aConcat(envelope, bytes(signature)));
}

// A pool spec: its terms (with `overrides`) and a DiLoCo job.
function spec(overrides = {}) {
  return {
    terms: {
      rounds: 2,
      minTrainers: 3,
      maxTrainers: 4,
      minStake: 100n * UNIT,
      rewardPerRound: 30n * UNIT,
      quorum: 666_666_666, // Perbill parts; 2/3 rounded down, so two of three equal stakes reach it
      roundTimeout: 20, // the jury's voting period is this + VoteMargin (15 blocks)
      challengeWindow: 8, // late commits for 8 blocks, then challenges for 8
      minRoundLength: 1, // commits accepted from the block after a round opens (the chain's floor for H = 50)
      allowedTrainers: [], // anyone may join
      ...overrides,
    },
    kind: {
      DiLoCo: {
        modelConfigHash: hash32(1),
        initialWeightsHash: hash32(2),
        datasetId: 'tinyshakespeare',
        datasetHash: hash32(3),
        innerSteps: 50,
      },
    },
  };
}

async function main() {
  await cryptoWaitReady();
  const api = await ApiPromise.create({ provider: new WsProvider(url), noInitWarn: true });
  const keyring = new Keyring({ type: 'sr25519' });
  const [alice, bob, charlie, dave, eve, ferdie] =
    ['Alice', 'Bob', 'Charlie', 'Dave', 'Eve', 'Ferdie'].map((n) => keyring.addFromUri(`//${n}`));

  check(u8aToHex(peerProofMessage(new Uint8Array(32).fill(1), 7, new Uint8Array(32).fill(2))) === PEER_PROOF_KNOWN_ANSWER,
    'the peer-id proof message is the runtime\'s (known-answer vector)');
  console.log('metadata: calls and module errors');
  for (const [section, calls] of Object.entries(CALLS)) {
    for (const c of calls) check(typeof api.tx[section]?.[c] === 'function', `${section}.${c} exists`);
  }
  let errorCount = 0;
  for (const name of PALLETS) {
    const pallet = api.registry.metadata.pallets.find((p) => p.name.toString() === name);
    if (!pallet || pallet.errors.isNone) fail(`${name} has no errors in metadata`);
    const variants = api.registry.lookup.getSiType(pallet.errors.unwrap().type).def.asVariant.variants;
    for (const v of variants) {
      const meta = api.registry.findMetaError({ index: pallet.index, error: v.index });
      if (!meta.docs.join('').trim()) fail(`${name}.${meta.name} has no doc string`);
      errorCount += 1;
    }
  }
  check(errorCount > 40, `${errorCount} module errors decode with doc strings`);

  console.log('bond → create pool → join');
  await expectError(api, bob, api.tx.trainerStaking.bond(0), 'trainerStaking', 'ZeroAmount');
  await Promise.all([bob, charlie, dave, eve].map((k) =>
    ok(api, k, api.tx.trainerStaking.bond(200n * UNIT), `${k.meta.name ?? k.address} bonds 200 SYN`)));
  await expectError(api, alice, api.tx.trainingPools.createPool(spec({ rounds: 0 })), 'trainingPools', 'InvalidRounds');
  let ev = await ok(api, alice, api.tx.trainingPools.createPool(spec()), 'Alice creates a pool');
  const pool = find(ev, 'trainingPools', 'PoolCreated').data.poolId.toNumber();
  await expectError(api, ferdie,
    api.tx.trainingPools.joinPool(pool, 100n * UNIT, peerId(6), mlDsaKey(6), peerProof(api, 6, pool, ferdie)),
    'trainingPools', 'InsufficientStake');
  // Bob's peer id with Bob's own proof (as read from his pending join) does not let Ferdie squat it.
  await expectError(api, ferdie,
    api.tx.trainingPools.joinPool(pool, 100n * UNIT, peerId(1), mlDsaKey(6), peerProof(api, 1, pool, bob)),
    'trainingPools', 'PeerIdNotProved');
  const joins = await Promise.all([bob, charlie, dave].map((k, i) =>
    ok(api, k, api.tx.trainingPools.joinPool(pool, 150n * UNIT, peerId(i + 1), mlDsaKey(i + 1),
      peerProof(api, i + 1, pool, k)), `member ${i} joins`)));
  await expectError(api, bob,
    api.tx.trainingPools.joinPool(pool, 150n * UNIT, peerId(1), mlDsaKey(1), peerProof(api, 1, pool, bob)),
    'trainingPools', 'AlreadyMember');
  const started = joins.flat().some((e) => e.section === 'trainingPools' && e.method === 'TrainingStarted');
  check(started, 'the third join starts training');
  const poolInfo = (await api.query.trainingPools.pools(pool)).unwrap();
  check(poolInfo.status.isTraining && poolInfo.currentRound.toNumber() === 1, 'pool is Training at round 1');
  const members = await api.query.trainingPools.memberList(pool);
  check(members.length === 3, 'three members with keys on-chain');
  const bobMember = (await api.query.trainingPools.members(pool, bob.address)).unwrap();
  check(bobMember.mlDsaKey.length === 1952, 'ML-DSA-65 key (1952 bytes) registered');
  // Joins sent together land in any order: member indices are read back, not assumed.
  const charlieMember = (await api.query.trainingPools.members(pool, charlie.address)).unwrap();
  const bobAndCharlie = [bobMember.index.toNumber(), charlieMember.index.toNumber()].sort((a, b) => a - b);

  console.log('commit → final checkpoint');
  const included = [0, 1, 2];
  await expectRefused(api, bob,
    api.tx.checkpoints.commitCheckpoint(pool, 5, hash32(9), included), 'checkpoints', 'RoundNotOpen');
  await ok(api, bob, api.tx.checkpoints.commitCheckpoint(pool, 1, hash32(0x11), included), 'Bob commits round 1');
  await expectRefused(api, bob,
    api.tx.checkpoints.commitCheckpoint(pool, 1, hash32(0x11), included), 'checkpoints', 'AlreadyCommitted');
  ev = await ok(api, charlie, api.tx.checkpoints.commitCheckpoint(pool, 1, hash32(0x11), included), 'Charlie commits round 1');
  const finalized = find(ev, 'checkpoints', 'CheckpointFinalized');
  check(finalized && field(finalized, 'hash').toHex() === hash32(0x11), 'round 1 is final at 2/3 of the stake');
  check(field(finalized, 'parent').toHex() === hash32(2), "round 1's parent is the initial weights hash");
  // Challenges open once the round's late commits close (its committee is drawn from its
  // contributors, which late commits still add to).
  const daveIndex = (await api.query.trainingPools.members(pool, dave.address)).unwrap().index.toNumber();
  await expectError(api, ferdie, api.tx.challenges.openChallenge(pool, 1, dave.address,
    announcement(pool, 1, daveIndex, 3, 0x44)), 'challenges', 'ChallengeTooEarly');
  ev = await ok(api, dave, api.tx.checkpoints.commitCheckpoint(pool, 1, hash32(0x11), included), 'Dave commits late');
  check(!!find(ev, 'checkpoints', 'LateContributorAdded'), 'Dave is added as a late contributor');

  console.log('jurors → challenge → jury drawn later → votes → verdict');
  // Every bonded trainer is a juror until it opts out.
  await expectError(api, ferdie, api.tx.challenges.unregisterJuror(), 'challenges', 'NotBonded');
  await expectError(api, bob, api.tx.challenges.registerJuror(), 'challenges', 'AlreadyJuror');
  await ok(api, dave, api.tx.challenges.unregisterJuror(), 'Dave opts out of juries');
  await expectError(api, dave, api.tx.challenges.unregisterJuror(), 'challenges', 'NotAJuror');
  await ok(api, eve, api.tx.challenges.unregisterJuror(), 'Eve opts out of juries');
  await ok(api, eve, api.tx.challenges.registerJuror(), 'Eve opts back in');
  const finalAt = (await api.query.checkpoints.finalCheckpoints(pool, 1)).unwrap().finalizedAt.toNumber();
  await waitUntil(api, 'the end of round 1\'s late commits', async () =>
    (await api.rpc.chain.getHeader()).number.toNumber() >= finalAt + 8, 20);
  await expectError(api, ferdie, api.tx.challenges.openChallenge(pool, 1, dave.address,
    announcement(pool, 1, daveIndex, 3, 0x44, 6)), 'challenges', 'EvidenceSignatureInvalid');
  // A challenge may name the part of Dave's trace it disputes; no trace has segment 4096.
  await expectError(api, ferdie, api.tx.challenges.openNarrowedChallenge(pool, 1, dave.address,
    announcement(pool, 1, daveIndex, 3, 0x44), { Segment: 4096 }), 'challenges', 'DisputeOutOfRange');
  ev = await ok(api, ferdie, api.tx.challenges.openChallenge(pool, 1, dave.address,
    announcement(pool, 1, daveIndex, 3, 0x44)), "Ferdie challenges Dave with Dave's signed announcement");
  const opened = find(ev, 'challenges', 'ChallengeOpened');
  check(opened.data.dispute.isPhase, 'a plain challenge disputes the whole inner phase');
  check(opened.data.payloadDigest.toHex() === hash32(0x44), 'the challenge is about the digest Dave signed');
  const challengeId = opened.data.challengeId.toNumber();
  const drawAt = opened.data.drawAt.toNumber();
  check((await api.query.challenges.openChallenges(challengeId)).unwrap().jury.length === 0,
    `no jury before block ${drawAt}: it is drawn from a block that did not exist yet`);
  await expectRefused(api, bob, api.tx.challenges.vote(challengeId, true), 'challenges', 'JuryNotDrawn');
  await expectError(api, ferdie, api.tx.challenges.advanceChallenge(challengeId + 100), 'challenges', 'ChallengeNotFound');
  // Round 2 is open since round 1's finality: its members commit it before its timeout, while
  // the challenge of round 1 waits for its jury (`JuryDelay` blocks) and then for its ruling's
  // appeal period (challenges of round 1 go on after the pool completes).
  console.log('round 2 → pool completes');
  await ok(api, bob, api.tx.checkpoints.commitCheckpoint(pool, 2, hash32(0x22), bobAndCharlie), 'Bob commits round 2');
  ev = await ok(api, charlie, api.tx.checkpoints.commitCheckpoint(pool, 2, hash32(0x22), bobAndCharlie), 'Charlie commits round 2');
  check(!!find(ev, 'trainingPools', 'PoolCompleted'), 'the pool completes after its last round');
  await waitUntil(api, 'the jury draw', async () =>
    (await api.query.challenges.openChallenges(challengeId)).unwrap().jury.length > 0,
  api.consts.trainingPools.juryDelay.toNumber() + 3);
  // A committee of `jurySize` seats, drawn with replacement in proportion to stake: each juror once,
  // with its seats; a verdict needs a majority of all seats.
  const committee = (await api.query.challenges.openChallenges(challengeId)).unwrap().jury
    .map((s) => ({ who: s.who.toString(), seats: s.seats.toNumber() }));
  const jury = committee.map((s) => s.who);
  check(jury.length === 2 && jury.includes(bob.address) && jury.includes(charlie.address), 'jury: Bob and Charlie (Dave opted out)');
  const seats = committee.reduce((n, s) => n + s.seats, 0);
  check(seats === api.consts.challenges.jurySize.toNumber(), `the committee's ${seats} seats are all filled`);
  await expectRefused(api, ferdie, api.tx.challenges.vote(challengeId, true), 'challenges', 'NotJuror');
  // The juror with fewer seats (under half of them) votes first: not yet a verdict.
  const [fewer, more] = [...committee].sort((a, b) => a.seats - b.seats)
    .map((s) => (s.who === bob.address ? bob : charlie));
  const name = (k) => (k === bob ? 'Bob' : 'Charlie');
  await ok(api, fewer, api.tx.challenges.vote(challengeId, true), `${name(fewer)} votes guilty (a minority of the seats)`);
  ev = await ok(api, more, api.tx.challenges.vote(challengeId, true), `${name(more)} votes guilty (a majority of the seats reached)`);
  const ruled = find(ev, 'challenges', 'Ruled');
  check(ruled && ruled.data.verdict.isGuilty && !find(ev, 'challenges', 'AccusedFoundGuilty'),
    'a guilty ruling: nothing is slashed before the loser could appeal');
  console.log('appeal → a committee of 2 × seats + 1 → final verdict');
  await expectRefused(api, fewer, api.tx.challenges.vote(challengeId, false), 'challenges', 'VotingClosed');
  await expectRefused(api, ferdie, api.tx.challenges.appeal(challengeId), 'challenges', 'NotAppellant');
  ev = await ok(api, dave, api.tx.challenges.appeal(challengeId), 'Dave appeals the ruling');
  check(find(ev, 'challenges', 'Appealed').data.bond.toBigInt() === api.consts.challenges.appealBond.toBigInt(),
    'Dave holds the appeal bond');
  await waitUntil(api, 'the appeal committee draw', async () =>
    (await api.query.challenges.appeals(challengeId)).unwrap().ruling.isNone, 20);
  const appealCommittee = (await api.query.challenges.openChallenges(challengeId)).unwrap().jury
    .map((s) => ({ who: s.who.toString(), seats: s.seats.toNumber() }));
  const appealSeats = appealCommittee.reduce((n, s) => n + s.seats, 0);
  check(appealSeats === api.consts.challenges.appealJurySize.toNumber(),
    `the appeal committee's ${appealSeats} seats (2 × ${seats} + 1) are all filled`);
  for (const s of [...appealCommittee].sort((a, b) => a.seats - b.seats)) {
    if (!(await api.query.challenges.openChallenges(challengeId)).isSome) break;
    ev = await ok(api, s.who === bob.address ? bob : charlie, api.tx.challenges.vote(challengeId, true),
      `${s.who === bob.address ? 'Bob' : 'Charlie'} votes guilty on the appeal`);
  }
  const guilty = find(ev, 'challenges', 'AccusedFoundGuilty');
  check(guilty && guilty.data.slashed.toBigInt() === 15n * UNIT, 'Dave is slashed 10 % of its 150 SYN snapshot stake');
  const settled = find(ev, 'challenges', 'AppealBondSettled');
  check(settled && settled.data.slashed.toBigInt() === api.consts.challenges.appealBond.toBigInt(),
    "the appeal confirmed the ruling: Dave's appeal bond pays the appeal jurors");


  console.log('second pool: leave and cancel; unbond and withdraw');
  ev = await ok(api, alice, api.tx.trainingPools.createPool(spec({ minTrainers: 2 })), 'Alice creates pool 2');
  const pool2 = find(ev, 'trainingPools', 'PoolCreated').data.poolId.toNumber();
  await ok(api, eve, api.tx.trainingPools.joinPool(pool2, 100n * UNIT, peerId(5), mlDsaKey(5), peerProof(api, 5, pool2, eve)),
    'Eve joins pool 2');
  await ok(api, eve, api.tx.trainingPools.leavePool(pool2), 'Eve leaves pool 2');
  await expectError(api, bob, api.tx.trainingPools.setAllowedTrainers(pool2, [bob.address]), 'trainingPools', 'NotCreator');
  await ok(api, alice, api.tx.trainingPools.setAllowedTrainers(pool2, [dave.address, ferdie.address]), 'Alice lets only Dave and Ferdie join pool 2');
  await expectError(api, eve,
    api.tx.trainingPools.joinPool(pool2, 100n * UNIT, peerId(5), mlDsaKey(5), peerProof(api, 5, pool2, eve)),
    'trainingPools', 'NotAllowedToJoin');
  await expectError(api, ferdie, api.tx.trainingPools.releaseMemberDeposit(pool2, 0), 'trainingPools', 'DepositStillNeeded');
  await expectError(api, eve, api.tx.trainingPools.leavePool(pool2), 'trainingPools', 'NotMember');
  await expectError(api, bob, api.tx.trainingPools.cancelPool(pool2), 'trainingPools', 'NotCreator');
  ev = await ok(api, alice, api.tx.trainingPools.cancelPool(pool2), 'Alice cancels pool 2');
  check(!!find(ev, 'trainingPools', 'PoolCancelled'), 'pool 2 cancelled, its budget released');
  // Reaped (records deleted, storage deposits back) only once nothing of it can be challenged.
  await expectError(api, ferdie, api.tx.trainingPools.reapPool(pool2), 'trainingPools', 'PoolNotSettled');
  await expectRefused(api, eve, api.tx.checkpoints.voidExpiredRound(pool2), 'checkpoints', 'NoOpenRound');
  await expectError(api, eve, api.tx.rewards.settleRound(pool2, 1), 'rewards', 'NotUnsettled');
  await ok(api, eve, api.tx.trainerStaking.unbond(50n * UNIT), 'Eve unbonds 50 SYN');
  await expectError(api, eve, api.tx.trainerStaking.withdrawUnbonded(), 'trainerStaking', 'NothingToWithdraw');

  // The operator's path itself (rotate keys, setKeys, validate, author) needs a second node: a
  // dev node holding two validators' GRANDPA keys casts one vote, and finality would stop
  // (zombienet 0002 runs it on a real network). Here: the calls' typed refusals.
  console.log('validator set: refusals');
  const candidates = (await api.query.validatorSet.candidates()).map(String);
  check(candidates.length === 1 && candidates[0] === alice.address,
    'Alice (the genesis validator, bonded at genesis) is the only candidate');
  await expectError(api, bob, api.tx.validatorSet.chill(), 'validatorSet', 'NotCandidate');
  await expectError(api, ferdie, api.tx.validatorSet.validate(), 'validatorSet', 'BondTooLow');
  await expectError(api, alice, api.tx.validatorSet.validate(), 'validatorSet', 'AlreadyCandidate');

  console.log('settlement → claim');
  await expectError(api, dave, api.tx.rewards.claimRewards(pool), 'rewards', 'NothingToClaim');
  // Round 2 settles 2·challengeWindow + JuryDelay + (roundTimeout + VoteMargin) + AppealPeriod +
  // (roundTimeout + VoteMargin) + 1 blocks after its finality (the last challenge that can be
  // opened is over by then, appeal included).
  await waitUntil(api, 'settlement of both rounds', async () =>
    (await api.query.rewards.unsettled.entries(pool)).length === 0, 300);
  const bobClaimable = (await api.query.rewards.claimable(pool, bob.address)).toBigInt();
  // Round 1: 30 SYN over Bob, Charlie, Dave by stake (10 each); Dave was guilty, his 10 return to
  // the budget. Round 2: 15 each for Bob and Charlie.
  check(bobClaimable === 25n * UNIT, `both rounds settled: 25 SYN claimable by Bob (got ${bobClaimable} planck)`);
  const before = (await api.query.system.account(bob.address)).data.free.toBigInt();
  ev = await ok(api, bob, api.tx.rewards.claimRewards(pool), 'Bob claims');
  const claimed = find(ev, 'rewards', 'RewardsClaimed').data.amount.toBigInt();
  check(claimed === 25n * UNIT, 'Bob is paid 10 + 15 SYN (by stake; guilty Dave\'s share went back to the budget)');
  const after = (await api.query.system.account(bob.address)).data.free.toBigInt();
  check(after > before, "Bob's free balance grew");
  await expectError(api, dave, api.tx.rewards.claimRewards(pool), 'rewards', 'NothingToClaim');

  const expected = Object.entries(CALLS).flatMap(([s, cs]) => cs.map((c) => `${s}.${c}`));
  const missing = expected.filter((c) => !submitted.has(c));
  check(missing.length === 0, `every call submitted (${expected.length})`);
  console.log(JSON.stringify({
    ok: true, pool, calls_submitted: expected.length, module_errors_with_docs: errorCount,
    errors_decoded: decodedErrors, final_round1: field(finalized, 'hash').toHex(),
  }));
  await api.disconnect();
}

main().catch((e) => fail(e.stack ?? String(e)));
