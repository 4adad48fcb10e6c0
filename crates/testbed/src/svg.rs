//! Text in a hand-written SVG document (the reports' plots and timelines): what must be
//! escaped in its text and attribute values.

/// `s` with the characters XML gives a meaning (`&`, `<`, `>`, `"`) escaped, for an element's
/// text or a quoted attribute value.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(
            escape(r#"a < b & "c" > d µs"#),
            "a &lt; b &amp; &quot;c&quot; &gt; d µs"
        );
    }
}
