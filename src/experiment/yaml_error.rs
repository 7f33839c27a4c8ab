//! How a YAML parse error is told: at the place it is, in words without
//! the parser's own prefix, with the nearest known key for an unknown one.

/// The first tab at or after 1-based (line, column), as (line, column);
/// the position itself if there is none.
pub(super) fn tab_after(text: &str, line: u64, column: u64) -> (u64, u64) {
    let found = text.lines().enumerate().skip(line.saturating_sub(1) as usize).find_map(|(i, l)| {
        let from = if i as u64 + 1 == line { column.saturating_sub(1) as usize } else { 0 };
        let col = l.char_indices().filter(|(b, _)| *b >= from).find(|(_, c)| *c == '\t')?.0;
        Some((i as u64 + 1, l[..col].chars().count() as u64 + 1))
    });
    found.unwrap_or((line, column))
}

/// serde-saphyr's message without its own location prefix and snippet (we
/// render both ourselves, with the real file name), with the nearest known
/// key suggested for an unknown one.
pub(super) fn saphyr_message(e: &serde_saphyr::Error) -> String {
    let full = e.to_string();
    let first = full.lines().next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // "line 3 column 1: unknown field ..." → "unknown field ..."
    let message = match first.split_once(": ") {
        Some((loc, rest)) if loc.starts_with("line ") => rest.to_string(),
        _ => first.to_string(),
    };
    suggest_field(&message).unwrap_or(message)
}

/// "unknown field `leese`, expected one of name, …, lease, …" →
/// "unknown field `leese` (did you mean `lease`?), expected one of …", when
/// one known key is within a typo or two of it.
fn suggest_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let list = rest.strip_prefix(", expected one of ").or_else(|| rest.strip_prefix(", expected "))?;
    let known = list.split(", ").map(|k| k.trim_matches('`'));
    let (best, distance) = known.map(|k| (k, edit_distance(field, k))).min_by_key(|(_, d)| *d)?;
    (distance <= (field.len() / 3).max(1)).then(|| format!("unknown field `{field}` (did you mean `{best}`?){rest}"))
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
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
