//! `synod-trainer status`: the `pool show` state as a table for people.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

/// Validation loss by round from a trainer's `metrics.jsonl` (its `round` events); rounds
/// without one are absent. An unreadable file gives an empty map.
pub fn losses(metrics: &Path) -> BTreeMap<u64, f64> {
    let Ok(text) = std::fs::read_to_string(metrics) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "round")
        .filter_map(|e| Some((e["round"].as_u64()?, e["val_loss"].as_f64()?)))
        .collect()
}

/// Planck (decimal string) as SYN with up to 3 decimals.
fn syn(planck: &Value) -> String {
    let p: u128 = planck
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| planck.as_u64().map(u128::from))
        .unwrap_or(0);
    let unit = synod_chain::UNIT;
    let milli = (p % unit) / (unit / 1000);
    if milli == 0 {
        format!("{}", p / unit)
    } else {
        format!("{}.{milli:03}", p / unit)
    }
}

/// A long id shortened to its first 6 and last 4 characters.
fn short(s: &str) -> String {
    let n = s.chars().count();
    if n <= 12 {
        return s.to_string();
    }
    let head: String = s.chars().take(6).collect();
    let tail: String = s.chars().skip(n - 4).collect();
    format!("{head}…{tail}")
}

/// Renders `state` (the JSON `pool show` prints) as three tables: the pool, its members (index,
/// account, bonded and active stake in SYN, first round, final rounds contributed to) and its
/// rounds (status, hash, contributors by member index, convictions (the chain stores no other
/// verdict), validation loss from `losses`).
pub fn render(state: &Value, losses: &BTreeMap<u64, f64>) -> String {
    let mut out = String::new();
    let members = state["members"].as_array().cloned().unwrap_or_default();
    let rounds = state["final_rounds"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let index_of: BTreeMap<&str, u64> = members
        .iter()
        .filter_map(|m| Some((m["account"].as_str()?, m["index"].as_u64()?)))
        .collect();
    let final_count = rounds.iter().filter(|r| r["status"] == "final").count();
    let _ = writeln!(
        out,
        "pool {}  {}  round {} of {}  ({} final, {} voided)  {}  reward {} SYN per round",
        state["pool_id"],
        state["status"].as_str().unwrap_or("?"),
        state["current_round"],
        state["rounds"],
        final_count,
        rounds.len() - final_count,
        // A kind without inner steps is named instead.
        match state["inner_steps"].as_u64() {
            Some(h) => format!("H = {h}"),
            None => format!("kind {}", state["kind"].as_str().unwrap_or("?")),
        },
        syn(&state["reward_per_round"]),
    );
    let _ = writeln!(
        out,
        "\n{:<6} {:<14} {:>10} {:>10} {:>5} {:>12}",
        "member", "account", "stake", "active", "from", "contributed"
    );
    for m in &members {
        let account = m["account"].as_str().unwrap_or_default();
        let contributed = rounds
            .iter()
            .filter(|r| {
                r["contributors"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|a| a == account))
            })
            .count();
        let _ = writeln!(
            out,
            "{:<6} {:<14} {:>10} {:>10} {:>5} {:>12}",
            // serde_json's Display ignores width: format the numbers as strings.
            m["index"].to_string(),
            short(account),
            syn(&m["stake"]),
            syn(&m["active_stake"]),
            m["from_round"].to_string(),
            contributed
        );
    }
    let _ = writeln!(
        out,
        "\n{:<5} {:<7} {:<14} {:<12} {:>8}  verdicts",
        "round", "status", "hash", "contributors", "val_loss"
    );
    for r in &rounds {
        let round = r["round"].as_u64().unwrap_or(0);
        // Member indices ascending (the chain lists contributors in commit order); accounts
        // that are no longer members, shortened, after them.
        let mut who: Vec<(u64, String)> = r["contributors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str())
            .map(|a| match index_of.get(a) {
                Some(i) => (*i, i.to_string()),
                None => (u64::MAX, short(a)),
            })
            .collect();
        who.sort();
        let who: Vec<String> = who.into_iter().map(|(_, s)| s).collect();
        let verdicts: Vec<String> = r["verdicts"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(a, v)| {
                let who = index_of
                    .get(a.as_str())
                    .map_or_else(|| short(a), u64::to_string);
                format!("{who}: {}", v.as_str().unwrap_or("?"))
            })
            .collect();
        let _ = writeln!(
            out,
            "{:<5} {:<7} {:<14} {:<12} {:>8}  {}",
            round,
            r["status"].as_str().unwrap_or("?"),
            r["hash"].as_str().map(short).unwrap_or_default(),
            who.join(","),
            losses
                .get(&round)
                .map_or_else(|| "-".to_string(), |l| format!("{l:.3}")),
            verdicts.join(" ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_names_members_by_index_and_shows_stake_in_syn() {
        let state = json!({
            "pool_id": 0, "status": "Active", "current_round": 3, "rounds": 6, "inner_steps": 50,
            "reward_per_round": "30000000000000",
            "members": [
                {"index": 0, "account": "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty",
                 "stake": "100000000000000", "from_round": 1, "active_stake": "100000000000000"},
                {"index": 1, "account": "5DAAnrj7VHTznn2AWBemMuyBwZWs6FNFjdyVXUeYum3PTXFy",
                 "stake": "100000000000000", "from_round": 1, "active_stake": "90500000000000"}
            ],
            "final_rounds": [
                {"round": 1, "status": "final", "hash": "0x9e8a7bc40a8ea3d6aa",
                 "contributors": ["5DAAnrj7VHTznn2AWBemMuyBwZWs6FNFjdyVXUeYum3PTXFy",
                                  "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"],
                 "verdicts": {"5DAAnrj7VHTznn2AWBemMuyBwZWs6FNFjdyVXUeYum3PTXFy": "Guilty"}},
                {"round": 2, "status": "voided"}
            ]
        });
        let t = render(&state, &BTreeMap::from([(1, 3.4821)]));
        assert!(t.starts_with("pool 0  Active  round 3 of 6  (1 final, 1 voided)  H = 50  reward 30 SYN per round"), "{t}");
        let member1 = t.lines().find(|l| l.starts_with("1 ")).unwrap();
        assert!(member1.starts_with("1      5DAAnr…TXFy "), "{member1}");
        assert!(member1.contains("90.500"), "{member1}");
        assert!(
            member1.trim_end().ends_with('1'),
            "one round contributed: {member1}"
        );
        let round1 = t.lines().find(|l| l.starts_with("1     final")).unwrap();
        assert!(
            round1.contains("0,1") && round1.contains("3.482") && round1.contains("1: Guilty"),
            "{round1}"
        );
        let round2 = t.lines().find(|l| l.starts_with("2     voided")).unwrap();
        assert!(round2.contains(" -"), "{round2}");
    }

    #[test]
    fn losses_come_from_round_events_and_a_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("metrics.jsonl");
        std::fs::write(
            &p,
            "{\"event\":\"joined\"}\n{\"event\":\"round\",\"round\":0,\"val_loss\":5.5}\nnot json\n{\"event\":\"round\",\"round\":1,\"val_loss\":3.25}\n",
        )
        .unwrap();
        assert_eq!(losses(&p), BTreeMap::from([(0, 5.5), (1, 3.25)]));
        assert!(losses(&dir.path().join("absent")).is_empty());
    }
}
