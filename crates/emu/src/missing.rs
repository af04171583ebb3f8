//! What a test does when a check it contains needs something this machine lacks: an external
//! tool (tshark) or the shared calibration data (`../shared`).
//!
//! On a developer's machine the check is skipped with a note, so the rest of the test still
//! runs. Under `SKYWAVE_REQUIRE_TOOLS=1`, which `scripts/test.sh` (and so CI) sets, it fails
//! instead, naming what is missing and how to install it: a green CI run then means that every
//! check ran. Lives in the emulator crate because the tests that need it (the emulator's own,
//! the benchmark's and the end-to-end tests) all depend on it.

/// The environment variable that turns skips into failures.
pub const REQUIRE_VAR: &str = "SKYWAVE_REQUIRE_TOOLS";

/// Whether missing tools and data must fail tests (`SKYWAVE_REQUIRE_TOOLS` set to anything
/// but `0` or empty).
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Reports that `what` is missing for `check`: panics with `hint` when [`required`], else
/// prints a SKIPPED note on stderr and returns, so that the caller can skip that check.
///
/// # Panics
/// When [`required`]: that is its purpose.
pub fn skip_or_fail(what: &str, check: &str, hint: &str) {
    if required() {
        panic!("{what} is missing, so {check} cannot run ({REQUIRE_VAR} is set): {hint}");
    }
    eprintln!("SKIPPED: {what} is missing, so {check} did not run; {hint}");
}

/// Whether `tool --version` runs; if not, [`skip_or_fail`] with the apt-get hint.
pub fn have_tool(tool: &str, check: &str) -> bool {
    let ok = std::process::Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip_or_fail(
            tool,
            check,
            &format!("install it (`apt-get install {tool}`, or run scripts/test.sh)"),
        );
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_that_runs_is_there() {
        // `cargo` runs wherever this test runs.
        assert!(have_tool("cargo", "this test"));
    }

    #[test]
    fn a_missing_tool_fails_only_when_required() {
        let missing = "skywave-no-such-tool";
        let outcome = std::panic::catch_unwind(|| have_tool(missing, "this test"));
        if required() {
            let e = outcome.expect_err("required: must panic");
            let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(
                msg.contains(missing) && msg.contains("apt-get install"),
                "{msg}"
            );
        } else {
            assert_eq!(outcome.ok(), Some(false));
        }
    }
}
