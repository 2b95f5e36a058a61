//! Generates services with every kind of method, in local and dispatch mode,
//! into a crate of their own (`tests/generated/`), then builds and tests
//! that crate against pajamax: the generated code compiles without a
//! warning (missing docs and clippy included; in a binary's private module
//! too, where the file descriptor set, a constructor, a call's `into_parts`
//! or a whole service go unused), can be implemented, and
//! serves calls through `pajamax::Service`; the build script warns of
//! nothing (both modes serve every kind of method).
//!
//! The crate is built offline, with the workspace's `Cargo.lock`, in a
//! target directory of its own under Cargo's temporary directory, so that
//! runs after the first only rebuild what changed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

/// The fixture files, as `(path in the crate, contents)`.
const FILES: [(&str, &str); 7] = [
    ("build.rs", include_str!("generated/build.rs")),
    ("src/lib.rs", include_str!("generated/lib.rs")),
    ("src/bin/private.rs", include_str!("generated/private.rs")),
    ("tests/serve.rs", include_str!("generated/serve.rs")),
    (
        "proto/routeguide.proto",
        include_str!("generated/routeguide.proto"),
    ),
    ("proto/feed.proto", include_str!("generated/feed.proto")),
    ("proto/names.proto", include_str!("generated/names.proto")),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("pajamax-build lies in the workspace")
        .to_owned()
}

/// Writes `contents` to `path` unless it already holds them, so that Cargo
/// sees nothing changed.
fn write(path: &Path, contents: &str) {
    if fs::read_to_string(path).ok().as_deref() != Some(contents) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, contents).unwrap();
    }
}

/// The fixture crate, written under Cargo's temporary directory.
fn fixture_crate() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pajamax-build-generated-code");
    let root = workspace();
    let manifest = format!(
        r#"[package]
name = "generated-code"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
pajamax = {{ path = {pajamax:?} }}
prost = "0.14"

[build-dependencies]
pajamax-build = {{ path = {build:?} }}

[dev-dependencies]
tonic = "0.14"
tonic-prost = "0.14"
tokio = {{ version = "1", features = ["rt-multi-thread", "macros"] }}

# A workspace of its own.
[workspace]
"#,
        pajamax = root.join("pajamax"),
        build = root.join("pajamax-build"),
    );
    write(&dir.join("Cargo.toml"), &manifest);
    // The workspace's versions, so that nothing needs downloading.
    let lock = fs::read_to_string(root.join("Cargo.lock")).expect("the workspace's Cargo.lock");
    if !dir.join("Cargo.lock").exists() {
        write(&dir.join("Cargo.lock"), &lock);
    }
    for (path, contents) in FILES {
        write(&dir.join(path), contents);
    }
    dir
}

/// Runs `cargo <args>` in the fixture crate; the build script runs again
/// every time, so that its warnings show.
fn cargo(dir: &Path, args: &[&str]) -> Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        .to_string();
    let output = Command::new(cargo)
        .arg("--offline")
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env("PAJAMAX_BUILD_TEST_RUN", run)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "cargo {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn has_clippy() -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    Command::new(cargo)
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|out| out.status.success())
}

#[test]
fn generated_code_compiles_and_serves_every_kind() {
    let dir = fixture_crate();

    let output = cargo(&dir, &["test", "--all-targets"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Both modes serve every kind of method: no warning.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("pajamax-build: "))
        .collect();
    assert!(warnings.is_empty(), "in\n{stderr}");
    // The unit tests (through `pajamax::Service`) and the network ones
    // (through a server and a tonic client) ran.
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("test result: ok. 6 passed"), "{stdout}");
    assert!(stdout.contains("test result: ok. 5 passed"), "{stdout}");

    if has_clippy() {
        cargo(&dir, &["clippy", "--all-targets", "--", "-D", "warnings"]);
    }
}
