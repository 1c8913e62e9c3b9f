//! `synod-node --dev` produces and finalizes blocks, and the Polkadot.js user path passes
//! against it: every call of the six Synod pallets submitted, every module error decoded with
//! its doc string, bond → create pool → join → commit → final checkpoint event → challenge →
//! rewards claimed.

mod common;

use common::{repo_root, Node};
use std::{process::Command, time::Duration};

#[test]
fn dev_chain_finalizes_and_polkadot_js_user_path_passes() {
    let node = Node::start(&["--dev"]);
    let finalized = node.wait_finalized(2, Duration::from_secs(180));
    assert!(
        node.block_number(false).unwrap_or(0) >= finalized,
        "best is at or above finalized"
    );

    let js = repo_root().join("scripts/polkadot-js");
    assert!(
        js.join("node_modules/@polkadot/api").exists(),
        "run `npm ci` in scripts/polkadot-js first (scripts/setup.sh does)"
    );
    let out = Command::new("node")
        .arg("user-path.mjs")
        .arg(format!("ws://127.0.0.1:{}", node.rpc_port))
        .current_dir(&js)
        .output()
        .expect("node (Node.js) runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "user path failed\nstdout:\n{stdout}\nstderr:\n{stderr}\nnode log tail:\n{}",
        node.log()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("{}")).expect("JSON summary line");
    assert_eq!(summary["ok"], true);
    assert_eq!(summary["calls_submitted"], 22);
    assert!(summary["module_errors_with_docs"].as_u64().unwrap_or(0) > 40);
}
