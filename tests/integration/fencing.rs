//! The seed's table: a paused holder resumes believing it leads and writes
//! with its old token; only a fenced resource refuses it.

use crate::helper::{Lab, Row, repo};

fn token(e: &Row) -> u64 {
    let detail: serde_json::Value = serde_json::from_str(e.get("detail")).unwrap();
    detail["token"].as_u64().unwrap_or_else(|| panic!("no token in {e:?}"))
}

/// Run the table at scale 0.05; return trial 1's acquisitions and writes.
fn table(mode: &str) -> (Vec<Row>, Vec<Row>) {
    let lab = Lab::alone();
    let file = repo().join(format!("experiments/fencing/table-{mode}.yaml"));
    let run = lab.run(file).scale(0.05).trials(1).output().expect_code(0);
    let events = run.table("events.csv");
    let of =
        |kinds: &[&str]| -> Vec<Row> { events.iter().filter(|e| kinds.contains(&e.get("event"))).cloned().collect() };
    (of(&["acquired"]), of(&["write_accepted", "write_rejected"]))
}

/// Tests that measure against a tight tolerance: each holds the machine
/// alone (`Lab::alone`), and the test command runs them one at a time after
/// the rest (filter `alone::`).
mod alone {
    use super::*;

    #[test]
    fn a_fenced_store_rejects_the_resumed_holders_stale_write() {
        let (grants, writes) = table("fenced");
        // A's grant, then B's with a higher token ("17", then "18").
        let tokens: Vec<u64> = grants.iter().map(token).collect();
        assert_eq!(tokens.len(), 2, "{grants:?}");
        assert!(tokens[0] < tokens[1]);
        let (a, b) = (grants[0].get("worker"), grants[1].get("worker"));
        assert_ne!(a, b);
        // After B's grant, A writes with its old token: rejected. B's writes pass.
        let b_granted = grants[1].f64("t_ms");
        let after: Vec<&Row> = writes.iter().filter(|w| w.f64("t_ms") > b_granted).collect();
        let stale: Vec<&&Row> = after.iter().filter(|w| w.get("worker") == a).collect();
        assert_eq!(stale.len(), 1, "A writes once after resuming: {after:?}");
        assert_eq!((stale[0].get("event"), token(stale[0])), ("write_rejected", tokens[0]));
        assert!(after.iter().filter(|w| w.get("worker") == b).all(|w| w.get("event") == "write_accepted"));
    }

    #[test]
    fn an_unfenced_store_lets_the_stale_write_overwrite_the_newer_report() {
        let (grants, writes) = table("unfenced");
        let (a, b) = (grants[0].get("worker"), grants[1].get("worker"));
        let b_first_write = writes.iter().find(|w| w.get("worker") == b).expect("B writes").f64("t_ms");
        let stale =
            writes.iter().find(|w| w.get("worker") == a && w.f64("t_ms") > b_first_write).expect("A writes late");
        // Accepted after B had written: A's old result replaced B's newer one.
        assert_eq!(stale.get("event"), "write_accepted");
        assert_eq!(token(stale), token(&grants[0]));
    }
}
