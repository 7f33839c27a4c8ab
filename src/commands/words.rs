//! How the terminal says a number: counts with their noun, long times in
//! the unit a person reads them in.

/// A count and its noun: "1 trial", "3 trials".
pub fn counted(n: u64, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

/// Seconds as a person reads them: 75 s, 12.5 min, 4.2 h.
pub fn human(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}
