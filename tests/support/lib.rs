//! Shared helpers for skywave's end-to-end tests (tests/*.rs): locating the workspace's binaries.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of one of the workspace's binaries (`skywave`, `skywave-emu`, `skywave-bench`) as built
/// for this test run.
///
/// `cargo test --workspace` does not necessarily build other packages' binaries, so the first call
/// builds them all with the same cargo, profile and target directory as the running test, with the
/// very command `scripts/test.sh` runs before the tests (same feature unification), so that there
/// it is a no-op. Panics with the reason when the build fails: a test cannot go on without it.
pub fn bin(name: &str) -> PathBuf {
    let profile_dir = profile_dir();
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| build_all(&profile_dir));
    let bin = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} missing after `cargo build --workspace --bins`",
        bin.display()
    );
    bin
}

/// `target/<profile>`, from this test's own executable in `target/<profile>/deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test executable path: {e}"));
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("{} is not in target/<profile>/deps", exe.display()))
}

fn build_all(profile_dir: &Path) {
    let Some(target_dir) = profile_dir.parent() else {
        panic!("{} has no parent target directory", profile_dir.display());
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--quiet", "--workspace", "--bins", "--target-dir"])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    match build.status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("building the workspace binaries failed ({status})"),
        Err(e) => panic!("cannot run cargo to build the workspace binaries: {e}"),
    }
}
