//! Every text function is linear in its input, whatever the input: a megabyte built to be
//! pathological costs at most a small multiple of plain text of the same size, and four times
//! the input costs four times the work. Work is counted (see [`super::work`]), never timed.

use super::work::measure;
use super::{excerpt, html, spans, words, words_of, SearchQuery, Searchable};

const MIB: usize = 1 << 20;
const HTML: Searchable = Searchable { column: "c", html: true, max_bytes: usize::MAX };
const PLAIN: Searchable = Searchable { column: "c", html: false, max_bytes: usize::MAX };

/// `unit` repeated to `size` bytes (whole units).
fn repeat(unit: &str, size: usize) -> String {
    unit.repeat(size / unit.len())
}

/// Plain prose with a little markup, and each pathological input, of about `size` bytes.
pub fn inputs(size: usize) -> Vec<(&'static str, String)> {
    let prose = "<p>Plants use <b>photo</b>synthesis &amp; light to make sugar; cells divide. </p>\n";
    vec![
        ("prose", repeat(prose, size)),
        ("runs of &", repeat("&", size)),
        ("runs of <", repeat("<", size)),
        ("runs of &#", repeat("&#", size)),
        ("&amp without ;", repeat("&amp", size)),
        ("combining marks", format!("a{}", repeat("\u{301}", size))),
        ("unclosed tags", repeat("<a ", size)),
        ("unclosed quotes", format!("<a title=\"{}", repeat("x", size))),
        ("unclosed comments", repeat("<!--", size)),
        ("unclosed scripts", repeat("<script>", size)),
        ("one-letter words", repeat("a ", size)),
        ("two-letter words", repeat("aa ", size)),
        ("a long name", format!("<{}", repeat("a", size))),
    ]
}

/// The work of each text function on `text`.
fn work_of(text: &str) -> [(&'static str, u64); 6] {
    let q = SearchQuery::parse("aa photo*").unwrap();
    [
        ("html::text", measure(|| html::text(text)).1),
        ("words of plain text", measure(|| words(text, usize::MAX)).1),
        ("words of HTML", measure(|| words_of(text, &HTML)).1),
        ("spans", measure(|| spans(text).count()).1),
        ("excerpt of plain text", measure(|| excerpt::excerpt(&q, &[("c", &PLAIN, text)])).1),
        ("excerpt of HTML", measure(|| excerpt::excerpt(&q, &[("c", &HTML, text)])).1),
    ]
}

#[test]
fn a_pathological_megabyte_costs_what_plain_text_does() {
    let plain = work_of(&inputs(MIB)[0].1);
    for (name, text) in inputs(MIB) {
        for ((function, work), (_, reference)) in work_of(&text).into_iter().zip(plain) {
            assert!(
                work <= 20 * reference.max(MIB as u64),
                "{function} of {name}: {work} steps, plain text {reference}"
            );
        }
    }
}

#[test]
fn four_times_the_input_is_four_times_the_work() {
    for ((name, small), (_, large)) in inputs(MIB / 16).into_iter().zip(inputs(MIB / 4)) {
        for ((function, a), (_, b)) in work_of(&small).into_iter().zip(work_of(&large)) {
            assert!(b <= 5 * a.max(1000), "{function} of {name}: {a} steps for 64 KiB, {b} for 256 KiB");
        }
    }
}
