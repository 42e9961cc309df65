//! How an error message quotes a piece of the file: cut short, so a line of megabytes never
//! floods the terminal. Every reader (pickle, msMemScope, profiler) quotes through here.

/// Quoted values in messages are cut to this many characters.
const QUOTE_CHARS: usize = 60;

/// `text` cut to [`QUOTE_CHARS`] characters, with an ellipsis when cut.
pub(crate) fn quoted(text: &str) -> String {
    let mut chars = text.chars();
    let cut: String = chars.by_ref().take(QUOTE_CHARS).collect();
    if chars.next().is_some() {
        format!("{cut}…")
    } else {
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn long_text_is_cut_with_an_ellipsis_and_short_text_is_kept() {
        assert_eq!(quoted("abc"), "abc");
        let long: String = "验".repeat(61);
        let cut = quoted(&long);
        assert_eq!(cut.chars().count(), 61);
        assert!(cut.ends_with('…'));
        assert_eq!(quoted(&"x".repeat(60)), "x".repeat(60));
    }
}
