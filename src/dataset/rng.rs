//! A small deterministic generator of ids, words and titles for `coursed generate`.

/// splitmix64: small, fast and the same everywhere.
pub struct Rng(pub u64);

const WORDS: &[&str] = &[
    "course",
    "module",
    "subject",
    "chapter",
    "lesson",
    "learning",
    "student",
    "teacher",
    "content",
    "overview",
    "practice",
    "exercise",
    "theory",
    "example",
    "analysis",
    "design",
    "system",
    "data",
    "model",
    "history",
    "science",
    "language",
    "culture",
    "biology",
    "physics",
    "geometry",
    "algebra",
    "statistics",
    "network",
    "security",
    "reading",
    "writing",
    "project",
    "assessment",
    "feedback",
    "review",
    "skill",
    "method",
    "problem",
    "solution",
    "the",
    "of",
    "and",
    "to",
    "in",
    "for",
    "with",
    "on",
    "advanced",
    "basic",
    "applied",
    "modern",
    "digital",
    "practical",
    "café",
    "naïve",
    "Zürich",
    "\"quoted\"",
    "A&B",
];

impl Rng {
    // The generator's step, as splitmix64 names it; an endless iterator would add nothing.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Words of `lo` to `hi` bytes in all, with a line break now and then.
    pub fn text(&mut self, lo: usize, hi: usize) -> String {
        let target = lo + self.below((hi - lo + 1) as u64) as usize;
        let mut s = String::with_capacity(target + 16);
        while s.len() < target {
            if !s.is_empty() {
                s.push(if self.below(40) == 0 { '\n' } else { ' ' });
            }
            s.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
        }
        s
    }
    pub fn title(&mut self) -> String {
        let mut t = self.text(20, 70).replace('\n', " ");
        if let Some(first) = t.get(..1) {
            t.replace_range(..1, &first.to_uppercase());
        }
        t
    }
}
