//! report.html: one self-contained page per run and per suite, to open
//! rather than read. The verdict tables are the suite README's own (the
//! same Markdown, rendered), the plots are images embedded in the page,
//! the trials' timelines inline SVG drawn here (a trial's timeline opens
//! in place), the host and its calibration are at the end. No script, no
//! style sheet, no font or image is fetched: the page shows the same
//! offline, years later.
//!
//! Everything that comes from a file is inert: raw HTML in Markdown is
//! shown as text, a link is live only to the web (http, https) or to a
//! file inside the results directory, an image only from inside it, and a
//! plot read back from disk is an image, which runs no script and fetches
//! nothing, whatever the file holds.

use base64::Engine;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd, html::push_html};

/// What a page shows below its tables.
pub enum Section {
    /// A plot read back from a file: its heading and the SVG document,
    /// shown as an image.
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
.plot svg,.plot img{max-width:100%;height:auto}\
";

/// Text for HTML or XML (the pages, the JUnit file): markup escaped, and
/// control characters other than a line break or tab made spaces (XML 1.0
/// has no place for them, and a page shows none).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && !matches!(c, '\n' | '\t' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Markdown (the README's dialect: tables, links) as HTML. A description
/// comes from a file: raw HTML in it is shown as text, never run; a link
/// stays a link only to the web or inside the results directory, an image
/// only from inside it; any other is its text.
pub fn markdown(md: &str) -> String {
    // Whether each open link (images nest in links) was kept.
    let (mut links, mut images) = (Vec::new(), Vec::new());
    let parser = Parser::new_ext(md, Options::ENABLE_TABLES).filter_map(|event| match event {
        Event::Html(t) | Event::InlineHtml(t) => Some(Event::Text(t)),
        Event::Start(Tag::Link { ref dest_url, .. }) => {
            let keep = web(dest_url) || inside(dest_url);
            links.push(keep);
            keep.then_some(event)
        }
        Event::End(TagEnd::Link) => links.pop().unwrap_or(false).then_some(event),
        Event::Start(Tag::Image { ref dest_url, .. }) => {
            let keep = inside(dest_url) && !dest_url.starts_with('#');
            images.push(keep);
            keep.then_some(event)
        }
        Event::End(TagEnd::Image) => images.pop().unwrap_or(false).then_some(event),
        e => Some(e),
    });
    let mut out = String::new();
    push_html(&mut out, parser);
    out
}

/// An http(s) address.
fn web(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    clean(url) && (lower.starts_with("http://") || lower.starts_with("https://"))
}

/// A relative address that stays inside the directory the page is in: no
/// scheme, not absolute, no `..`, however often it was %-encoded.
fn inside(url: &str) -> bool {
    if !clean(url) {
        return false;
    }
    let mut text = url.to_string();
    // Decoded until it no longer changes (a browser decodes once, a server
    // may again): %252e%252e is `..` too. A space is a file name's; a
    // control character is no one's.
    for _ in 0..4 {
        if text.chars().any(char::is_control) || text.starts_with('/') || text.contains('\\') {
            return false;
        }
        // A colon before the first slash, ? or # is a scheme (javascript:, data:, file:).
        let head = text.split(['/', '?', '#']).next().unwrap_or("");
        if head.contains(':') {
            return false;
        }
        let path = text.split(['?', '#']).next().unwrap_or("");
        if path.split('/').any(|segment| segment == "..") {
            return false;
        }
        let decoded = percent_decoded(&text);
        if decoded == text {
            return true;
        }
        text = decoded;
    }
    false
}

/// No whitespace or control character: a browser drops some of them
/// inside a scheme (`java\tscript:`).
fn clean(url: &str) -> bool {
    !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// `%2e` → `.`; an invalid escape stays as it is.
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An SVG document as an element to inline: without its XML declaration.
/// Only for SVG drawn here, never one read back from a file.
fn inline_svg(svg: &str) -> &str {
    match (svg.find("<svg"), svg.trim_start().starts_with("<?xml")) {
        (Some(i), true) => &svg[i..],
        _ => svg,
    }
}

/// An SVG document as an image in the page: shown, never run.
fn svg_image(alt: &str, svg: &str) -> String {
    let data = base64::engine::general_purpose::STANDARD.encode(svg.as_bytes());
    format!("<img alt=\"{}\" src=\"data:image/svg+xml;base64,{data}\">", escape(alt))
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
                out +=
                    &format!("<h2>{}</h2>\n<div class=\"plot\">{}</div>\n", escape(heading), svg_image(heading, svg));
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
        assert!(p.contains("<details open><summary>trial 1</summary><div class=\"plot\"><svg"), "{p}");
        assert!(p.contains("<img alt=\"dial\" src=\"data:image/svg+xml;base64,"), "{p}");
        assert!(p.contains("&lt;b&gt;"));
        assert!(link_reports(&p, &["k".into()]).contains("href=\"k/report.html\""));
    }

    #[test]
    fn a_link_stays_live_only_to_the_web_or_inside_the_directory() {
        for live in
            ["http://x.org/a", "HTTPS://x.org", "kill", "kill/report.html", "./a", "a%20b.svg", "#top", "a?b=c:d"]
        {
            let html = markdown(&format!("[x](<{live}>)"));
            assert!(html.contains("<a href="), "{live}: {html}");
        }
        let dead = [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,<script>1</script>",
            "file:///etc/passwd",
            "mailto:a@b",
            "vbscript:x",
            "../up",
            "a/../../up",
            "%2e%2e/up",
            "%252e%252e/up",
            "/etc/passwd",
            "//evil.org/x",
            "\\\\evil\\x",
            "java%0ascript:x",
        ];
        for url in dead {
            let html = markdown(&format!("[x](<{url}>) and <{url}>"));
            assert!(!html.contains("<a "), "{url}: {html}");
        }
        // An autolink to a scheme is its text.
        let html = markdown("<javascript:alert(1)>");
        assert!(!html.contains("<a ") && html.contains("javascript:alert(1)"), "{html}");
    }

    #[test]
    fn an_image_shows_only_from_inside_the_directory() {
        assert!(markdown("![p](dial.svg)").contains("<img src=\"dial.svg\""));
        for url in ["http://x.org/p.png", "https://x.org/p.png", "data:image/png;base64,AA", "../p.png", "/p.png"] {
            let html = markdown(&format!("![p]({url})"));
            assert!(!html.contains("<img"), "{url}: {html}");
            assert!(html.contains('p'), "the alt text stays: {html}");
        }
        // A live link around a dropped image stays a link.
        let html = markdown("[![p](http://x.org/p.png)](https://x.org)");
        assert!(html.contains("<a href=\"https://x.org\">p</a>"), "{html}");
    }

    #[test]
    fn a_plot_read_back_is_an_image_whatever_it_holds() {
        let svg = "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script>\
                   <foreignObject><iframe src=\"http://x.org\"/></foreignObject></svg>";
        let p = page("t", "", &[Section::Plot { heading: "dial \"x\"".into(), svg: svg.into() }]);
        assert!(!p.contains("<script") && !p.contains("<iframe") && !p.contains("<foreignObject"), "{p}");
        assert!(p.contains("<img alt=\"dial &quot;x&quot;\" src=\"data:image/svg+xml;base64,"), "{p}");
    }
}
