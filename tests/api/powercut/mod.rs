//! Power cuts: a file system that forgets what was not synced (`fs`, over `disk`), its own
//! tests (`fs_tests`), and coursed run on it and cut at many points (`cuts`).

mod disk;
mod fs;
mod fs_tests;

pub use fs::{Op, PowerCut};
