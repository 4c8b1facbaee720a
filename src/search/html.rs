//! The text of HTML content, for search: what a reader sees, without markup.
//!
//! Tags are removed (inline ones such as `<b>` join the text around them, any other tag
//! separates words), comments and the insides of `<script>` and `<style>` are dropped, and
//! character references are decoded: numeric ones, the basic named ones, and the named
//! accented letters (`&eacute;`, `&Uuml;`, ...). An unknown reference stays as written.

use unicode_normalization::UnicodeNormalization as _;

use super::work;

/// How far after its `&` the `;` of a character reference may be (`&thinsp;`, `&#x10FFFF;`):
/// an `&` is looked at no further than this.
const MAX_REFERENCE: usize = 12;

/// Tags that do not break a word: `<b>pho</b>to` reads `photo`.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "dfn", "em", "font", "i", "kbd", "mark", "q", "s", "samp",
    "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr",
];

/// The visible text of `html`.
pub fn text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = find(rest, |b| b == b'<' || b == b'&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if rest.starts_with('&') {
            match entity(rest) {
                Some((decoded, len)) => {
                    out.push_str(&decoded);
                    rest = &rest[len..];
                }
                None => {
                    out.push('&');
                    rest = &rest[1..];
                }
            }
            continue;
        }
        rest = skip_markup(rest, &mut out);
    }
    out.push_str(rest);
    out
}

/// The position of the first byte of `s` that `is` (an ASCII byte), counting the bytes looked at.
fn find(s: &str, is: impl Fn(u8) -> bool) -> Option<usize> {
    let at = s.bytes().position(is);
    work::add(at.map_or(s.len(), |i| i + 1));
    at
}

/// Skips the markup at the start of `s` (which starts with `<`); returns what follows. Every
/// scan here either stops at what it looks for, which is then behind, or runs to the end of
/// `s`, which is then all skipped: no byte is looked at twice.
fn skip_markup<'a>(s: &'a str, out: &mut String) -> &'a str {
    if let Some(body) = s.strip_prefix("<!--") {
        out.push(' ');
        return find_ascii_ci(body, "-->").map_or("", |end| &body[end + 3..]);
    }
    let after = &s[1..];
    let closing = after.starts_with('/');
    let name_start = usize::from(closing);
    let name_len = find(&after[name_start..], |b| !b.is_ascii_alphanumeric()).unwrap_or(after.len() - name_start);
    let starts_tag = name_len > 0 || after.starts_with('!') || after.starts_with('?');
    if !starts_tag {
        // A `<` that opens no tag is text.
        out.push('<');
        return after;
    }
    // A tag name longer than any known one is no name of ours (and is skipped as a whole
    // below): no copy of it is made.
    let name = after[name_start..name_start + name_len.min(8)].to_ascii_lowercase();
    let end = tag_end(after);
    let rest = &after[end..];
    if !INLINE.contains(&name.as_str()) {
        out.push(' ');
    }
    if !closing && (name == "script" || name == "style") {
        let close = format!("</{name}");
        return match find_ascii_ci(rest, &close) {
            Some(at) => {
                let tail = &rest[at + 1..];
                &tail[tag_end(tail)..]
            }
            None => "",
        };
    }
    rest
}

/// The byte just past the `>` ending the tag `s` is inside (quoted attribute values may hold
/// `>`); the end of `s` when it never ends.
fn tag_end(s: &str) -> usize {
    let mut quote = None;
    for (i, b) in s.bytes().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), b) if b == q => quote = None,
            (None, b'>') => {
                work::add(i + 1);
                return i + 1;
            }
            _ => {}
        }
    }
    work::add(s.len());
    s.len()
}

/// Where `needle` (short, ASCII) first starts in `hay`, ignoring ASCII case.
fn find_ascii_ci(hay: &str, needle: &str) -> Option<usize> {
    let at = hay.as_bytes().windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle.as_bytes()));
    work::add(at.map_or(hay.len(), |i| i + 1) * needle.len());
    at
}

/// The character reference at the start of `s` (which starts with `&`): its text and length.
/// Only the next [`MAX_REFERENCE`] bytes are looked at: a run of `&` without `;` costs each
/// `&` that much, not the rest of the text.
fn entity(s: &str) -> Option<(String, usize)> {
    let window = &s.as_bytes()[1..s.len().min(MAX_REFERENCE + 1)];
    work::add(window.len());
    let end = window.iter().position(|&b| b == b';')? + 1;
    let name = &s[1..end];
    let decoded = if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        char::from_u32(code).filter(|c| *c != '\0').unwrap_or('\u{FFFD}').to_string()
    } else {
        named(name)?
    };
    Some((decoded, end + 1))
}

fn named(name: &str) -> Option<String> {
    let simple = match name {
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "nbsp" | "ensp" | "emsp" | "thinsp" => " ",
        "shy" | "zwnj" | "zwj" => "",
        "ndash" => "\u{2013}",
        "mdash" => "\u{2014}",
        "hellip" => "\u{2026}",
        "lsquo" => "\u{2018}",
        "rsquo" => "\u{2019}",
        "ldquo" => "\u{201C}",
        "rdquo" => "\u{201D}",
        "laquo" => "\u{AB}",
        "raquo" => "\u{BB}",
        "middot" => "\u{B7}",
        "bull" => "\u{2022}",
        "deg" => "\u{B0}",
        "times" => "\u{D7}",
        "divide" => "\u{F7}",
        "copy" => "\u{A9}",
        "reg" => "\u{AE}",
        "trade" => "\u{2122}",
        "euro" => "\u{20AC}",
        "pound" => "\u{A3}",
        "sect" => "\u{A7}",
        "para" => "\u{B6}",
        "szlig" => "\u{DF}",
        "aelig" => "\u{E6}",
        "AElig" => "\u{C6}",
        "oelig" => "\u{153}",
        "OElig" => "\u{152}",
        "oslash" => "\u{F8}",
        "Oslash" => "\u{D8}",
        "eth" => "\u{F0}",
        "ETH" => "\u{D0}",
        "thorn" => "\u{FE}",
        "THORN" => "\u{DE}",
        "iexcl" => "\u{A1}",
        "iquest" => "\u{BF}",
        _ => "",
    };
    if !simple.is_empty() || matches!(name, "shy" | "zwnj" | "zwj") {
        return Some(simple.to_owned());
    }
    // A letter with an accent: `&eacute;` is `e` and U+0301, composed.
    let accents = [
        ("acute", '\u{301}'),
        ("grave", '\u{300}'),
        ("circ", '\u{302}'),
        ("uml", '\u{308}'),
        ("tilde", '\u{303}'),
        ("ring", '\u{30A}'),
        ("cedil", '\u{327}'),
        ("caron", '\u{30C}'),
    ];
    let mut chars = name.chars();
    let letter = chars.next().filter(char::is_ascii_alphabetic)?;
    let accent = chars.as_str();
    let mark = accents.iter().find(|(n, _)| *n == accent)?.1;
    Some([letter, mark].into_iter().nfc().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_not_text() {
        assert_eq!(text("<p>Photo<b>syn</b>thesis</p><p>next</p>"), " Photosynthesis  next ");
        assert_eq!(text("<a href=\"x>y\" title='a'>link</a>"), "link");
        assert_eq!(text("a<!-- hidden -->b<script>var x = '<p>';</script>c<style>p{}</style>"), "a b c ");
        assert_eq!(text("1 < 2 and 3 > 2"), "1 < 2 and 3 > 2");
        assert_eq!(text("unclosed <p class=\"x"), "unclosed  ");
    }

    #[test]
    fn references_are_decoded() {
        assert_eq!(text("R&eacute;sum&eacute; &amp; caf&#233; &#x263A; &Uuml;ber"), "Résumé & café ☺ Über");
        assert_eq!(text("&unknown; & &#0; &#xZZ;"), "&unknown; & \u{FFFD} &#xZZ;");
        assert_eq!(text("a&nbsp;b&shy;c"), "a bc");
    }
}
