//! Groups over UDP/IP (`bearer = "pmul-ip"`): a group's multicast address and dynamic pool, the
//! peers' `ip`, peers reached only by P_MUL over IP, what `routes check` refuses and what
//! `routes explain` says.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{errors, targets};

use std::net::IpAddr;

use skywave_route::{Bearer, GroupBearer, RoutingTable, pmul_ip_id};

/// A base with three ships on an IP network: two also reachable by HMTP over 5066, the third
/// only by P_MUL over IP.
const IP_FLEET: &str = r#"
[lan]
domains = ["base.example"]

[[peer]]
name = "ship1"
node = "0.0.2.1"
protocol = "hmtp"
ip = "10.1.0.11"

[[peer]]
name = "ship2"
node = "0.0.2.2"
protocol = "hmtp"
ip = "10.1.0.12"

[[peer]]
name = "ship3"
bearer = "pmul-ip"
ip = "10.1.0.13"

[[group]]
name = "fleet"
bearer = "pmul-ip"
address = "239.192.0.1"
dynamic = "239.192.1.0/28"
members = ["ship1", "ship2", "ship3"]

[[route]]
match = "*.ship1.example"
to = "ship1"

[[route]]
match = "*.ship2.example"
to = "ship2"

[[route]]
match = "*.ship3.example"
to = "ship3"

[[route]]
match = "notices@fleet.example"
to = "fleet"
"#;

fn table() -> RoutingTable {
    RoutingTable::parse("routes.toml", IP_FLEET).unwrap()
}

fn has(e: &[String], text: &str) {
    assert!(e.iter().any(|m| m.contains(text)), "no {text:?} in {e:#?}");
}

#[test]
fn an_ip_group_loads_with_its_address_pool_and_member_addresses() {
    let t = table();
    let g = t.group("fleet").unwrap();
    assert_eq!(g.ip(), Some("239.192.0.1".parse::<IpAddr>().unwrap()));
    assert_eq!(g.node(), None);
    let GroupBearer::PmulIp { dynamic, .. } = &g.bearer else {
        panic!("{:?}", g.bearer)
    };
    assert_eq!(dynamic.unwrap().to_string(), "239.192.1.0/28");
    let ship3 = t.peer("ship3").unwrap();
    assert_eq!(ship3.bearer, Bearer::PmulIp);
    assert_eq!(ship3.protocol.to_string(), "pmul");
    // The P_MUL id over IPv4 is the address itself, as ACP 142's Source_ID.
    assert_eq!(pmul_ip_id(ship3.ip.unwrap()), 0x0a01_000d);
    assert_eq!(pmul_ip_id("fd00::1:2:3".parse().unwrap()), 0x0002_0003);
}

#[test]
fn one_ship_with_a_unicast_protocol_goes_by_it_a_pmul_only_ship_by_pmul() {
    let t = table();
    let one = targets(&t, &["cpt@a.ship1.example"]);
    let plan = t.plan(one.iter().map(String::as_str));
    assert_eq!(plan.unicast, ["ship1"]);
    assert!(plan.multicast.is_empty());

    let only = targets(&t, &["cpt@a.ship3.example"]);
    let plan = t.plan(only.iter().map(String::as_str));
    assert!(plan.unicast.is_empty(), "ship3 has no unicast protocol");
    assert_eq!(plan.multicast.len(), 1);
    assert!(plan.multicast[0].pmul_only);
    assert_eq!(plan.multicast[0].destinations(), ["ship3"]);

    let two = targets(&t, &["cpt@a.ship1.example", "cpt@a.ship2.example"]);
    let plan = t.plan(two.iter().map(String::as_str));
    assert_eq!(plan.multicast[0].destinations(), ["ship1", "ship2"]);
}

#[test]
fn explain_names_the_ip_bearer_the_address_and_the_pool() {
    let t = table();
    let text = t.explain("cpt@a.ship3.example", None).to_string();
    assert!(
        text.contains("bearer: pmul-ip (ACP 142 P_MUL over UDP/IP multicast only)"),
        "{text}"
    );
    assert!(
        text.contains("P_MUL over IP: 10.1.0.13 (P_MUL id 167837709)"),
        "{text}"
    );
    assert!(text.contains("multicast address: 239.192.0.1"), "{text}");
    assert!(
        text.contains("dynamic groups: from 239.192.1.0/28"),
        "{text}"
    );
    assert!(
        text.contains("always by P_MUL over IP (no unicast protocol): to 10.1.0.13 alone"),
        "{text}"
    );
    let text = t.explain("cpt@a.ship1.example", None).to_string();
    assert!(
        text.contains(
            "once by P_MUL multicast to udp 239.192.0.1 when it is also for another member"
        ),
        "{text}"
    );
}

#[test]
fn ip_group_mistakes_are_explained() {
    let e = errors(&IP_FLEET.replace("address = \"239.192.0.1\"", "address = \"10.1.0.1\""));
    has(&e, "address = \"10.1.0.1\" is not an IP multicast address");

    let e = errors(&IP_FLEET.replace("address = \"239.192.0.1\"", "address = \"239.192\""));
    has(&e, "is not an IP address; expected a multicast address");

    let e = errors(&IP_FLEET.replace("address = \"239.192.0.1\"\n", ""));
    has(&e, "group \"fleet\" has no address");

    let e = errors(&IP_FLEET.replace("address = \"239.192.0.1\"", "node = \"16.0.9.9\""));
    has(&e, "node is for groups over STANAG 5066");

    let e = errors(&IP_FLEET.replace("239.192.1.0/28", "239.192.0.0/28"));
    has(&e, "contains the group's own address 239.192.0.1");

    let e = errors(&IP_FLEET.replace("239.192.1.0/28", "10.9.0.0/28"));
    has(&e, "dynamic = \"10.9.0.0/28\" is not a multicast network");

    let e = errors(&IP_FLEET.replace("239.192.1.0/28", "ff15::/120"));
    has(&e, "dynamic groups are IPv4 only");

    let e = errors(&IP_FLEET.replace("ip = \"10.1.0.12\"\n", ""));
    has(
        &e,
        "peer \"ship2\" cannot be in group \"fleet\": P_MUL over IP needs the peer's address",
    );

    let e = errors(&IP_FLEET.replace("ip = \"10.1.0.12\"", "ip = \"fd00::12\""));
    has(
        &e,
        "its ip fd00::12 and the group's address 239.192.0.1 are of different IP versions",
    );

    let e = errors(&IP_FLEET.replace("ip = \"10.1.0.12\"", "ip = \"10.1.0.11\""));
    has(&e, "have the same P_MUL id over IP");

    let e = errors(&IP_FLEET.replace("ip = \"10.1.0.12\"", "ip = \"239.1.1.1\""));
    has(&e, "ip = \"239.1.1.1\" is not a unicast address");

    let e = errors(&IP_FLEET.replace("ip = \"10.1.0.13\"\n", ""));
    has(
        &e,
        "peer \"ship3\" is reached by P_MUL over IP and needs ip",
    );

    let e = errors(&IP_FLEET.replace(
        "bearer = \"pmul-ip\"\nip = \"10.1.0.13\"",
        "bearer = \"pmul-ip\"\nprotocol = \"hmtp\"\nip = \"10.1.0.13\"",
    ));
    has(
        &e,
        "bearer \"pmul-ip\" reaches a peer only by P_MUL over UDP/IP",
    );

    // A pmul-ip ship outside every IP group cannot be reached at all.
    let e = errors(&IP_FLEET.replace(
        "members = [\"ship1\", \"ship2\", \"ship3\"]",
        "members = [\"ship1\", \"ship2\"]",
    ));
    has(&e, "peer \"ship3\" is reached only by P_MUL over IP");

    // A 5066 group cannot hold a ship that has no 5066 node.
    let e = errors(&IP_FLEET.replace(
        "bearer = \"pmul-ip\"\naddress = \"239.192.0.1\"\ndynamic = \"239.192.1.0/28\"",
        "node = \"16.0.9.9\"",
    ));
    has(&e, "this group's P_MUL runs over STANAG 5066");
}

#[test]
fn ipv6_groups_load() {
    let text = IP_FLEET
        .replace("10.1.0.1", "fd00::1:")
        .replace("239.192.0.1", "ff15::1")
        .replace("dynamic = \"239.192.1.0/28\"\n", "");
    let t = RoutingTable::parse("routes.toml", &text).unwrap();
    assert_eq!(
        t.group("fleet").unwrap().ip(),
        Some("ff15::1".parse().unwrap())
    );
    assert_eq!(
        pmul_ip_id(t.peer("ship1").unwrap().ip.unwrap()),
        0x0001_0001
    );
}

#[test]
fn the_documented_ip_base_example_is_valid() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/routes-base-ip.toml");
    let t = RoutingTable::load(&path).unwrap();
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    assert_eq!(
        t.group("fleet").unwrap().ip(),
        Some("239.192.0.1".parse().unwrap())
    );
    assert_eq!(t.plan(["ship1", "ship2"]).multicast.len(), 1);
    assert_eq!(t.plan(["ship1"]).unicast, ["ship1"]);
    assert_eq!(t.plan(["ship3"]).multicast.len(), 1);
}
