//! Diagnostics about a routing-table file, printed like a compiler's:
//!
//! ```text
//! routes.toml:12:6: error: unknown peer "shroe" in route for "*.navy.example"; known peers: ship, shore
//!    |
//! 12 | to = "shroe"
//!    |      ^^^^^^^
//! ```
//!
//! Positions come from byte spans (the `toml` parser's, or the spans kept with
//! [`toml::Spanned`]) and are shown as 1-based line and column; the column counts characters.

use std::fmt;
use std::ops::Range;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The table is refused.
    Error,
    /// The table is loaded, but something looks unintended.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One message about a place in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// File name as given to the loader.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
    /// The text of the offending line (without its line break), for display.
    pub source_line: String,
    /// How many characters to underline from `column` (at least 1).
    pub width: usize,
}

impl Diagnostic {
    /// A diagnostic at `span` (byte offsets into `text`).
    pub(crate) fn at(
        severity: Severity,
        file: &str,
        text: &str,
        span: Range<usize>,
        message: String,
    ) -> Diagnostic {
        let start = floor_boundary(text, span.start);
        let end = floor_boundary(text, span.end.max(span.start));
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let source_line = text[line_start..line_end].trim_end_matches('\r').to_owned();
        let line = text[..start].matches('\n').count() + 1;
        let column = text[line_start..start].chars().count() + 1;
        // Underline at most to the end of the line.
        let width = text[start..end.min(line_end).max(start)]
            .chars()
            .count()
            .max(1);
        Diagnostic {
            severity,
            file: file.to_owned(),
            line,
            column,
            message,
            source_line,
            width,
        }
    }

    /// The first line only: `file:line:column: severity: message`.
    pub fn headline(&self) -> String {
        format!(
            "{}:{}:{}: {}: {}",
            self.file, self.line, self.column, self.severity, self.message
        )
    }
}

/// Largest char boundary at or below `offset`, clamped to the text.
fn floor_boundary(text: &str, offset: usize) -> usize {
    let mut i = offset.min(text.len());
    // At most 3 steps back: UTF-8 sequences are at most 4 bytes.
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.headline())?;
        let number = self.line.to_string();
        let pad = " ".repeat(number.len());
        // Tabs are kept so the caret lines up under the same characters.
        let lead: String = self
            .source_line
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        writeln!(f, "{pad} |")?;
        writeln!(f, "{number} | {}", self.source_line)?;
        write!(f, "{pad} | {lead}{}", "^".repeat(self.width))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_rendering() {
        let text = "a = 1\n[x]\nto = \"shroe\"\n";
        let start = text.find("\"shroe\"").unwrap();
        let d = Diagnostic::at(
            Severity::Error,
            "routes.toml",
            text,
            start..start + 7,
            "bad".into(),
        );
        assert_eq!((d.line, d.column, d.width), (3, 6, 7));
        assert_eq!(
            d.to_string(),
            "routes.toml:3:6: error: bad\n  |\n3 | to = \"shroe\"\n  |      ^^^^^^^"
        );
    }

    #[test]
    fn spans_past_the_end_and_inside_chars_are_clamped() {
        let text = "é = 1";
        let d = Diagnostic::at(Severity::Error, "f", text, 1..100, "m".into());
        assert_eq!((d.line, d.column), (1, 1));
        let d = Diagnostic::at(Severity::Error, "f", "", 5..9, "m".into());
        assert_eq!((d.line, d.column, d.width), (1, 1, 1));
    }
}
