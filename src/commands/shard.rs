//! `--shard`: which of a run's units (experiment, sweep point, trial) this
//! process runs. Unit g of the run (counted over its experiments in load
//! order, each experiment's trials point by point) belongs to shard
//! g mod N, so every shard gets an even share of every point; each unit
//! keeps the trial number and seed it has in an unsharded run.
//!
//! K counts from 0, as Kubernetes' indexed Jobs do. The schedulers'
//! own conventions are taken explicitly: `k8s/N` reads
//! JOB_COMPLETION_INDEX (0-based), `slurm` reads SLURM_ARRAY_TASK_ID less
//! SLURM_ARRAY_TASK_MIN (a Slurm array may start anywhere) out of
//! SLURM_ARRAY_TASK_COUNT. A 1-based index is written `$((K-1))/N`.

use std::collections::BTreeSet;
use std::path::Path;

use crate::cli::ShardSpec;
use crate::error::Error;
use crate::report::host::ShardRecord;

/// Shard `index` of `count` (0 ≤ index < count).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    /// Whether this shard runs unit `g` of the run.
    pub fn owns(&self, g: u64) -> bool {
        g % self.count == self.index
    }
}

/// The shard a spec names, its index read from the scheduler's
/// environment where it says so; errors name the flag or the variable.
pub fn resolve(spec: &ShardSpec, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, Error> {
    let bad = |problem: String| Error::Conflict(format!("--shard: {problem}"));
    let var = |name: &str| -> Result<u64, Error> {
        let v = env(name).ok_or_else(|| bad(format!("{name} is not set")))?;
        v.trim().parse().map_err(|_| bad(format!("{name}={v:?} is not a whole number ≥ 0")))
    };
    let (index, count) = match spec {
        ShardSpec::Index(k, n) => (*k, *n),
        ShardSpec::Kubernetes(n) => (var("JOB_COMPLETION_INDEX")?, *n),
        ShardSpec::Slurm => {
            let (id, min, count) =
                (var("SLURM_ARRAY_TASK_ID")?, var("SLURM_ARRAY_TASK_MIN")?, var("SLURM_ARRAY_TASK_COUNT")?);
            let index = id
                .checked_sub(min)
                .ok_or_else(|| bad(format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}")))?;
            (index, count)
        }
    };
    if count == 0 || index >= count {
        return Err(bad(format!("shard {index} of {count}: the index counts from 0 and must be below the count")));
    }
    Ok(Shard { index, count })
}

/// One shard's directory of an experiment, as a merge sees it: the shard
/// it records and the trials it finished.
pub struct Piece<'a> {
    pub dir: &'a Path,
    pub shard: ShardRecord,
    pub trials: &'a BTreeSet<u32>,
}

/// Whether `pieces` are, together, exactly the `total` trials of one
/// experiment: every shard of one count there once, each holding all the
/// trials it owns and no other. The error says which directory is wrong
/// and what would mend it.
pub fn whole(pieces: &[Piece<'_>], total: u32) -> Result<(), String> {
    let Some(first) = pieces.first() else { return Err("no shard given".into()) };
    let (n, d) = (first.shard.count, |p: &Piece<'_>| p.dir.display().to_string());
    for p in pieces {
        if p.shard.count != n {
            return Err(format!(
                "{} is shard {} of {n} but {} is shard {} of {}: the shards of one run share their count",
                d(first),
                first.shard.index,
                d(p),
                p.shard.index,
                p.shard.count
            ));
        }
        if p.shard.first_unit != first.shard.first_unit {
            return Err(format!(
                "{} and {} number this experiment's units from {} and {}: they come from runs of different \
                 experiment lists",
                d(first),
                d(p),
                first.shard.first_unit,
                p.shard.first_unit
            ));
        }
    }
    for (i, p) in pieces.iter().enumerate() {
        if let Some(q) = pieces[..i].iter().find(|q| q.shard.index == p.shard.index) {
            return Err(format!("shard {} of {n} is given twice: {} and {}", p.shard.index, d(q), d(p)));
        }
    }
    let missing: Vec<String> =
        (0..n).filter(|k| pieces.iter().all(|p| p.shard.index != *k)).map(|k| k.to_string()).collect();
    if !missing.is_empty() {
        return Err(format!(
            "shard(s) {} of {n} missing: no directory given holds them, and their trials are part of the run",
            missing.join(", ")
        ));
    }
    for p in pieces {
        let of = format!("{} (shard {} of {n})", d(p), p.shard.index);
        if let Some(t) = p.trials.iter().find(|&&t| t == 0 || t > total || !p.shard.owns(u64::from(t - 1))) {
            let whose = if *t == 0 || *t > total {
                format!("beyond the run's {total}")
            } else {
                let owner = pieces.iter().find(|q| q.shard.owns(u64::from(t - 1))).map(&d).unwrap_or_default();
                format!("which belongs to {owner}")
            };
            return Err(format!("{of} holds trial {t}, {whose}: two shards overlap, or a directory was edited"));
        }
        let own: Vec<u32> = (1..=total).filter(|t| p.shard.owns(u64::from(t - 1))).collect();
        let lacks: Vec<String> = own.iter().filter(|t| !p.trials.contains(t)).map(u32::to_string).collect();
        if !lacks.is_empty() {
            return Err(format!(
                "{of} lacks trial(s) {} of its {}: finish it first with `leasequake run --resume {}`",
                super::inputs::abbreviate(&lacks),
                own.len(),
                d(p)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn every_unit_has_exactly_one_shard() {
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        for g in 0..100 {
            assert_eq!(shards.iter().filter(|s| s.owns(g)).count(), 1);
        }
    }

    #[test]
    fn the_schedulers_conventions_are_read_explicitly() {
        let none = env(&[]);
        assert_eq!(resolve(&ShardSpec::Index(2, 4), &none).unwrap(), Shard { index: 2, count: 4 });
        let k8s = env(&[("JOB_COMPLETION_INDEX", "3")]);
        assert_eq!(resolve(&ShardSpec::Kubernetes(4), &k8s).unwrap(), Shard { index: 3, count: 4 });
        // A Slurm array 1-8: task 1 is shard 0 of 8.
        let slurm =
            env(&[("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_MIN", "1"), ("SLURM_ARRAY_TASK_COUNT", "8")]);
        assert_eq!(resolve(&ShardSpec::Slurm, &slurm).unwrap(), Shard { index: 0, count: 8 });
        let err = |spec, e: &dyn Fn(&str) -> Option<String>| resolve(spec, e).unwrap_err().to_string();
        assert!(err(&ShardSpec::Index(4, 4), &none).contains("counts from 0"));
        assert!(err(&ShardSpec::Kubernetes(4), &none).contains("JOB_COMPLETION_INDEX is not set"));
        assert!(err(&ShardSpec::Kubernetes(4), &env(&[("JOB_COMPLETION_INDEX", "x")])).contains("not a whole number"));
    }

    fn set(trials: &[u32]) -> BTreeSet<u32> {
        trials.iter().copied().collect()
    }

    fn piece<'a>(dir: &'a str, index: u64, count: u64, trials: &'a BTreeSet<u32>) -> Piece<'a> {
        Piece { dir: Path::new(dir), shard: ShardRecord { index, count, first_unit: 0 }, trials }
    }

    #[test]
    fn a_merge_needs_every_shard_once_each_whole() {
        // 7 trials in 3 shards: 1 4 7 | 2 5 | 3 6.
        let (a, b, c) = (set(&[1, 4, 7]), set(&[2, 5]), set(&[3, 6]));
        assert_eq!(whole(&[piece("a", 0, 3, &a), piece("b", 1, 3, &b), piece("c", 2, 3, &c)], 7), Ok(()));
        let err = |pieces: &[Piece<'_>]| whole(pieces, 7).unwrap_err();
        assert!(err(&[piece("a", 0, 3, &a), piece("b", 1, 3, &b)]).contains("shard(s) 2 of 3 missing"));
        assert!(
            err(&[piece("a", 0, 3, &a), piece("b", 1, 3, &b), piece("b2", 1, 3, &b), piece("c", 2, 3, &c)])
                .contains("shard 1 of 3 is given twice: b and b2")
        );
        assert!(err(&[piece("a", 0, 3, &a), piece("b", 1, 2, &b)]).contains("share their count"));
        let short = set(&[1, 4]);
        let e = err(&[piece("a", 0, 3, &short), piece("b", 1, 3, &b), piece("c", 2, 3, &c)]);
        assert!(e.contains("a (shard 0 of 3) lacks trial(s) 7 of its 3") && e.contains("--resume a"), "{e}");
        let stray = set(&[1, 2, 4, 7]);
        let e = err(&[piece("a", 0, 3, &stray), piece("b", 1, 3, &b), piece("c", 2, 3, &c)]);
        assert!(e.contains("holds trial 2, which belongs to b"), "{e}");
        let beyond = set(&[3, 6, 9]);
        assert!(err(&[piece("a", 0, 3, &a), piece("b", 1, 3, &b), piece("c", 2, 3, &beyond)]).contains("beyond"));
    }
}
