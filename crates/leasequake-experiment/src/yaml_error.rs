//! How a YAML parse error is told: at the place it is, in words without
//! the parser's own prefix, with the nearest known key for an unknown one.

/// A parse error as we tell it: (line, column, message), at the place a
/// person must fix, in our words.
pub(super) fn explain(text: &str, e: &serde_saphyr::Error) -> (u64, u64, String) {
    let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    let message = saphyr_message(e);
    // The parser reports the scalar it was reading, not the tab it found
    // after it: point at the tab.
    if message.contains("found a tab") {
        let (line, column) = tab_after(text, line, column);
        return (line, column, message);
    }
    // A key indented out of its mapping leaves the mapping without it:
    // point at the key, where the fix is.
    let missing = message.strip_prefix("missing field `").and_then(|r| r.split_once('`')).map(|(f, _)| f);
    if let Some(field) = missing {
        if let Some((l, c)) = misindented(text, line, field) {
            return (l, c, format!("{message}: line {l} gives `{field}` at another indent than the keys beside it"));
        }
        if let Some(placed) = missing_setting(text, line, column, field) {
            return placed;
        }
    }
    // A line one space off its neighbours: the parser's complaint comes
    // from the structure it made of it, somewhere near.
    let structural = missing.is_some()
        || ["mapping values are not allowed", "did not find expected", "while parsing a block"]
            .iter()
            .any(|m| message.contains(m));
    if structural && let Some((l, c, found, beside)) = stray_indent(text, line, missing.is_some()) {
        let spaces = |n: usize| if n == 1 { "1 space".to_string() } else { format!("{n} spaces") };
        return (
            l,
            c,
            format!(
                "{message}: line {l} is indented {}, the line above it {}: YAML reads a line by its indent",
                spaces(found),
                spaces(beside)
            ),
        );
    }
    (line, column, message)
}

/// The column a line's key starts at, a list item's dash passed over.
fn key_column(l: &str) -> usize {
    let spaces = l.len() - l.trim_start().len();
    match l.trim_start().strip_prefix("- ") {
        Some(after) => spaces + 2 + (after.len() - after.trim_start().len()),
        None => spaces,
    }
}

/// Which lines hold keys the indent rule applies to: not blank, not a
/// comment, not the body of a block scalar (`description: >`), not the
/// continuation of a flow mapping or list left open on a line above.
fn keyed_lines(lines: &[&str]) -> Vec<bool> {
    let mut keyed = Vec::with_capacity(lines.len());
    let (mut scalar_above, mut depth) = (None::<usize>, 0i64);
    for l in lines {
        let indent = l.len() - l.trim_start().len();
        let blank = l.trim().is_empty() || l.trim_start().starts_with('#');
        if let Some(key_indent) = scalar_above {
            if blank || indent > key_indent {
                keyed.push(false);
                continue;
            }
            scalar_above = None;
        }
        keyed.push(!blank && depth == 0);
        let code = l.find(" #").map_or(*l, |c| &l[..c]);
        for c in code.chars() {
            match c {
                '{' | '[' => depth += 1,
                '}' | ']' => depth -= 1,
                _ => {}
            }
        }
        depth = depth.max(0);
        let value = code.split_once(": ").map_or("", |(_, v)| v).trim();
        if depth == 0 && (value.starts_with('|') || value.starts_with('>')) {
            scalar_above = Some(indent);
        }
    }
    keyed
}

/// A line whose key starts an odd number of columns from the key of the
/// keyed line above it (indents go in steps of two or four), as (line,
/// column, its indent, the indent above), 1-based. `after`: the parser
/// found a mapping without a field at `line`, so the line is looked for
/// below it, within the mapping; otherwise at or above `line`, within its
/// top-level section, the nearest.
fn stray_indent(text: &str, line: u64, after: bool) -> Option<(u64, u64, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let at = (line.checked_sub(1)? as usize).min(lines.len().checked_sub(1)?);
    let keyed = keyed_lines(&lines);
    let leading = |l: &str| l.len() - l.trim_start().len();
    let range: Vec<usize> = if after {
        // The mapping's lines: those indented past its list dash, or at
        // least as far as its first key.
        let base = leading(lines[at]);
        let dash = lines[at].trim_start().starts_with("- ");
        let within =
            |i: &usize| !keyed[*i] || if dash { leading(lines[*i]) > base } else { leading(lines[*i]) >= base };
        std::iter::once(at).chain((at + 1..lines.len()).take_while(within)).collect()
    } else {
        let top = |l: &str| !l.is_empty() && !l.starts_with([' ', '#', '-']);
        let start = (0..=at).rev().find(|&i| top(lines[i]))?;
        (start..=at).collect()
    };
    let columns: Vec<(usize, usize)> =
        range.into_iter().filter(|&i| keyed[i]).map(|i| (i, key_column(lines[i]))).collect();
    let mut strays = columns.windows(2).filter_map(|w| {
        let ((_, above), (i, col)) = (w[0], w[1]);
        (col.abs_diff(above) % 2 == 1).then_some((i as u64 + 1, col as u64 + 1, col, above))
    });
    if after { strays.next() } else { strays.next_back() }
}

/// The first tab at or after 1-based (line, column), as (line, column);
/// the position itself if there is none.
fn tab_after(text: &str, line: u64, column: u64) -> (u64, u64) {
    let found = text.lines().enumerate().skip(line.saturating_sub(1) as usize).find_map(|(i, l)| {
        let from = if i as u64 + 1 == line { column.saturating_sub(1) as usize } else { 0 };
        let col = l.char_indices().filter(|(b, _)| *b >= from).find(|(_, c)| *c == '\t')?.0;
        Some((i as u64 + 1, l[..col].chars().count() as u64 + 1))
    });
    found.unwrap_or((line, column))
}

/// A setting every experiment must give, missing from the file's top
/// level (the parser places it at the mapping's last key, column 1): the
/// 1-based (line, column) of the file's first setting, and what to write.
fn missing_setting(text: &str, line: u64, column: u64, field: &str) -> Option<(u64, u64, String)> {
    let example = match field {
        "name" => "name: my-experiment",
        "workers" => "workers: 3",
        _ => return None,
    };
    let top_level = column == 1 && text.lines().nth(line.checked_sub(1)? as usize).is_some_and(|l| !l.starts_with('-'));
    if !top_level {
        return None;
    }
    let first = text.lines().position(|l| !(l.trim().is_empty() || l.starts_with('#'))).unwrap_or(0);
    let message = format!("the file gives no `{field}:`, which every experiment needs (e.g. `{example}`)");
    Some((first as u64 + 1, 1, message))
}

/// A mapping that lacks `field` (the parser's "missing field" at
/// `line`): where a nearby later line gives that key at another indent
/// than the mapping's keys, the 1-based (line, column) of that key, the
/// place a person must fix.
fn misindented(text: &str, line: u64, field: &str) -> Option<(u64, u64)> {
    let lines: Vec<&str> = text.lines().collect();
    let at = line.checked_sub(1)? as usize;
    let mapping = key_column(lines.get(at)?);
    // Within the section: up to the next top-level key.
    let section = lines
        .iter()
        .enumerate()
        .skip(at + 1)
        .take(50)
        .take_while(|(_, l)| l.trim().is_empty() || l.starts_with(' ') || l.starts_with('-') || l.starts_with('#'));
    section.into_iter().find_map(|(i, l)| {
        let col = key_column(l);
        let key = l[col.min(l.len())..].split_once(':')?.0.trim();
        (key == field && col != mapping).then(|| (i as u64 + 1, col as u64 + 1))
    })
}

/// serde-saphyr's message without its own location prefix and snippet (we
/// render both ourselves, with the real file name), with the nearest known
/// key suggested for an unknown one.
fn saphyr_message(e: &serde_saphyr::Error) -> String {
    let full = e.to_string();
    tidy(full.lines().next().unwrap_or_default())
}

/// The parser's first line in our words: no location prefix, no advice
/// meant for the parser's caller, the nearest known name suggested.
fn tidy(first: &str) -> String {
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // "line 3 column 1: unknown field ..." → "unknown field ..."
    let message = match first.split_once(": ") {
        Some((loc, rest)) if loc.starts_with("line ") => rest.to_string(),
        _ => first.to_string(),
    };
    // "duplicate mapping key: lease, set DuplicateKeyPolicy in Options if
    // acceptable": the second half is advice to the program, not the user.
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split_once(", set ").map_or(rest, |(k, _)| k).trim();
        return format!("`{key}` is given twice; each setting may appear once");
    }
    suggest("unknown field `", &message)
        .or_else(|| metric_outside_metrics(&message))
        .or_else(|| suggest("unknown variant `", &message))
        .unwrap_or(message)
}

/// `expect: {summary.gaps: …}`: a metric's bound written beside the
/// expect keys rather than under `metrics:`.
fn metric_outside_metrics(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    (field.contains('.') && rest.contains("metrics")).then(|| {
        format!("unknown field `{field}` (a metric's bound goes under `metrics:`, e.g. `metrics: {{{field}: {{max: 0}}}}`){rest}")
    })
}

/// "unknown field `leese`, expected one of name, …, lease, …" →
/// "unknown field `leese` (did you mean `lease`?), expected one of …", when
/// one known name is within a typo or two of it (a signal's `SIG` prefix
/// aside: `sigkil` → `kill`); the same for an unknown variant.
fn suggest(prefix: &str, message: &str) -> Option<String> {
    let rest = message.strip_prefix(prefix)?;
    let (field, rest) = rest.split_once('`')?;
    let list = rest.strip_prefix(", expected one of ").or_else(|| rest.strip_prefix(", expected "))?;
    let lower = field.to_ascii_lowercase();
    let bare = lower.strip_prefix("sig").unwrap_or(&lower);
    let distance = |k: &str| edit_distance(&lower, k).min(edit_distance(bare, k));
    let known = list.split(", ").map(|k| k.trim_matches('`'));
    let (best, d) = known.map(|k| (k, distance(k))).min_by_key(|(_, d)| *d)?;
    (d <= (bare.len() / 3).max(1)).then(|| format!("{prefix}{field}` (did you mean `{best}`?){rest}"))
}

/// Levenshtein distance, by characters.
pub(super) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_s_words_are_ours() {
        assert_eq!(
            tidy("line 4 column 1: duplicate mapping key: lease, set DuplicateKeyPolicy in Options if acceptable"),
            "`lease` is given twice; each setting may appear once"
        );
        assert_eq!(
            tidy("unknown variant `sigkil`, expected one of `kill`, `term`, `pause`"),
            "unknown variant `sigkil` (did you mean `kill`?), expected one of `kill`, `term`, `pause`"
        );
        assert_eq!(
            tidy("unknown field `leese`, expected one of `name`, `lease`"),
            "unknown field `leese` (did you mean `lease`?), expected one of `name`, `lease`"
        );
        assert_eq!(
            tidy("unknown variant `zzz`, expected one of `kill`"),
            "unknown variant `zzz`, expected one of `kill`"
        );
    }

    #[test]
    fn a_metric_beside_the_expect_keys_is_sent_under_metrics() {
        let said = tidy("unknown field `summary.gaps`, expected one of max_leaders, disturbed, metrics");
        assert!(said.starts_with("unknown field `summary.gaps` (a metric's bound goes under `metrics:`"), "{said}");
    }

    #[test]
    fn a_line_one_space_off_its_neighbours_is_found() {
        let under = "name: x\nworkers: 3\nfaults:\n  - at: 1s\n   target: leader\n    action: kill\n";
        assert_eq!(stray_indent(under, 4, true), Some((5, 4, 3, 4)));
        let over = "name: x\nworkers: 3\nfaults:\n  - at: 1s\n    target: leader\n     action: kill\n";
        assert_eq!(stray_indent(over, 6, false), Some((6, 6, 5, 4)));
        let section = "name: x\nworkers: 3\nworker:\n  acquire: excl\n expiry: exact\n";
        assert_eq!(stray_indent(section, 5, false), Some((5, 2, 1, 2)));
        let fine = "name: x\nfaults:\n  - at: 1s\n    target: leader\nworker:\n  acquire: excl\n";
        assert_eq!(stray_indent(fine, 3, true), None);
    }

    #[test]
    fn a_block_scalar_a_flow_mapping_and_lines_past_the_error_are_no_stray() {
        // Text indented as a person writes it inside `>`, then the real error below.
        let note = "name: x\nreference:\n  note: >\n    The blog says\n     (indented quote)\n  claim: 9.53 s: x\n";
        assert_eq!(stray_indent(note, 6, false), None);
        // A flow mapping continued on a second line.
        let flow = "name: x\nfaults:\n  - {at: 1s,\n     target: leader}\n";
        assert_eq!(stray_indent(flow, 3, true), None);
        // A script's odd indent inside `|`.
        let script = "name: x\nprogram:\n  env:\n    S: |\n      if x; then\n         y\n      fi\n";
        assert_eq!(stray_indent(script, 3, true), None);
        // Above the parser's line only, the nearest.
        let late = "name: x\nworker:\n  acquire: excl\n expiry: exact\n  mode: loop\n   a: b\n";
        assert_eq!(stray_indent(late, 4, false), Some((4, 2, 1, 2)));
    }

    #[test]
    fn a_missing_setting_is_placed_at_the_top_of_the_file() {
        let text = "# a comment\nname: x\nlease: 9s\n";
        let (line, column, msg) = missing_setting(text, 3, 1, "workers").unwrap();
        assert_eq!((line, column), (2, 1));
        assert_eq!(msg, "the file gives no `workers:`, which every experiment needs (e.g. `workers: 3`)");
        // A nested mapping's field is the parser's to place.
        assert_eq!(missing_setting("name: x\nfaults:\n  - at: 1s\n", 3, 5, "workers"), None);
        assert_eq!(missing_setting(text, 3, 1, "action"), None);
    }

    #[test]
    fn a_key_indented_out_of_its_mapping_is_found() {
        let text = "name: x\nfaults:\n  - at: 1s\n    target: leader\n   action: kill\n";
        assert_eq!(misindented(text, 4, "action"), Some((5, 4)));
        assert_eq!(misindented(text, 3, "action"), Some((5, 4)), "from the item's first line too");
        let fine = "faults:\n  - at: 1s\n    target: leader\n  - at: 2s\n    action: kill\n";
        assert_eq!(misindented(fine, 2, "action"), None, "the next item's own key is not misplaced");
        let later = "faults:\n  - at: 1s\nother:\n  action: kill\n";
        assert_eq!(misindented(later, 2, "action"), None, "another section's key is not this mapping's");
    }
}
