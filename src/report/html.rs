//! report.html: one self-contained page per run and per suite, to open
//! rather than read. The verdict tables are the suite README's own (the
//! same Markdown, rendered), the plots and the trials' timelines are
//! inline SVG (a trial's timeline opens in place), the host and its
//! calibration are at the end. No script, no style sheet, no font or
//! image is fetched: the page shows the same offline, years later.

use pulldown_cmark::{Options, Parser, html::push_html};

/// What a page shows below its tables.
pub enum Section {
    /// A plot: its heading and the SVG document.
    Plot { heading: String, svg: String },
    /// Timelines to open one at a time: (summary line, SVG).
    Timelines(Vec<(String, String)>),
    /// Preformatted text (host.json).
    Text { heading: String, text: String },
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}\
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}\
th,td{border:1px solid #ccc;padding:.3em .55em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}tr:nth-child(even) td{background:#fafafa}\
code{background:#f3f3f3;padding:0 .2em;border-radius:3px}\
pre{background:#f6f6f6;padding:.8em;overflow:auto;font-size:.85em}\
details{margin:.3em 0}summary{cursor:pointer}\
.plot svg{max-width:100%;height:auto}\
";

/// Text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Markdown (the README's dialect: tables, links) as HTML. Raw HTML in it
/// is shown as text, never run: a description comes from a file.
pub fn markdown(md: &str) -> String {
    let parser = Parser::new_ext(md, Options::ENABLE_TABLES).map(|event| match event {
        pulldown_cmark::Event::Html(t) | pulldown_cmark::Event::InlineHtml(t) => pulldown_cmark::Event::Text(t),
        e => e,
    });
    let mut out = String::new();
    push_html(&mut out, parser);
    out
}

/// An SVG document as an element to inline: without its XML declaration.
fn inline_svg(svg: &str) -> &str {
    match (svg.find("<svg"), svg.trim_start().starts_with("<?xml")) {
        (Some(i), true) => &svg[i..],
        _ => svg,
    }
}

/// The whole page.
pub fn page(title: &str, md: &str, sections: &[Section]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(title)
    );
    out += &markdown(md);
    for s in sections {
        match s {
            Section::Plot { heading, svg } => {
                out += &format!("<h2>{}</h2>\n<div class=\"plot\">{}</div>\n", escape(heading), inline_svg(svg));
            }
            Section::Timelines(trials) if !trials.is_empty() => {
                out += "<h2>Timelines</h2>\n<p>One lane per worker; open a trial to see it.</p>\n";
                for (i, (summary, svg)) in trials.iter().enumerate() {
                    let open = if i == 0 { " open" } else { "" };
                    out += &format!(
                        "<details{open}><summary>{}</summary><div class=\"plot\">{}</div></details>\n",
                        escape(summary),
                        inline_svg(svg)
                    );
                }
            }
            Section::Timelines(_) => {}
            Section::Text { heading, text } => {
                out += &format!("<h2>{}</h2>\n<pre>{}</pre>\n", escape(heading), escape(text));
            }
        }
    }
    out += "</body>\n</html>\n";
    out
}

/// Links of a suite's README to an experiment's directory point at that
/// experiment's report instead.
pub fn link_reports(html: &str, dirs: &[String]) -> String {
    let mut out = html.to_string();
    for d in dirs {
        out = out.replace(&format!("href=\"{}\"", escape(d)), &format!("href=\"{}/report.html\"", escape(d)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render_and_raw_html_stays_text() {
        let html = markdown("| a | b |\n|---|---|\n| 1 | <script>x</script> |\n");
        assert!(html.contains("<table>") && html.contains("<td>1</td>"), "{html}");
        assert!(!html.contains("<script>") && html.contains("&lt;script&gt;"), "{html}");
    }

    #[test]
    fn a_page_inlines_its_plots_and_links_reports() {
        let svg = "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>";
        let p = page(
            "t <1>",
            "[k](k)\n",
            &[
                Section::Plot { heading: "dial".into(), svg: svg.into() },
                Section::Timelines(vec![("trial 1".into(), svg.into())]),
                Section::Text { heading: "host".into(), text: "{\"a\": \"<b>\"}".into() },
            ],
        );
        assert!(p.contains("<title>t &lt;1&gt;</title>"));
        assert!(!p.contains("<?xml") && p.contains("<details open><summary>trial 1</summary>"));
        assert!(p.contains("&lt;b&gt;"));
        assert!(link_reports(&p, &["k".into()]).contains("href=\"k/report.html\""));
    }
}
