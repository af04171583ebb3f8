#!/usr/bin/env bash
# skywave's whole test suite, from a fresh clone: installs what the tests need when it is missing
# (Debian packages via apt-get, Python packages via pip), builds the binaries the end-to-end tests
# run, then runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
command -v swaks >/dev/null 2>&1 || need_apt+=(swaks)
# ip (iproute2) builds the network namespace of the IPv6 multicast test (tests/fleet_ip.rs).
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
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

# IP multicast on the loopback interface, which tests/fleet_ip.rs (P_MUL over UDP/IP with four
# gateway processes) needs: some sandboxes have none. Said here, and only then may that test skip.
if ! python3 - <<'PROBE' >/dev/null 2>&1
import socket
g, port = "239.255.77.77", 47777
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
r.bind((g, port))
r.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(g) + socket.inet_aton("127.0.0.1"))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
s.sendto(b"probe", (g, port))
r.settimeout(2)
r.recvfrom(16)
PROBE
then
    echo "scripts/test.sh: IP multicast on the loopback interface is unavailable here:"
    echo "scripts/test.sh: tests/fleet_ip.rs (P_MUL over UDP/IP multicast) is SKIPPED"
    export SKYWAVE_MULTICAST_UNAVAILABLE=1
fi

# A private network namespace (unshare -rn: a user namespace, no privilege needed) holds the
# IPv6 multicast test of tests/fleet_ip.rs; some kernels forbid them. Said here, as above.
if ! unshare -rn sh -c 'ip link add v0 type veth peer name v1' >/dev/null 2>&1; then
    echo "scripts/test.sh: no private network namespace here (unshare -rn with a veth pair):"
    echo "scripts/test.sh: the IPv6 test of tests/fleet_ip.rs (P_MUL over IPv6 multicast) is SKIPPED"
    export SKYWAVE_NETNS_UNAVAILABLE=1
fi

# The end-to-end tests (tests/) run the real binaries; build them first so they are current.
cargo build --workspace --bins
cargo test --workspace --all-targets "$@"
