//! Checks that SQLite is built the way coursed needs it. Those options are given to
//! libsqlite3-sys's build in `.cargo/config.toml`, which cargo reads only from the directory it
//! runs in (and those above it): a build started elsewhere (`--manifest-path`, `cargo install
//! --git`) would otherwise fail at link time with "undefined symbol: sqlite3_snapshot_get".

fn main() {
    println!("cargo:rerun-if-env-changed=LIBSQLITE3_FLAGS");
    let flags = std::env::var("LIBSQLITE3_FLAGS").unwrap_or_default();
    // As libsqlite3-sys reads them: with or without `-D`, with or without `=value`.
    let snapshot = flags.split_whitespace().any(|f| {
        let name = f.strip_prefix("-D").unwrap_or(f);
        name.split('=').next() == Some("SQLITE_ENABLE_SNAPSHOT")
    });
    if !snapshot {
        eprintln!(
            "LIBSQLITE3_FLAGS lacks SQLITE_ENABLE_SNAPSHOT: run cargo from the coursed repository's \
             folder, where .cargo/config.toml sets SQLite's build options (or set LIBSQLITE3_FLAGS \
             as that file does)"
        );
        std::process::exit(1);
    }
}
