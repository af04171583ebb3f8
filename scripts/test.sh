#!/usr/bin/env bash
# skywave's whole test suite, from a fresh clone: installs what the tests need when it is missing
# (Debian packages via apt-get, Python packages via pip), builds the binaries the end-to-end tests
# run, then runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
command -v swaks >/dev/null 2>&1 || need_apt+=(swaks)
if ((${#need_apt[@]})); then
    echo "scripts/test.sh: installing ${need_apt[*]} (Debian packages)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    # tshark asks whether non-root users may capture; the default (no) is right for tests.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Python packages the end-to-end tests use: aiosmtpd is the LAN smarthost in tests/lan_smarthost.rs.
if ! python3 -c "import aiosmtpd" >/dev/null 2>&1; then
    echo "scripts/test.sh: installing aiosmtpd (Python package)"
    python3 -m pip install -q aiosmtpd
fi

# Every check that needs tshark, swaks, aiosmtpd or ../shared must run here: a missing one fails
# its test (with the install hint) instead of being skipped, so a green run means all ran.
export SKYWAVE_REQUIRE_TOOLS=1

# The end-to-end tests (tests/) run the real binaries; build them first so they are current.
cargo build --workspace --bins
cargo test --workspace --all-targets "$@"
