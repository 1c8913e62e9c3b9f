//! The 4-validator `local` chain spec: Alice, Bob, Charlie and Dave run as separate processes
//! on loopback, author with Aura and finalize with GRANDPA (which needs 3 of the 4 votes).

mod common;

use common::Node;
use std::time::Duration;

/// Peer id of the fixed node key `0000…0001` (ed25519), used as Alice's bootnode address.
const ALICE_NODE_KEY: &str = "0000000000000000000000000000000000000000000000000000000000000001";
const ALICE_PEER_ID: &str = "12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp";

#[test]
fn four_validators_author_and_finalize() {
    let alice = Node::start(&[
        "--chain",
        "local",
        "--alice",
        "--validator",
        "--node-key",
        ALICE_NODE_KEY,
    ]);
    let boot = format!("/ip4/127.0.0.1/tcp/{}/p2p/{ALICE_PEER_ID}", alice.p2p_port);
    // A validator on a non-dev chain must have a node key: give each a fixed one.
    let others: Vec<Node> = [("--bob", "02"), ("--charlie", "03"), ("--dave", "04")]
        .iter()
        .map(|(who, key)| {
            let key = format!("{}{key}", "0".repeat(62));
            Node::start(&[
                "--chain",
                "local",
                who,
                "--validator",
                "--bootnodes",
                &boot,
                "--node-key",
                &key,
            ])
        })
        .collect();
    let target = 4;
    alice.wait_finalized(target, Duration::from_secs(240));
    for node in &others {
        node.wait_finalized(target, Duration::from_secs(60));
    }
    // All four see the same finalized block at height `target`.
    let hashes: Vec<_> = std::iter::once(&alice)
        .chain(others.iter())
        .map(|n| {
            n.rpc("chain_getBlockHash", &format!("[{target}]"))
                .expect("block hash")
        })
        .collect();
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "nodes disagree: {hashes:?}"
    );
    // Blocks were authored by more than one validator: the log of each shows imports.
    assert!(alice.log().contains("Imported #"), "alice imports blocks");
}
