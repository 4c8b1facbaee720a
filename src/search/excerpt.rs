//! A short excerpt of a matched resource with the matches marked, made from the attribute
//! text and the parsed query (so that both engines give the same bytes).
//!
//! The excerpt is taken from the first searchable attribute, in declaration order, in which a
//! term matches: from a few words before the first match, about [`LENGTH`] characters, cut at
//! words, with `…` where text was left out and white space collapsed. It is HTML-safe text
//! (`&`, `<`, `>`, `"` escaped) in which every match is wrapped in `<mark>` and `</mark>`.

use std::ops::Range;

use super::{spans, work, SearchQuery, Searchable};

/// About how many characters an excerpt shows.
pub const LENGTH: usize = 160;
/// How much of a text an excerpt is looked for in, at most (bytes; characters where the
/// database cuts the text, see the store's `search::page_meta`): a match further on shows
/// no excerpt of that text, so that a page of long texts costs a bounded amount of work.
pub const SCANNED: usize = 64 << 10;
/// Words shown before the first match, at most.
const BEFORE: usize = 6;

/// The excerpt of an attribute: its name and the marked text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    pub attribute: &'static str,
    pub html: String,
}

/// The excerpt for `q` of the first of `texts` (attribute name, how it is searched, its
/// text) in which a term matches; `None` when none does.
pub fn excerpt(q: &SearchQuery, texts: &[(&'static str, &Searchable, &str)]) -> Option<Excerpt> {
    for (name, how, text) in texts {
        let text = super::plain(how, head(text, SCANNED));
        let found = find(q, &text, how.max_bytes);
        if let Some(first) = found.first() {
            return Some(Excerpt { attribute: name, html: render(&text, first.start, &found) });
        }
    }
    None
}

/// The byte ranges of `text` that matches of `q`'s terms cover, in order and merged (only the
/// words the index holds: the first `max_bytes` of them).
fn find(q: &SearchQuery, text: &str, max_bytes: usize) -> Vec<Range<usize>> {
    let mut words: Vec<(Range<usize>, String)> = Vec::new();
    let mut size = 0;
    for (range, word) in spans(text) {
        size += word.len() + usize::from(size > 0);
        if size > max_bytes {
            break;
        }
        words.push((range, word));
    }
    let mut marks: Vec<Range<usize>> = Vec::new();
    for i in 0..words.len() {
        for t in &q.terms {
            let n = t.words.len();
            if i + n > words.len() {
                continue;
            }
            let hit = t.words.iter().enumerate().all(|(k, w)| {
                work::add(1);
                let got = &words[i + k].1;
                if t.prefix && k == n - 1 {
                    got.starts_with(w.as_str())
                } else {
                    got == w
                }
            });
            if hit {
                marks.push(words[i].0.start..words[i + n - 1].0.end);
            }
        }
    }
    marks.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for m in marks {
        match merged.last_mut() {
            Some(last) if m.start <= last.end => last.end = last.end.max(m.end),
            _ => merged.push(m),
        }
    }
    merged
}

/// The excerpt of `text` around the match at `at`, with `marks` (in order, apart) marked.
/// Marks are taken in order as the text goes by, so that each character costs the same however
/// many marks there are.
fn render(text: &str, at: usize, marks: &[Range<usize>]) -> String {
    // Start a few words before the match.
    let starts: Vec<usize> = spans(&text[..at]).map(|(r, _)| r.start).collect();
    let from = starts.len().checked_sub(BEFORE).map_or(0, |i| starts[i]);
    let mut out = String::with_capacity(LENGTH + 64);
    work::add(from);
    if text[..from].chars().any(|c| !c.is_whitespace()) {
        out.push('…');
    }
    let mut shown = 0;
    let mut space = false;
    let mut i = from;
    let mut open = false;
    // The mark being shown, or the next one.
    let mut next = marks.partition_point(|m| m.end <= from);
    for (pos, c) in text[from..].char_indices() {
        work::add(1);
        let pos = pos + from;
        i = pos;
        if open && marks[next].end <= pos {
            out.push_str("</mark>");
            open = false;
            next += 1;
        }
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if shown >= LENGTH && !open && !c.is_alphanumeric() {
            break;
        }
        if shown >= LENGTH && !open && space {
            break;
        }
        if space && shown > 0 {
            out.push(' ');
            shown += 1;
        }
        space = false;
        if !open && marks.get(next).is_some_and(|m| m.start <= pos) {
            out.push_str("<mark>");
            open = true;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
        shown += 1;
        i = pos + c.len_utf8();
    }
    if open {
        out.push_str("</mark>");
    }
    let rest = text[i..].trim_start();
    work::add(text.len() - i - rest.len() + 1);
    if !rest.is_empty() {
        out.push('…');
    }
    out
}

/// The first `max` bytes of `text`, cut at a character.
fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Searchable = Searchable { column: "t", html: false, max_bytes: usize::MAX };
    const HTML: Searchable = Searchable { column: "t", html: true, max_bytes: usize::MAX };

    fn ex(q: &str, texts: &[(&'static str, &Searchable, &str)]) -> Option<(String, String)> {
        excerpt(&SearchQuery::parse(q).unwrap(), texts).map(|e| (e.attribute.to_owned(), e.html))
    }

    #[test]
    fn the_first_attribute_that_matches_is_shown_marked() {
        let texts =
            [("title", &PLAIN, "Optics"), ("content", &HTML, "<p>Light &amp; <b>Résumé</b> of <i>waves</i></p>")];
        assert_eq!(ex("resume", &texts), Some(("content".into(), "Light &amp; <mark>Résumé</mark> of waves".into())));
        assert_eq!(ex("optic*", &texts), Some(("title".into(), "<mark>Optics</mark>".into())));
        assert_eq!(
            ex("\"of waves\" light", &texts),
            Some(("content".into(), "<mark>Light</mark> &amp; Résumé <mark>of waves</mark>".into()))
        );
        assert_eq!(ex("nothing", &texts), None);
    }

    #[test]
    fn long_texts_are_cut_around_the_first_match() {
        let text = format!("{} needle {}", "word ".repeat(50), "tail ".repeat(100));
        let (_, html) = ex("needle", &[("content", &PLAIN, &text)]).unwrap();
        assert!(html.starts_with("…word word word word word word <mark>needle</mark> tail"), "{html}");
        assert!(html.ends_with("tail…"), "{html}");
        assert!(html.chars().count() < LENGTH + 40, "{html}");
    }
}
