//! What a shrink found, as pages: its own README.md (the shrunk and the
//! recorded schedule, every candidate it tried, the confirmation on fresh
//! seeds) and a suite README's table of shrinks. Rendered from what the
//! shrink hands over; the search and its runs are the shrink's.

use std::path::{Path, PathBuf};

use crate::check::stats::wilson95;
use crate::host::Machine;
use crate::model::{Dur, Fault, PauseLen};

/// A scaled duration in the experiment's own time, as a person writes it:
/// `2.47s`, `11s`, `0.2s`.
pub fn own_time(d: Dur, scale: f64) -> String {
    let text = format!("{:.3}", d.as_us() as f64 / 1e6 / scale);
    format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
}

/// One candidate the search tried (a row of steps.csv).
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub step: usize,
    pub phase: &'static str,
    pub change: String,
    pub faults: usize,
    pub hits: u32,
    pub runs: u32,
    pub kept: bool,
}

/// Of the confirmation runs, those the machine did not disturb (the
/// checker's judgement, as in their trials.csv), and how many of them
/// reproduced: a rate published with disturbed runs in it says so.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Undisturbed {
    pub hits: u32,
    pub runs: u32,
}

impl Undisturbed {
    /// "; ⚠ 2 of them disturbed by the machine …: 18/18 without them (…)",
    /// or nothing when none was.
    pub fn words(&self, runs: u32) -> String {
        if self.runs >= runs {
            return String::new();
        }
        let (lo, hi) = wilson95(self.hits as usize, self.runs as usize);
        format!(
            "; ⚠ {} of them disturbed by the machine (named in `confirm/trials.csv`): {}/{} without them \
             (95 % CI {:.1}–{:.1} %)",
            runs - self.runs,
            self.hits,
            self.runs,
            lo * 100.0,
            hi * 100.0
        )
    }
}

/// The shrunk schedule's confirmation on fresh seeds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Confirm {
    /// The recorded schedule did not reproduce: nothing to confirm.
    Nothing,
    /// Not run (yet, or cut short).
    Pending,
    /// Reproduced in k of n runs; a run that did.
    Done(u32, u32, Option<u32>, Undisturbed),
}

/// How the search was run.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Runs of each candidate, and how many must reproduce.
    pub repeats: u32,
    pub need: u32,
    /// Trials the search could spend, what it spent, and whether it ran out.
    pub budget: u32,
    pub spent: u32,
    pub out_of_budget: bool,
}

/// One shrink's page.
pub struct Page<'a> {
    pub name: &'a str,
    pub trial: u32,
    /// The run it came from, and the trial's seed.
    pub from: &'a Path,
    pub seed: u64,
    pub violation: &'a str,
    pub time_scale: f64,
    pub recorded: &'a [Fault],
    pub shrunk: &'a [Fault],
    pub steps: &'a [Step],
    pub budget: Budget,
    pub confirm: Confirm,
    /// Wall time, and the machine it ran on.
    pub seconds: f64,
    pub machine: &'a Machine,
}

/// A shrink's README.md.
pub fn readme(p: &Page<'_>) -> String {
    let own = |d: Dur| own_time(d, p.time_scale);
    let b = &p.budget;
    let mut s = format!(
        "# Shrunk: {}, trial {}\n\nFrom `{}`, trial {} (seed {}), which violated **{}**.\n\n",
        p.name,
        p.trial,
        p.from.display(),
        p.trial,
        p.seed,
        p.violation
    );
    match p.confirm {
        Confirm::Done(k, n, _, clean) => {
            let (lo, hi) = wilson95(k as usize, n as usize);
            s += &format!(
                "- Faults: **{} → {}**.\n- Reproduction rate of the shrunk schedule: **{k}/{n}** runs \
                 (95 % CI {:.1}–{:.1} %), fresh seeds{}.\n",
                p.recorded.len(),
                p.shrunk.len(),
                lo * 100.0,
                hi * 100.0,
                clean.words(n)
            );
        }
        Confirm::Pending => {
            s += &format!(
                "- Faults: **{} → {}**.\n- Reproduction rate of the shrunk schedule: not yet measured (its \
                 confirmation runs under `confirm/`).\n",
                p.recorded.len(),
                p.shrunk.len()
            );
        }
        Confirm::Nothing => {
            s += &format!(
                "- The recorded schedule did **not** reproduce: it failed the same way in fewer than {} of {} runs; \
                 nothing was shrunk.\n",
                b.need, b.repeats
            );
        }
    }
    s += &format!(
        "- Search: {} candidates, {} trials of a budget of {}{}; a candidate was kept when at least {} of its {} runs \
         failed the same way; then the confirmation's runs.\n- Wall time: {:.0} s on {} ({} cores, {}).\n\n",
        p.steps.len(),
        b.spent,
        b.budget,
        if b.out_of_budget { " (it ran out)" } else { "" },
        b.need,
        b.repeats,
        p.seconds,
        p.machine.hostname,
        p.machine.cores,
        p.machine.cpu
    );
    s += &format!(
        "Times are in the experiment's own time (time scale {}). `shrunk.yaml` runs the shrunk schedule; \
         `steps.csv` lists every candidate, whose results are under `candidates/`; `confirm/` holds the \
         confirmation runs.\n\n## The shrunk schedule\n\n",
        p.time_scale
    );
    s += &schedule_table(p.shrunk, &own);
    s += "\n## The recorded schedule\n\n";
    s += &schedule_table(p.recorded, &own);
    s += "\n## Steps\n\n| step | phase | change | faults | reproduced | kept |\n|---|---|---|---|---|---|\n";
    for st in p.steps {
        s += &format!(
            "| {} | {} | {} | {} | {}/{} | {} |\n",
            st.step,
            st.phase,
            st.change,
            st.faults,
            st.hits,
            st.runs,
            if st.kept { "yes" } else { "" }
        );
    }
    if let Confirm::Done(_, _, Some(t), _) = p.confirm {
        s += &format!("\n## One reproducing run\n\nConfirmation trial {t}:\n\n![timeline](timeline.svg)\n");
    }
    s
}

fn schedule_table(faults: &[Fault], own: &dyn Fn(Dur) -> String) -> String {
    if faults.is_empty() {
        return "No faults at all.\n".into();
    }
    let mut s = String::from("| # | when | action | target | length |\n|---|---|---|---|---|\n");
    for (i, f) in faults.iter().enumerate() {
        let when = match f.after {
            Some(a) => {
                format!("{} after the target's next `{}` (armed at {})", own(a.delay), a.event.name(), own(f.at))
            }
            None => own(f.at),
        };
        let len = match &f.duration {
            Some(PauseLen::Fixed(d)) => own(*d),
            Some(l) => l.scaled(1.0).to_yaml(),
            None => String::new(),
        };
        s += &format!("| {} | {when} | {} | {} | {len} |\n", i + 1, f.action.name(), f.target);
    }
    s
}

/// One shrink, as a run's README and roll-up report it.
pub struct Shrunk {
    pub dir: PathBuf,
    pub trial: u32,
    pub violation: String,
    pub recorded: usize,
    pub left: usize,
    /// Reproduced in k of n confirmation runs (none: the recorded schedule
    /// did not reproduce).
    pub confirmed: Option<(u32, u32)>,
    /// The same over the confirmation runs the machine did not disturb.
    pub undisturbed: Option<(u32, u32)>,
    pub spent: u32,
    pub candidates: usize,
    pub seconds: f64,
    pub out_of_budget: bool,
}

/// The heading of a suite README's table of shrinks.
pub const SHRUNK_HEADING: &str = "## Shrunk";

/// A suite's table of what `run --shrink` found, one row per experiment
/// (links relative to `base`, where the README is).
pub fn table(rows: &[(String, Shrunk)], base: &Path) -> String {
    let mut s = format!(
        "\n{SHRUNK_HEADING}\n\nEach experiment's first trial that violated something (the first undisturbed one, where \
         there is one), shrunk by `run --shrink` \
         (docs/shrink.md): the faults it had → the fewest that still violate it the same way, and how \
         often the shrunk schedule did so on fresh seeds.\n\n\
         | experiment | trial | violation | faults | reproduced | 95 % CI | trials (search + confirmation) | candidates | wall time |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for (name, x) in rows {
        let link = x.dir.strip_prefix(base).unwrap_or(&x.dir).join("README.md");
        let (rate, ci) = match x.confirmed {
            Some((k, n)) => {
                let (lo, hi) = wilson95(k as usize, n as usize);
                let mut rate = format!("{k}/{n}");
                if let Some((k, m)) = x.undisturbed.filter(|(_, m)| *m < n) {
                    rate += &format!(" (⚠ {} disturbed; {k}/{m} without them)", n - m);
                }
                (rate, format!("{:.0}–{:.0} %", lo * 100.0, hi * 100.0))
            }
            None => ("did not reproduce".to_string(), String::new()),
        };
        s += &format!(
            "| [{name}]({}) | {} | {} | {} → {} | {rate} | {ci} | {} + {}{} | {} | {:.0} s |\n",
            link.display(),
            x.trial,
            x.violation,
            x.recorded,
            x.left,
            x.spent,
            x.confirmed.map_or(0, |(_, n)| n),
            if x.out_of_budget { " (budget spent)" } else { "" },
            x.candidates,
            x.seconds
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shrunk(confirmed: (u32, u32), undisturbed: (u32, u32)) -> Shrunk {
        Shrunk {
            dir: PathBuf::from("results/x/shrink/trial-2"),
            trial: 2,
            violation: "double-leader".into(),
            recorded: 4,
            left: 1,
            confirmed: Some(confirmed),
            undisturbed: Some(undisturbed),
            spent: 24,
            candidates: 6,
            seconds: 57.0,
            out_of_budget: false,
        }
    }

    #[test]
    fn a_rate_with_disturbed_runs_in_it_gives_the_rate_without_them_too() {
        let clean = Undisturbed { hits: 18, runs: 18 };
        assert_eq!(
            clean.words(20),
            "; ⚠ 2 of them disturbed by the machine (named in `confirm/trials.csv`): 18/18 without them \
             (95 % CI 82.4–100.0 %)"
        );
        assert_eq!(Undisturbed { hits: 20, runs: 20 }.words(20), "", "none disturbed: nothing to say");
        let rows = vec![("naive".to_string(), shrunk((20, 20), (18, 18)))];
        let text = table(&rows, Path::new("results/x"));
        assert!(text.contains("| 20/20 (⚠ 2 disturbed; 18/18 without them) | 84–100 % |"), "{text}");
        let rows = vec![("naive".to_string(), shrunk((20, 20), (20, 20)))];
        let text = table(&rows, Path::new("results/x"));
        assert!(text.contains("| 20/20 | 84–100 % |") && !text.contains('⚠'), "{text}");
    }

    #[test]
    fn a_time_is_written_in_the_experiments_own_time() {
        assert_eq!(own_time(Dur::from_ms(247), 0.1), "2.47s");
        assert_eq!(own_time(Dur::from_secs(11), 1.0), "11s");
    }
}
