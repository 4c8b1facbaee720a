//! Full-text search, defined once for both engines.
//!
//! A searchable attribute's text is turned into its *words* here, in Rust: HTML markup removed
//! where the attribute holds HTML, compatibility-decomposed (NFKD), lower-cased, combining
//! marks dropped, and split into runs of letters and digits. The words are stored beside the
//! text (the attribute's words column, declared in [`crate::resources`]) by every statement
//! that writes the text, and each engine indexes them as they are, without language rules of
//! its own: SQLite with FTS5 (a tokenizer that only splits on spaces), PostgreSQL with a
//! `tsvector` made from the words as lexemes. A query's words go through the same function,
//! so `resume` finds `Résumé` on both.
//!
//! What matches is defined on the words (see [`query`]); relevance and excerpts are computed
//! from them and the text too, the same on both engines.

pub mod excerpt;
pub mod html;
#[cfg(test)]
pub mod linear;
pub mod query;
pub mod work;

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

pub use crate::resources::Searchable;
use crate::resources::{Attribute, ResourceType};
use crate::value::Value;

pub use self::query::{SearchQuery, Term};

/// The longest word kept, in bytes; a longer run of letters is cut to this (at a character).
pub const MAX_WORD_BYTES: usize = 100;

/// The searchable text of an attribute's `text` searched as `how`: itself, or an HTML text's
/// text content.
pub fn plain<'a>(how: &Searchable, text: &'a str) -> std::borrow::Cow<'a, str> {
    if how.html {
        html::text(text).into()
    } else {
        text.into()
    }
}

/// The words of `text`, space-separated, for an attribute searched as `how`.
pub fn words_of(text: &str, how: &Searchable) -> String {
    words(&plain(how, text), how.max_bytes)
}

/// The words of plain `text`, space-separated, at most `max_bytes` of them (whole words).
pub fn words(text: &str, max_bytes: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_bytes) + 1);
    for_each_word(text, |w| {
        if out.len() + w.len() + usize::from(!out.is_empty()) > max_bytes {
            return false;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
        true
    });
    out
}

/// Calls `each` with every word of `text` (normalized) until it returns false.
fn for_each_word(text: &str, mut each: impl FnMut(&str) -> bool) {
    let mut it = spans(text);
    let mut word = String::new();
    while it.next_into(&mut word).is_some() {
        if !each(&word) {
            return;
        }
    }
}

/// The words of `text` with the byte range of the text each comes from, for excerpts.
pub fn spans(text: &str) -> Spans<'_> {
    Spans { chars: text.char_indices(), queue: std::collections::VecDeque::new() }
}

/// An iterator over the words of a text (see [`spans`]).
pub struct Spans<'t> {
    chars: std::str::CharIndices<'t>,
    /// Normalized characters of the last character read (`None` separates words), with its
    /// byte range.
    queue: std::collections::VecDeque<(usize, usize, Option<char>)>,
}

impl Spans<'_> {
    /// The next normalized character with the range of the character it comes from.
    fn next_char(&mut self) -> Option<(usize, usize, Option<char>)> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                return Some(item);
            }
            let (i, ch) = self.chars.next()?;
            work::add(1);
            let end = i + ch.len_utf8();
            if ch.is_ascii() {
                return Some((i, end, ch.is_ascii_alphanumeric().then(|| ch.to_ascii_lowercase())));
            }
            let queue = &mut self.queue;
            decompose_compatible(ch, |d| {
                for l in d.to_lowercase() {
                    // Lower-casing may give a character that decomposes again.
                    decompose_compatible(l, |e| {
                        // Combining marks are dropped: they neither add to a word nor end it.
                        work::add(1);
                        if !is_combining_mark(e) {
                            queue.push_back((i, end, e.is_alphanumeric().then_some(e)));
                        }
                    });
                }
            });
        }
    }

    /// Reads the next word into `word`; returns the byte range of the text it spans.
    pub fn next_into(&mut self, word: &mut String) -> Option<std::ops::Range<usize>> {
        word.clear();
        let (start, mut end) = loop {
            match self.next_char()? {
                (s, e, Some(c)) => {
                    word.push(c);
                    break (s, e);
                }
                _ => continue,
            }
        };
        while let Some((_, e, c)) = self.next_char() {
            let Some(c) = c else { break };
            if word.len() + c.len_utf8() <= MAX_WORD_BYTES {
                word.push(c);
            }
            end = e;
        }
        Some(start..end)
    }
}

impl Iterator for Spans<'_> {
    type Item = (std::ops::Range<usize>, String);
    fn next(&mut self) -> Option<Self::Item> {
        let mut word = String::new();
        self.next_into(&mut word).map(|r| (r, word))
    }
}

/// The words columns of `rt`'s searchable attributes, in declaration order.
pub fn columns(rt: &ResourceType) -> impl Iterator<Item = (&'static Attribute, &'static Searchable)> {
    let attrs: &'static [Attribute] = rt.attributes;
    attrs.iter().filter_map(|a| a.search.as_ref().map(|s| (a, s)))
}

/// The value of `attr`'s words column when the attribute is written with `value`.
pub fn derived(attr: &Attribute, value: &Value) -> Option<(&'static str, Value)> {
    derived_text(
        attr,
        match value {
            Value::Text(t) => t.as_str(),
            _ => "",
        },
    )
}

/// The value of `attr`'s words column when the attribute is written with `text` (`""` for
/// null).
pub fn derived_text(attr: &Attribute, text: &str) -> Option<(&'static str, Value)> {
    let how = attr.search.as_ref()?;
    Some((how.column, Value::Text(words_of(text, how))))
}

/// Whether `rt` has anything to search.
pub fn searchable(rt: &ResourceType) -> bool {
    columns(rt).next().is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> String {
        words(s, usize::MAX)
    }

    #[test]
    fn words_are_lower_case_without_accents() {
        assert_eq!(w("Résumé of the CAFÉ, naïve Zürich!"), "resume of the cafe naive zurich");
        assert_eq!(w("e-mail: A&B \"quoted\""), "e mail a b quoted");
        assert_eq!(w("ﬁnal ＡＢＣ x²"), "final abc x2");
        assert_eq!(w("İstanbul Straße ΆΘΗΝΑ"), "istanbul straße αθηνα");
        assert_eq!(w("  "), "");
        assert_eq!(w("e\u{301}te\u{301}"), "ete");
        assert_eq!(w("日本語 テキスト"), "日本語 テキスト");
    }

    #[test]
    fn long_words_and_texts_are_cut() {
        let long = "a".repeat(300);
        assert_eq!(w(&long).len(), MAX_WORD_BYTES);
        assert_eq!(words("alpha beta gamma", 10), "alpha beta");
        assert_eq!(words("alpha beta gamma", 4), "");
    }

    #[test]
    fn spans_point_into_the_text() {
        let text = "Le Résumé, vite";
        let got: Vec<(std::ops::Range<usize>, String)> = spans(text).collect();
        assert_eq!(got[1].1, "resume");
        assert_eq!(&text[got[1].0.clone()], "Résumé");
        assert_eq!(&text[got[2].0.clone()], "vite");
    }
}
