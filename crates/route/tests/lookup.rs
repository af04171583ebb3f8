//! Lookup precedence, relay control (the classic open-relay tricks, each refused), explain,
//! the documented example table, atomic reload, and a property test that lookup never panics.

// Helpers outside #[test] functions panic on bad fixtures too; that is what a test wants.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use proptest::prelude::*;
use skywave_route::{
    Compression, Destination, LookupError, Priority, Protocol, RelayDecision, RoutingTable,
    SharedRoutes,
};

const TABLE: &str = r#"
[lan]
domains = ["ship.navy.example", "*.ship.navy.example"]
relay_networks = ["10.1.0.0/16", "fd00:5e::/64"]
authenticated_relay = true

[[peer]]
name = "shore"
node = "0.0.1.1"
protocol = "hmtp"
skywave = true
compression = "lzw12"
priority = "routine"

[[peer]]
name = "flagship"
node = "0.0.2.1"
protocol = "cftp"

[[peer]]
name = "jnos"
protocol = "smtp"
tcp_address = "44.128.1.1:25"
compression = "lzw9"

[[route]]
match = "*"
to = "shore"

[[route]]
match = "*.example"
to = "jnos"

[[route]]
match = "*.navy.example"
to = "shore"

[[route]]
match = "*.fleet.navy.example"
to = "flagship"

[[route]]
match = "fleet.navy.example"
to = "jnos"

[[route]]
match = "Admiral@fleet.navy.example"
to = "shore"
priority = "flash"

[[route]]
match = "bosun@ship.navy.example"
to = "flagship"
"#;

fn table() -> RoutingTable {
    RoutingTable::parse("routes.toml", TABLE).expect("test table is valid")
}

/// One table for the property tests, parsed once.
static TABLE_ONCE: LazyLock<RoutingTable> = LazyLock::new(table);

/// Where `address` goes: the peer's name or "lan".
fn goes_to(table: &RoutingTable, address: &str) -> String {
    match table.lookup(address) {
        Ok(route) => match route.destination {
            Destination::Lan => "lan".to_owned(),
            Destination::Peer(p) => p.name.clone(),
            Destination::Group(g) => g.name.clone(),
        },
        Err(e) => panic!("{address}: {e}"),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("test IP")
}

#[test]
fn most_specific_rule_wins() {
    let t = table();
    let cases = [
        // exact address beats exact domain (local part compared without regard to case)
        ("admiral@fleet.navy.example", "shore"),
        ("ADMIRAL@Fleet.Navy.Example", "shore"),
        ("<admiral@fleet.navy.example>", "shore"),
        // exact domain beats wildcards
        ("captain@fleet.navy.example", "jnos"),
        // the deepest wildcard wins, at any depth
        ("x@a.fleet.navy.example", "flagship"),
        ("x@b.a.fleet.navy.example", "flagship"),
        ("x@hq.navy.example", "shore"),
        ("x@navy.example", "jnos"), // *.example: a wildcard does not match its own apex
        ("x@other.example", "jnos"),
        // catch-all
        ("x@example.org", "shore"),
        ("x@example", "shore"),
        // local domains are delivered on the LAN, with their subdomains...
        ("cook@ship.navy.example", "lan"),
        ("cook@mess.ship.navy.example", "lan"),
        // ...except an exact-address route, which is more specific
        ("bosun@ship.navy.example", "flagship"),
        ("Bosun@SHIP.navy.example", "flagship"),
        // a lookalike domain is not a subdomain
        ("x@evilship.navy.example", "shore"),
    ];
    for (address, peer) in cases {
        assert_eq!(goes_to(&t, address), peer, "{address}");
    }
}

#[test]
fn route_carries_protocol_compression_and_priority() {
    let t = table();
    let route = t.lookup("Admiral@Fleet.Navy.Example").expect("routed");
    assert_eq!(route.address.to_string(), "Admiral@fleet.navy.example");
    assert_eq!(route.address.local_part(), "Admiral"); // case preserved
    let Destination::Peer(peer) = route.destination else {
        panic!("expected a peer")
    };
    assert_eq!(peer.protocol, Protocol::Hmtp);
    assert_eq!(peer.compression, Compression::Lzw { bits: 12 });
    assert_eq!(route.priority, Priority::new(4).expect("flash")); // the route's
    assert_eq!(route.rule.line, 47);

    let route = t.lookup("x@hq.navy.example").expect("routed");
    assert_eq!(route.priority, Priority::new(-2).expect("routine")); // the peer's default
    let route = t.lookup("x@a.fleet.navy.example").expect("routed");
    assert_eq!(route.priority, Priority::default()); // neither: 0
    let node = t.peer("flagship").and_then(|p| p.node).expect("node");
    assert_eq!(node.to_string(), "0.0.2.1");
    assert_eq!(node.bits(), 0x0000_0201);
}

#[test]
fn no_catch_all_means_no_route() {
    let t = RoutingTable::parse(
        "r.toml",
        "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n[[route]]\nmatch = \"*.navy.example\"\nto = \"shore\"\n",
    )
    .expect("valid");
    let err = t.lookup("x@example.org").expect_err("no route");
    assert!(matches!(err, LookupError::NoRoute(_)));
    assert_eq!(
        err.smtp_reply().to_string(),
        "550 5.1.2 <x@example.org>: no route to domain example.org"
    );
    assert_eq!(
        t.explain("x@Example.org", None).to_string(),
        "address: x@example.org (domain lower-cased; local part kept as written)
rules considered, most specific first:
  address   x@example.org  no rule
  domain    example.org    no rule
  wildcard  *.org          no rule
  catch-all *              no rule
route: none (no rule matches and there is no catch-all \"*\")
SMTP reply: 550 5.1.2 <x@example.org>: no route to domain example.org
"
    );
    match t.relay_decision(ip("127.0.0.1"), true, "x@example.org") {
        RelayDecision::Refuse(r) => assert_eq!((r.code, r.enhanced), (550, "5.1.2")),
        RelayDecision::Accept(_) => panic!("accepted an unroutable address"),
    }
}

/// The classic tricks used to make a mail server relay for strangers. Each must be refused
/// before any rule is consulted, whoever the client is, even though the table has a
/// catch-all and the local domain is `ship.navy.example`.
const RELAY_TRICKS: &[(&str, &str, &str)] = &[
    // (address, enhanced status, start of the reason)
    (
        "victim%example.com@ship.navy.example",
        "5.7.1",
        "percent hack",
    ),
    ("victim%example.com", "5.1.3", "no @"),
    (
        "\"victim%example.com\"@ship.navy.example",
        "5.7.1",
        "quoted local part contains '%'",
    ),
    (
        "\"victim@example.com\"@ship.navy.example",
        "5.7.1",
        "quoted local part contains '@'",
    ),
    (
        "\"victim\\@example.com\"@ship.navy.example",
        "5.7.1",
        "quoted local part contains '@'",
    ),
    (
        "\"example.com!victim\"@ship.navy.example",
        "5.7.1",
        "quoted local part contains '!'",
    ),
    (
        "example.com!victim@ship.navy.example",
        "5.7.1",
        "bang paths",
    ),
    (
        "victim@example.com@ship.navy.example",
        "5.7.1",
        "more than one @",
    ),
    (
        "@ship.navy.example:victim@example.com",
        "5.7.1",
        "source routes",
    ),
    (
        "<@ship.navy.example,@relay.example:victim@example.com>",
        "5.7.1",
        "source routes",
    ),
    ("victim@[10.1.2.3]", "5.7.1", "IP-literal domains"),
    ("victim@[IPv6:fd00:5e::1]", "5.7.1", "IP-literal domains"),
    (
        "victim@10.1.2.3",
        "5.7.1",
        "\"10.1.2.3\" looks like an IP address",
    ),
    ("cook@ship.navy.example.", "5.1.3", "trailing dot"),
    ("victim@example.com.", "5.1.3", "trailing dot"),
    ("victim@", "5.1.3", "the domain is empty"),
    ("@ship.navy.example", "5.1.3", "empty local part"),
    ("\"\"@ship.navy.example", "5.1.3", "empty local part"),
    ("", "5.1.3", "empty address"),
    ("<>", "5.1.3", "empty address"),
    ("<cook@ship.navy.example", "5.1.3", "unbalanced"),
    ("cook@ship..navy.example", "5.1.3", "empty label"),
    (
        ".cook@ship.navy.example",
        "5.1.3",
        "local part has a leading",
    ),
    (
        "cook..x@ship.navy.example",
        "5.1.3",
        "local part has a leading",
    ),
    ("cook x@ship.navy.example", "5.1.3", "character ' '"),
    (
        "cook@ship.navy.example\r\nRCPT TO:<victim@example.com>",
        "5.1.3",
        "unbalanced",
    ),
    ("cook@ship.navy.example\r\nDATA", "5.1.3", "character '\\r'"),
    ("cook@ship.navy.example\0", "5.1.3", "character '\\0'"),
    (
        "cook@-ship.navy.example",
        "5.1.3",
        "label \"-ship\" starts or ends",
    ),
    ("cook@ship_1.navy.example", "5.1.3", "character '_'"),
    ("kök@schiff.navy.example", "5.6.7", "non-ASCII"),
    (
        "kok@\u{301}ex\u{e4}mple.example",
        "5.1.3",
        "not a valid internationalised domain",
    ),
    ("postmaster", "5.1.3", "no @"),
    (
        "\"unterminated@ship.navy.example",
        "5.1.3",
        "quoted local part is not terminated",
    ),
    (
        "\"a\"b@ship.navy.example",
        "5.1.3",
        "text after the closing quote",
    ),
];

/// An internationalised domain is routed by its A-labels (IDNA2008 with UTS #46), however the
/// address or the rule writes it; an internationalised local part has no ASCII form.
#[test]
fn internationalised_domains_are_routed_by_their_a_labels() {
    let text = format!(
        "{TABLE}\n[[route]]\nmatch = \"*.m\u{fc}nchen.example\"\nto = \"flagship\"\n\n\
         [[route]]\nmatch = \"xn--brcke-lva.example\"\nto = \"jnos\"\n"
    );
    let t = RoutingTable::parse("routes.toml", &text).expect("valid");
    for (address, to) in [
        ("ops@hafen.m\u{fc}nchen.example", "flagship"),
        ("ops@hafen.M\u{dc}NCHEN.example", "flagship"),
        ("ops@hafen.xn--mnchen-3ya.example", "flagship"),
        ("ops@br\u{fc}cke.example", "jnos"),
    ] {
        assert_eq!(goes_to(&t, address), to, "{address}");
    }
    let route = t.lookup("ops@br\u{fc}cke.example").unwrap();
    assert_eq!(route.address.to_string(), "ops@xn--brcke-lva.example");
    assert!(matches!(
        t.lookup("b\u{f8}rge@br\u{fc}cke.example"),
        Err(LookupError::Address(_))
    ));
}

#[test]
fn relay_tricks_are_refused_for_every_client() {
    let t = table();
    let clients = [
        (ip("192.0.2.1"), false), // stranger
        (ip("10.1.2.3"), false),  // relay network
        (ip("192.0.2.1"), true),  // authenticated
    ];
    for (address, enhanced, reason) in RELAY_TRICKS {
        for (client, auth) in clients {
            match t.relay_decision(client, auth, address) {
                RelayDecision::Accept(route) => {
                    panic!(
                        "{address:?} from {client} was accepted as {}",
                        route.address
                    )
                }
                RelayDecision::Refuse(r) => {
                    // 553 for the address it cannot carry (RFC 6531), 550 for the others.
                    let code = if *enhanced == "5.6.7" { 553 } else { 550 };
                    assert_eq!(r.code, code, "{address:?}");
                    assert_eq!(r.enhanced, *enhanced, "{address:?}: {}", r.text);
                    assert!(
                        r.text.starts_with(reason) || r.text.contains(reason),
                        "{address:?}: {}",
                        r.text
                    );
                }
            }
        }
    }
}

#[test]
fn over_long_addresses_are_refused() {
    let t = table();
    let long_local = format!("{}@ship.navy.example", "a".repeat(65));
    let label = "d".repeat(63);
    let long_label = format!("a@{}.navy.example", "d".repeat(64));
    let long_path = format!("a@{label}.{label}.{label}.{label}.example");
    let huge = "a".repeat(100_000);
    for (address, reason) in [
        (
            long_local.as_str(),
            "local part is 65 octets long; at most 64",
        ),
        (long_label.as_str(), "is 64 octets long; at most 63"),
        (
            long_path.as_str(),
            "address path is 265 octets long; at most 256",
        ),
        (huge.as_str(), "address path is 100000 octets long"),
    ] {
        match t.relay_decision(ip("10.1.2.3"), true, address) {
            RelayDecision::Refuse(r) => {
                assert_eq!((r.code, r.enhanced), (550, "5.1.3"));
                assert!(r.text.contains(reason), "{}", r.text);
            }
            RelayDecision::Accept(_) => panic!("accepted an over-long address"),
        }
    }
    // At the limits exactly: 64-octet local part, 254-octet mailbox (256 with brackets).
    let local = "a".repeat(64);
    assert_eq!(goes_to(&t, &format!("{local}@ship.navy.example")), "lan");
    let domain = format!("{label}.{label}.{label}.{}.example", "e".repeat(52));
    let at_limit = format!("<a@{domain}>");
    assert_eq!(at_limit.len(), 256);
    assert_eq!(goes_to(&t, &at_limit), "jnos");
}

#[test]
fn relay_control() {
    let t = table();
    let stranger = ip("192.0.2.1");
    let stranger_v6 = ip("2001:db8::1");
    let lan_v4 = ip("10.1.44.5");
    let lan_v6 = ip("fd00:5e::25");
    let lan_mapped = ip("::ffff:10.1.0.9");

    let accept = |client, auth, rcpt: &str| match t.relay_decision(client, auth, rcpt) {
        RelayDecision::Accept(route) => Ok(route.address.to_string()),
        RelayDecision::Refuse(r) => Err(r.to_string()),
    };

    // Mail for the ship itself: accepted from anyone.
    assert_eq!(
        accept(stranger, false, "cook@ship.navy.example"),
        Ok("cook@ship.navy.example".into())
    );
    assert!(accept(stranger_v6, false, "cook@galley.ship.navy.example").is_ok());
    // An exact-address route inside a local domain is still mail for us.
    assert!(accept(stranger, false, "bosun@ship.navy.example").is_ok());

    // Mail for HF peers: only from relay networks or authenticated users.
    assert_eq!(
        accept(stranger, false, "ops@navy.example"),
        Err("554 5.7.1 <ops@navy.example>: Relay access denied: not a local domain, and this client may not relay".into())
    );
    assert!(accept(stranger_v6, false, "x@example.org").is_err());
    assert!(accept(lan_v4, false, "ops@navy.example").is_ok());
    assert!(accept(lan_v6, false, "ops@navy.example").is_ok());
    assert!(accept(lan_mapped, false, "ops@navy.example").is_ok());
    assert!(accept(stranger, true, "ops@navy.example").is_ok());

    // authenticated_relay = false: authentication alone is not enough.
    let strict = TABLE.replace("authenticated_relay = true", "authenticated_relay = false");
    let strict = RoutingTable::parse("routes.toml", &strict).expect("valid");
    assert!(matches!(
        strict.relay_decision(stranger, true, "ops@navy.example"),
        RelayDecision::Refuse(_)
    ));
    assert!(matches!(
        strict.relay_decision(lan_v4, false, "ops@navy.example"),
        RelayDecision::Accept(_)
    ));
}

#[test]
fn default_relay_networks_are_loopback_only() {
    let t = RoutingTable::parse(
        "r.toml",
        "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n[[route]]\nmatch = \"*\"\nto = \"shore\"\n",
    )
    .expect("valid");
    assert!(matches!(
        t.relay_decision(ip("127.0.0.1"), false, "a@b.example"),
        RelayDecision::Accept(_)
    ));
    assert!(matches!(
        t.relay_decision(ip("::1"), false, "a@b.example"),
        RelayDecision::Accept(_)
    ));
    assert!(matches!(
        t.relay_decision(ip("10.0.0.1"), false, "a@b.example"),
        RelayDecision::Refuse(_)
    ));
}

#[test]
fn explain_shows_the_candidates_and_the_winner() {
    let t = table();
    let text = t
        .explain(
            "Captain@A.Fleet.Navy.Example",
            Some((ip("192.0.2.1"), false)),
        )
        .to_string();
    assert_eq!(
        text,
        "address: Captain@a.fleet.navy.example (domain lower-cased; local part kept as written)
rules considered, most specific first:
  address   captain@a.fleet.navy.example  no rule
  domain    a.fleet.navy.example          no rule
  wildcard  *.fleet.navy.example          routes.toml:39:9 -> flagship  <- wins: the most specific rule that exists
  wildcard  *.navy.example                routes.toml:35:9 -> shore  (not used: a more specific rule matched)
  wildcard  *.example                     routes.toml:31:9 -> jnos  (not used: a more specific rule matched)
  catch-all *                             routes.toml:27:9 -> shore  (not used: a more specific rule matched)
route: HF peer \"flagship\" (not a local domain)
  node address: 0.0.2.1
  protocol: cftp
  skywave peer: no
  compression: none
  bearer: sis (the gateway's SIS server)
  size limit: 1000000 bytes
  batch budget: 32768 bytes
  held: no
  priority: 0 (priority), from the peer's default
client 192.0.2.1 (not authenticated): refused: 554 5.7.1 <Captain@a.fleet.navy.example>: Relay access denied: not a local domain, and this client may not relay
"
    );

    let e = t.explain("cook@ship.navy.example", Some((ip("10.1.0.1"), false)));
    let winner: Vec<_> = e.candidates.iter().filter(|c| c.wins).collect();
    assert_eq!(winner.len(), 1);
    assert_eq!(winner[0].pattern, "ship.navy.example");
    let route = e.route.as_ref().expect("routed");
    assert!(route.peer.is_none() && route.local);
    assert!(e.to_string().contains("-> lan ([lan] domains)  <- wins"));
    assert!(e.to_string().ends_with(
        "client 10.1.0.1 (not authenticated): accepted: ship.navy.example is a local domain\n"
    ));

    let e = t.explain("victim%x@ship.navy.example", None);
    assert!(e.candidates.is_empty() && e.route.is_none());
    assert_eq!(
        e.to_string(),
        "address: victim%x@ship.navy.example
refused: percent hack (user%domain@relay) is refused; this gateway does not relay by local-part routing
SMTP reply: 550 5.7.1 percent hack (user%domain@relay) is refused; this gateway does not relay by local-part routing
"
    );
}

fn example_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/routes.toml")
}

#[test]
fn documented_example_is_valid() {
    let t = RoutingTable::load(&example_path()).expect("config/routes.toml is valid");
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    assert_eq!(t.peers().len(), 1);
    assert_eq!(t.route_count(), 6);
    let shore = t.peer("shore").expect("shore peer");
    assert_eq!(shore.compression, Compression::Deflate);
    assert!(shore.skywave);
    assert_eq!(shore.size_limit, 2_000_000);
    assert_eq!(shore.batch_bytes, 48 * 1024);
    assert_eq!(goes_to(&t, "ops@navy.example"), "shore");
    assert_eq!(goes_to(&t, "cook@ship.navy.example"), "lan");
    assert_eq!(goes_to(&t, "captain@ship.navy.example"), "shore");
    assert_eq!(goes_to(&t, "someone@lab.example.org"), "lan");
    assert_eq!(goes_to(&t, "friend@example.com"), "shore");
    // lab.example.org is routed to the LAN but is not a local domain: relaying.
    assert!(matches!(
        t.relay_decision(ip("192.0.2.1"), false, "someone@lab.example.org"),
        RelayDecision::Refuse(_)
    ));
}

#[test]
fn reload_swaps_the_whole_table_and_keeps_it_on_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("routes.toml");
    std::fs::write(&path, TABLE).expect("write");
    let shared = SharedRoutes::new(RoutingTable::load(&path).expect("valid"));
    let before: Arc<RoutingTable> = shared.current();
    assert_eq!(goes_to(&before, "x@example.org"), "shore");

    // A broken file: the reload fails and the table in force stays.
    std::fs::write(&path, TABLE.replace("to = \"shore\"", "to = \"shroe\"")).expect("write");
    let err = shared.reload(&path).expect_err("broken table");
    assert!(err.to_string().contains("unknown peer \"shroe\""));
    assert!(Arc::ptr_eq(&before, &shared.current()));

    // A good file: swapped in; a session still holding the old Arc sees the old table.
    std::fs::write(&path, TABLE.replacen("to = \"shore\"", "to = \"jnos\"", 1)).expect("write");
    let after = shared.reload(&path).expect("valid");
    assert_eq!(goes_to(&after, "x@example.org"), "jnos");
    assert_eq!(goes_to(&shared.current(), "x@example.org"), "jnos");
    assert_eq!(goes_to(&before, "x@example.org"), "shore");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Lookup, relay decision and explain never panic, whatever the string.
    #[test]
    fn lookup_never_panics(address in ".{0,300}") {
        let t = &*TABLE_ONCE;
        let _ = t.lookup(&address);
        let _ = t.relay_decision(ip("10.1.2.3"), true, &address);
        let _ = t.explain(&address, Some((ip("192.0.2.1"), false))).to_string();
    }

    /// Same, with strings made of the characters that matter to address syntax.
    #[test]
    fn lookup_never_panics_on_address_like_strings(address in "[<>@%!\".:,\\[\\]\\\\a-cA-C0-9 -]{0,80}") {
        let t = &*TABLE_ONCE;
        if let Ok(route) = t.lookup(&address) {
            // What was accepted is an ordinary address that the rule really matches.
            prop_assert!(route.rule.pattern.matches(&route.address));
            let text = route.address.to_string();
            prop_assert!(!text.contains('%') && !text.contains('!') && !text.contains('['));
            prop_assert_eq!(text.matches('@').count(), 1);
        }
        let _ = t.explain(&address, None).to_string();
    }
}
