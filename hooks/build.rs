//! Embeds every file of `scripts/` into the crate, so the in-cluster scripts ship in
//! the hook's binary (`mysql-hook install-scripts`) exactly as they are tested
//! against real servers.

// A build script reports failure by panicking.
#![allow(clippy::expect_used)]

use std::{env, fmt::Write as _, fs, path::Path};

fn main() {
    let dir = Path::new(&env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("scripts");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "sh"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from(
        "/// Every shipped script: (file name, contents), sorted by name.\npub const SCRIPTS: &[(&str, &str)] = &[\n",
    );
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path.file_name().expect("a file has a name").to_string_lossy();
        writeln!(out, "    ({name:?}, include_str!({:?})),", path.display().to_string()).expect("writing to a String");
    }
    out.push_str("];\n");
    fs::write(Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("scripts.rs"), out)
        .expect("OUT_DIR is writable");
}
