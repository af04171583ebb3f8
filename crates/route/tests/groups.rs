//! Multicast groups in the routing table: `[[group]]`, routes to a group, per-peer EMCON, the
//! unicast/multicast choice for a message, the mistakes a person can make and what they read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::{errors, targets};

use skywave_route::RoutingTable;

/// A base with four ships, three of them in one group (ship3 under EMCON) and a fourth alone.
const FLEET: &str = r#"
[lan]
domains = ["base.example"]

[[peer]]
name = "ship1"
node = "0.0.2.1"
protocol = "hmtp"

[[peer]]
name = "ship2"
node = "0.0.2.2"
protocol = "hmtp"

[[peer]]
name = "ship3"
node = "0.0.2.3"
protocol = "hmtp"
emcon = true

[[peer]]
name = "tanker"
node = "0.0.3.1"
protocol = "cftp"

[[group]]
name = "fleet"
node = "16.0.9.9"
members = ["ship1", "ship2", "ship3"]
repeats = 2

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
match = "tanker.example"
to = "tanker"

[[route]]
match = "notices@fleet.example"
to = "fleet"
"#;

fn fleet() -> RoutingTable {
    RoutingTable::parse("routes.toml", FLEET).unwrap()
}

#[test]
fn a_group_loads_with_its_members_address_and_repeats() {
    let t = fleet();
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    let g = t.group("fleet").unwrap();
    assert_eq!(
        g.node().map(|n| n.to_string()).unwrap_or_default(),
        "16.0.9.9"
    );
    assert!(g.node().is_some_and(|n| n.is_group()));
    assert_eq!(g.members, ["ship1", "ship2", "ship3"]);
    assert_eq!(g.repeats, 2);
    assert_eq!(t.group_of("ship2").unwrap().name, "fleet");
    assert!(t.group_of("tanker").is_none());
    assert!(t.peer("ship3").unwrap().emcon);
    assert!(!t.peer("ship1").unwrap().emcon);
    assert_eq!(
        targets(&t, &["notices@fleet.example"]),
        ["fleet"],
        "a route may name a group"
    );
}

#[test]
fn two_ships_of_a_group_go_once_by_multicast_one_ship_by_unicast() {
    let t = fleet();
    let two = targets(&t, &["cpt@a.ship1.example", "ops@b.ship2.example"]);
    let plan = t.plan(two.iter().map(String::as_str));
    assert_eq!(plan.multicast.len(), 1);
    assert_eq!(plan.multicast[0].group.name, "fleet");
    assert_eq!(plan.multicast[0].destinations(), ["ship1", "ship2"]);
    assert!(plan.unicast.is_empty());
    assert_eq!(plan.multicast_for("ship1").unwrap().name, "fleet");

    let one = targets(&t, &["cpt@a.ship1.example", "x@a.ship1.example"]);
    let plan = t.plan(one.iter().map(String::as_str));
    assert!(plan.multicast.is_empty(), "one ship: unicast");
    assert_eq!(plan.unicast, ["ship1"]);
    assert!(plan.multicast_for("ship1").is_none());

    // A ship outside the group always goes by unicast, beside the group's multicast.
    let mixed = targets(
        &t,
        &["a@x.ship1.example", "b@x.ship2.example", "c@tanker.example"],
    );
    let plan = t.plan(mixed.iter().map(String::as_str));
    assert_eq!(plan.multicast[0].destinations(), ["ship1", "ship2"]);
    assert_eq!(plan.unicast, ["tanker"]);
}

#[test]
fn an_emcon_ship_is_reached_by_multicast_even_alone() {
    let t = fleet();
    let plan = t.plan(["ship3"]);
    assert_eq!(plan.multicast.len(), 1);
    assert!(plan.multicast[0].emcon);
    assert_eq!(plan.multicast[0].destinations(), ["ship3"]);
    assert!(plan.unicast.is_empty());
}

#[test]
fn mail_for_the_group_goes_to_every_member() {
    let t = fleet();
    let plan = t.plan(["fleet", "ship1"]);
    assert_eq!(plan.multicast.len(), 1);
    assert!(plan.multicast[0].whole_group);
    assert_eq!(
        plan.multicast[0].destinations(),
        ["ship1", "ship2", "ship3"]
    );
}

#[test]
fn explain_shows_the_group_and_the_choice() {
    let t = fleet();
    let text = t.explain("ops@b.ship2.example", None).to_string();
    assert!(text.contains("member of group \"fleet\":"), "{text}");
    assert!(text.contains("group address: 16.0.9.9"), "{text}");
    assert!(
        text.contains("by hmtp unicast when the message is for ship2 alone; once by P_MUL multicast to 16.0.9.9"),
        "{text}"
    );
    let text = t.explain("a@x.ship3.example", None).to_string();
    assert!(text.contains("EMCON: yes"), "{text}");
    let text = t.explain("notices@fleet.example", None).to_string();
    assert!(text.contains("route: multicast group \"fleet\""), "{text}");
}

#[test]
fn group_mistakes_are_explained() {
    let base = FLEET.replace(
        "[[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"ship2\", \"ship3\"]\nrepeats = 2\n",
        "",
    );
    assert_ne!(base, FLEET);
    let with = |group: &str| format!("{base}\n{group}");

    let e = errors(&with(
        "[[group]]\nname = \"fleet\"\nnode = \"0.0.9.9\"\nmembers = [\"ship1\", \"ship2\", \"ship3\"]\n",
    ));
    assert!(
        e.iter().any(
            |m| m.contains("is not a STANAG 5066 group address; expected w.x.y.z with w 16-31")
        ),
        "{e:#?}"
    );

    let e = errors(&with(
        "[[group]]\nname = \"fleet\"\nmembers = [\"ship1\", \"ship3\"]\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("group \"fleet\" has no node address")),
        "{e:#?}"
    );

    let e = errors(&with(
        "[[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"shp2\", \"ship3\"]\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("unknown peer \"shp2\" in group \"fleet\"")),
        "{e:#?}"
    );

    let e = errors(&with(
        "[[group]]\nname = \"ship1\"\nnode = \"16.0.9.9\"\nmembers = [\"ship2\", \"ship3\"]\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("group name \"ship1\" is already the name of the peer")),
        "{e:#?}"
    );

    let e = errors(&with(
        "[[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"ship3\"]\n\n[[group]]\nname = \"pair\"\nnode = \"16.0.9.8\"\nmembers = [\"ship1\", \"ship2\"]\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("peer \"ship1\" is already in group \"fleet\"")),
        "{e:#?}"
    );

    let e = errors(&with(
        "[[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"ship2\", \"ship3\"]\nrepeats = 9\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("repeats = 9 is out of range; expected 0-5")),
        "{e:#?}"
    );

    // An EMCON ship outside every group cannot be reached at all.
    let e = errors(&with(
        "[[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"ship2\"]\n",
    ));
    assert!(e.iter().any(|m| m.contains("peer \"ship3\" keeps EMCON (emcon = true) but is in no [[group]]")), "{e:#?}");

    // Routes may name a group; an unknown name lists peers and groups.
    let e = errors(&FLEET.replace("to = \"fleet\"", "to = \"flet\""));
    assert!(
        e.iter()
            .any(|m| m.contains("unknown peer \"flet\"") && m.contains("fleet")),
        "{e:#?}"
    );
}

#[test]
fn a_group_of_one_ship_without_emcon_is_a_warning() {
    let text = FLEET
        .replace(
            "members = [\"ship1\", \"ship2\", \"ship3\"]",
            "members = [\"ship1\"]",
        )
        .replace("emcon = true\n", "");
    let t = RoutingTable::parse("routes.toml", &text).unwrap();
    assert!(
        t.warnings()
            .iter()
            .any(|w| w.headline().contains("group \"fleet\" has one member")),
        "{:?}",
        t.warnings()
    );
}

#[test]
fn the_documented_base_example_is_valid() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/routes-base.toml");
    let t = RoutingTable::load(&path).unwrap();
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    let g = t.group("fleet").unwrap();
    assert_eq!(g.members, ["ship1", "ship2", "ship3"]);
    let plan = t.plan(["ship1", "ship2"]);
    assert_eq!(plan.multicast.len(), 1);
}

#[test]
fn pmul_acks_may_go_by_arq() {
    let t = RoutingTable::parse(
        "routes.toml",
        &FLEET.replace(
            "name = \"tanker\"",
            "name = \"tanker\"\npmul_acks = \"arq\"",
        ),
    )
    .unwrap();
    assert_eq!(
        t.peer("tanker").unwrap().pmul_acks,
        skywave_route::AckMode::Arq
    );
    assert_eq!(
        t.peer("ship1").unwrap().pmul_acks,
        skywave_route::AckMode::NonArq
    );
    let e = errors(&FLEET.replace(
        "name = \"tanker\"",
        "name = \"tanker\"\npmul_acks = \"maybe\"",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("pmul_acks = \"maybe\": expected \"non-arq\" or \"arq\"")),
        "{e:#?}"
    );
}
