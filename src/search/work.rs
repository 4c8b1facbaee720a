//! A count of the work the text functions do: every byte or character they look at, counted
//! where they look. Each function here must stay linear in its input, whatever the input, and
//! the tests hold them to it by comparing a pathological megabyte (runs of `&`, `<`, `&#`,
//! combining marks, unclosed tags, one-letter words) with plain text of the same size. The
//! count exists in tests only: elsewhere [`add`] is nothing.

#[cfg(test)]
thread_local! {
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` steps of work (bytes or characters looked at).
#[inline(always)]
pub fn add(n: usize) {
    #[cfg(test)]
    STEPS.with(|s| s.set(s.get() + n as u64));
    #[cfg(not(test))]
    let _ = n;
}

/// Runs `f` and counts the steps it took on this thread.
#[cfg(test)]
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = STEPS.with(std::cell::Cell::get);
    let out = f();
    (out, STEPS.with(std::cell::Cell::get) - before)
}
