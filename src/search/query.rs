//! The search syntax of `filter[search]`, parsed once into terms that every engine matches
//! alike.
//!
//! - Words separated by spaces must all match (in any searchable attribute, each on its own).
//! - A word matches a word of the text equal to it after normalization (case and accents do
//!   not count: `resume` finds `Résumé`).
//! - `word*` matches any word that starts with `word` (at least [`MIN_PREFIX`] characters).
//! - `"two words"` matches those words one after the other in one attribute; `"two wo"*`
//!   takes the last as a prefix.
//! - Punctuation inside a word splits it into a phrase (`e-mail` is `"e mail"`); a term of
//!   punctuation only is ignored.

use super::words;

/// The longest search text, in characters.
pub const MAX_CHARS: usize = 200;
/// The most terms (words or quoted phrases) a search may have.
pub const MAX_TERMS: usize = 8;
/// The most words a phrase may have.
pub const MAX_PHRASE_WORDS: usize = 8;
/// The fewest characters before a `*`.
pub const MIN_PREFIX: usize = 2;

/// One term: words that must follow one another in one attribute, the last one a prefix when
/// `prefix`. A single word is a phrase of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub words: Vec<String>,
    pub prefix: bool,
}

impl Term {
    /// What the term is in an attribute's words with a space at either end: this text is in it.
    pub fn needle(&self) -> String {
        let mut s = String::with_capacity(self.words.iter().map(|w| w.len() + 1).sum::<usize>() + 1);
        for w in &self.words {
            s.push(' ');
            s.push_str(w);
        }
        if !self.prefix {
            s.push(' ');
        }
        s
    }

    /// Whether the term matches in `words` (an attribute's words, space-separated): the rule
    /// the engines' queries follow, stated once for the unit tests.
    #[cfg(test)]
    pub fn matches(&self, words: &str) -> bool {
        format!(" {words} ").contains(&self.needle())
    }
}

/// A parsed `filter[search]`: every term must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub terms: Vec<Term>,
}

impl SearchQuery {
    /// Parses the search text; the error says what is wrong, for a 400.
    pub fn parse(raw: &str) -> Result<SearchQuery, String> {
        let count = raw.chars().count();
        if count > MAX_CHARS {
            return Err(format!("The search text is {count} characters long; give at most {MAX_CHARS}."));
        }
        if raw.contains('\0') {
            return Err("The search text may not hold U+0000.".into());
        }
        let mut terms: Vec<Term> = Vec::new();
        let mut rest = raw.trim_start();
        while !rest.is_empty() {
            let (text, quoted, tail) = if let Some(inner) = rest.strip_prefix('"') {
                let Some(end) = inner.find('"') else {
                    return Err(
                        "The search text has a `\"` that is never closed; close the phrase or remove it.".into()
                    );
                };
                (&inner[..end], true, &inner[end + 1..])
            } else {
                let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
                (&rest[..end], false, &rest[end..])
            };
            let (prefix, tail) = match tail.strip_prefix('*') {
                Some(t) if quoted => (true, t),
                _ => (false, tail),
            };
            if tail.starts_with(|c: char| !c.is_whitespace() && c != '"') && quoted {
                return Err(format!(
                    "A quoted phrase must be followed by a space (or `*`); got `{}` after \"{text}\".",
                    tail.chars().next().unwrap_or(' ')
                ));
            }
            let (text, prefix) = match (quoted, text.strip_suffix('*')) {
                (false, Some(t)) => (t, true),
                _ => (text, prefix),
            };
            if text.contains('*') {
                return Err(format!(
                    "`*` may only end a word (`photo*`) or a quoted phrase; remove it from `{}`.",
                    text.trim()
                ));
            }
            let words: Vec<String> =
                words(text, usize::MAX).split(' ').filter(|w| !w.is_empty()).map(str::to_owned).collect();
            match (words.last(), prefix, quoted) {
                (None, true, _) => {
                    return Err("`*` must follow a word (`photo*`); a lone `*` searches for nothing.".into())
                }
                (None, false, true) => return Err("A quoted phrase holds no word to search for.".into()),
                (None, false, false) => {} // punctuation only: nothing to search for, skipped
                (Some(last), true, _) if last.chars().count() < MIN_PREFIX => {
                    return Err(format!(
                        "A prefix needs at least {MIN_PREFIX} letters or digits before `*`; got `{last}*`."
                    ))
                }
                (Some(_), _, _) if words.len() > MAX_PHRASE_WORDS => {
                    return Err(format!(
                        "A phrase may hold at most {MAX_PHRASE_WORDS} words; `{}` has {}.",
                        text.trim(),
                        words.len()
                    ))
                }
                (Some(_), _, _) => {
                    let term = Term { words, prefix };
                    if !terms.contains(&term) {
                        terms.push(term);
                    }
                }
            }
            rest = tail.trim_start();
        }
        if terms.is_empty() {
            return Err("The search text holds no word to search for; give at least one word.".into());
        }
        if terms.len() > MAX_TERMS {
            return Err(format!("The search text has {} terms; give at most {MAX_TERMS}.", terms.len()));
        }
        Ok(SearchQuery { terms })
    }

    /// Every word of every term, with whether it is a prefix (the last word of a prefix term).
    pub fn words(&self) -> impl Iterator<Item = (&str, bool)> {
        self.terms.iter().flat_map(|t| {
            let last = t.words.len() - 1;
            t.words.iter().enumerate().map(move |(i, w)| (w.as_str(), t.prefix && i == last))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(raw: &str) -> Vec<(String, bool)> {
        SearchQuery::parse(raw).unwrap().terms.into_iter().map(|t| (t.words.join(" "), t.prefix)).collect()
    }

    fn s(w: &str, p: bool) -> (String, bool) {
        (w.to_owned(), p)
    }

    #[test]
    fn terms_words_prefixes_and_phrases() {
        assert_eq!(terms("Résumé"), [s("resume", false)]);
        assert_eq!(terms("  photo*  SYNTHESIS "), [s("photo", true), s("synthesis", false)]);
        assert_eq!(terms("\"light  Waves\" optics"), [s("light waves", false), s("optics", false)]);
        assert_eq!(terms("\"light wa\"*"), [s("light wa", true)]);
        assert_eq!(terms("e-mail - & a"), [s("e mail", false), s("a", false)]);
        assert_eq!(terms("x x"), [s("x", false)]);
        assert_eq!(terms("a\"b c\""), [s("a", false), s("b c", false)]);
    }

    #[test]
    fn malformed_searches_are_refused() {
        for bad in [
            "",
            "   ",
            "*",
            "a*",
            "\"open",
            "\"\"",
            "\" , \"",
            "a*b",
            "**",
            "ab**",
            "-",
            "\"ab\"c",
            "a b c d e f g h i",
        ] {
            assert!(SearchQuery::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(SearchQuery::parse(&"a".repeat(201)).is_err());
        assert!(SearchQuery::parse(&"a".repeat(200)).is_ok());
        assert!(SearchQuery::parse("\"a b c d e f g h i\"").is_err());
    }

    #[test]
    fn terms_match_words() {
        let t = |raw: &str| SearchQuery::parse(raw).unwrap().terms.remove(0);
        assert!(t("resume").matches("my resume here"));
        assert!(!t("resum").matches("my resume here"));
        assert!(t("resum*").matches("my resume here"));
        assert!(t("\"my resume\"").matches("my resume here"));
        assert!(!t("\"my here\"").matches("my resume here"));
        assert!(t("\"resume he\"*").matches("my resume here"));
        assert!(!t("ume").matches("my resume here"));
    }
}
