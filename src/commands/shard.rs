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

use crate::cli::ShardSpec;
use crate::error::Error;

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
}
