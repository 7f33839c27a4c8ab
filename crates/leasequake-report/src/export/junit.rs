//! `--junit FILE`: each experiment a test suite, each of its `expect:` keys a
//! test case (a failure carries the measured values); an experiment without
//! `expect:` is one case that passes when its trials ran.

use std::fmt::Write;

use super::{ExperimentResult, Exporter};

pub struct JUnit;

use crate::html::escape as xml;

impl Exporter for JUnit {
    fn serialize(&self, results: &[ExperimentResult<'_>]) -> String {
        let cases = |r: &ExperimentResult<'_>| r.checks.len().max(1);
        let failures = |r: &ExperimentResult<'_>| r.checks.iter().filter(|c| !c.failures.is_empty()).count();
        let errors = |r: &ExperimentResult<'_>| usize::from(r.broke.is_some());
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"leasequake\" tests=\"{}\" failures=\"{}\" errors=\"{}\">\n",
            results.iter().map(cases).sum::<usize>(),
            results.iter().map(failures).sum::<usize>(),
            results.iter().map(errors).sum::<usize>(),
        );
        for r in results {
            let name = xml(&r.exp.name);
            let _ = writeln!(
                out,
                "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3}\">",
                cases(r),
                failures(r),
                errors(r),
                r.seconds
            );
            let _ = writeln!(out, "    <properties>");
            for (k, v) in [
                ("source", r.exp.source.display().to_string()),
                ("results", r.dir.display().to_string()),
                ("time_scale", r.exp.time_scale.to_string()),
                ("trials", r.summary.n.to_string()),
            ] {
                let _ = writeln!(out, "      <property name=\"{k}\" value=\"{}\"/>", xml(&v));
            }
            let _ = writeln!(out, "    </properties>");
            let error = r.broke.map(|e| format!("      <error message=\"{}\"/>\n", xml(e))).unwrap_or_default();
            if r.checks.is_empty() {
                let _ =
                    write!(out, "    <testcase classname=\"leasequake.{name}\" name=\"ran {} trials\"", r.summary.n);
                if error.is_empty() {
                    out += "/>\n";
                } else {
                    let _ = write!(out, ">\n{error}    </testcase>\n");
                }
            }
            for c in &r.checks {
                let _ = write!(out, "    <testcase classname=\"leasequake.{name}\" name=\"expect {}\"", xml(&c.expect));
                if c.failures.is_empty() && error.is_empty() {
                    out += "/>\n";
                    continue;
                }
                out += ">\n";
                if let Some(first) = c.failures.first() {
                    let _ = writeln!(
                        out,
                        "      <failure type=\"expect\" message=\"{}\">{}</failure>",
                        xml(first),
                        xml(&c.failures.join("\n"))
                    );
                }
                out += &error;
                out += "    </testcase>\n";
            }
            out += "  </testsuite>\n";
        }
        out += "</testsuites>\n";
        out
    }
}

#[cfg(test)]
mod tests {
    use super::xml;

    #[test]
    fn markup_and_control_characters_are_escaped() {
        assert_eq!(xml("a<b & \"c\" 'd'>\u{1b}"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt; ");
    }
}
