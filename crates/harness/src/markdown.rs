//! The docs as data, for the tests that check them against the code: the rows of a Markdown
//! table under a heading, and the backticked spans of a cell.

/// The body rows of the first table after the heading `heading` (`### Metrics`), as cells.
pub fn table(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let mut lines = doc.lines().skip_while(|l| l.trim_end() != heading);
    assert!(lines.next().is_some(), "no heading `{heading}`");
    let rows: Vec<Vec<String>> = lines
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // the header and its separator
        .map(cells)
        .collect();
    assert!(!rows.is_empty(), "no table under `{heading}`");
    rows
}

/// The cells of one table row; a `|` inside backticks belongs to its cell.
pub fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    let (mut out, mut cell, mut code) = (Vec::new(), String::new(), false);
    for c in inner.chars() {
        match c {
            '`' => {
                code = !code;
                cell.push(c);
            }
            '|' if !code => out.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => cell.push(c),
        }
    }
    out.push(cell.trim().to_owned());
    out
}

/// The backticked spans of a cell, in order.
pub fn spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}
