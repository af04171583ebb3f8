//! One test per kind of mistake in routes.toml, each showing the exact message a person gets:
//! file:line:column, what is wrong and what was expected (and, for some, the whole rendering
//! with the offending line and the caret).

// Helpers outside #[test] functions panic on bad fixtures too; that is what a test wants.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::errors;

use skywave_route::{LoadError, RoutingTable};

/// A valid peer and route, for tests that add one mistake to an otherwise good table.
const SHORE: &str = r#"[[peer]]
name = "shore"
node = "0.0.1.1"
protocol = "hmtp"
"#;

/// Every diagnostic rendered (headline, source line, caret).
fn rendered(text: &str) -> Vec<String> {
    match RoutingTable::parse("routes.toml", text) {
        Ok(_) => panic!("expected errors in:\n{text}"),
        Err(e) => e.diagnostics().iter().map(ToString::to_string).collect(),
    }
}

fn one_error(text: &str) -> String {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected one error, got {errs:#?}");
    errs.into_iter().next().unwrap_or_default()
}

#[test]
fn toml_syntax_error() {
    assert_eq!(
        rendered("[[peer]\nname = \"shore\"\n"),
        [
            "routes.toml:1:8: error: unclosed array table, expected `]`\n  |\n1 | [[peer]\n  |        ^"
        ]
    );
}

#[test]
fn unterminated_string() {
    assert_eq!(
        one_error("[[peer]]\nname = \"shore\nnode = \"0.0.1.1\"\n"),
        "routes.toml:2:14: error: invalid basic string, expected `\"`"
    );
}

#[test]
fn unknown_key_lists_the_expected_ones() {
    assert_eq!(
        rendered("[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocl = \"hmtp\"\n"),
        [
            "routes.toml:4:1: error: unknown field `protocl`, expected one of `name`, `node`, `protocol`, \
          `skywave`, `xcut`, `compression`, `priority`, `size_limit`, `batch_bytes`, `bearer`, `sis_server`, \
          `tcp_address`, `hold`, `hold_above`, `emcon`, `pmul_acks`, `ip`, `schedule`, `schedule_bypass`, `fallback`, `fallback_after`, `probe_every`, `strip_headers`, `text_only`, `shrink_images`, \
          `image_quality`\n  |\n4 | protocl = \"hmtp\"\n  | ^^^^^^^"
        ]
    );
}

#[test]
fn unknown_key_in_route() {
    let text = format!("{SHORE}\n[[route]]\nmatch = \"*\"\ntoo = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:8:1: error: unknown field `too`, expected one of `match`, `to`, `priority`"
    );
}

#[test]
fn unknown_table() {
    assert_eq!(
        one_error("[peers]\nname = \"shore\"\n"),
        "routes.toml:1:2: error: unknown field `peers`, expected one of `lan`, `peer`, `route`, `group`"
    );
}

#[test]
fn single_brackets_for_an_array_of_tables() {
    assert_eq!(
        one_error("[peer]\nname = \"shore\"\n"),
        "routes.toml:1:1: error: invalid type: map, expected a sequence; peers and routes are arrays \
         of tables: write [[peer]] or [[route]] with double brackets"
    );
}

#[test]
fn missing_required_key() {
    assert_eq!(
        rendered("[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\n")[0],
        "routes.toml:1:1: error: peer \"shore\" has no protocol; expected protocol = \"hmtp\", \"cftp\" or \"smtp\" \
         (or bearer = \"pmul-ip\" for a peer reached only by P_MUL over IP)\n  |\n1 | [[peer]]\n  | ^^^^^^^^"
    );
}

#[test]
fn wrong_type() {
    assert_eq!(
        one_error("[[peer]]\nname = \"shore\"\nnode = 5\nprotocol = \"hmtp\"\n"),
        "routes.toml:3:8: error: invalid type: integer `5`, expected a string"
    );
}

#[test]
fn list_expected() {
    assert_eq!(
        one_error("[lan]\ndomains = \"ship.example\"\n"),
        "routes.toml:2:11: error: invalid type: string \"ship.example\", expected a sequence"
    );
}

#[test]
fn unknown_protocol() {
    assert_eq!(
        one_error("[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"uucp\"\n"),
        "routes.toml:4:12: error: unknown protocol `uucp`, expected one of `hmtp`, `cftp`, `smtp`, `pmul`"
    );
}

#[test]
fn unknown_bearer() {
    let text = format!("{SHORE}bearer = \"radio\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:10: error: unknown bearer `radio`, expected one of `sis`, `tcp`, `pmul-ip`"
    );
}

#[test]
fn duplicate_key() {
    assert_eq!(
        one_error("[[peer]]\nname = \"shore\"\nname = \"ship\"\n"),
        "routes.toml:3:1: error: duplicate key: it is already set in this table; keep one"
    );
}

#[test]
fn duplicate_peer_name() {
    let text = format!("{SHORE}\n{SHORE}\n[[route]]\nmatch = \"*\"\nto = \"shore\"\n");
    assert_eq!(
        rendered(&text),
        [
            "routes.toml:7:8: error: duplicate peer name \"shore\"; first defined at line 1\n  |\n\
          7 | name = \"shore\"\n  |        ^^^^^^^"
        ]
    );
}

#[test]
fn reserved_peer_name() {
    let text = "[[peer]]\nname = \"LAN\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n[[route]]\nmatch = \"*\"\nto = \"lan\"\n";
    assert_eq!(
        errors(text),
        [
            "routes.toml:2:8: error: peer name \"LAN\" is reserved: routes use to = \"lan\" for delivery \
          on the LAN; choose another name"
        ]
    );
}

#[test]
fn invalid_peer_name() {
    let text = "[[peer]]\nname = \"shore side\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n[[route]]\nmatch = \"*\"\nto = \"shore side\"\n";
    assert_eq!(
        one_error(text),
        "routes.toml:2:8: error: invalid peer name \"shore side\"; expected 1-64 letters, digits, '-', '_' or '.', not only dots"
    );
    // A name is also a file name under the state directory: ".." would be its parent.
    let text = "[[peer]]\nname = \"..\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n[[route]]\nmatch = \"*\"\nto = \"..\"\n";
    assert_eq!(
        one_error(text),
        "routes.toml:2:8: error: invalid peer name \"..\"; expected 1-64 letters, digits, '-', '_' or '.', not only dots"
    );
}

#[test]
fn invalid_node_address() {
    let text = "[[peer]]\nname = \"shore\"\nnode = \"16.0.1.1\"\nprotocol = \"hmtp\"\n[[route]]\nmatch = \"*\"\nto = \"shore\"\n";
    assert_eq!(
        rendered(text),
        [
            "routes.toml:3:8: error: \"16.0.1.1\" is not a STANAG 5066 node address; expected w.x.y.z with \
          w 0-15 and x, y, z 0-255, e.g. 0.0.1.2\n  |\n3 | node = \"16.0.1.1\"\n  |        ^^^^^^^^^^"
        ]
    );
}

#[test]
fn missing_node_address() {
    let text = "[[peer]]\nname = \"shore\"\nprotocol = \"cftp\"\n[[route]]\nmatch = \"*\"\nto = \"shore\"\n";
    assert_eq!(
        one_error(text),
        "routes.toml:1:1: error: peer \"shore\" has no node address; cftp over STANAG 5066 needs \
         node = \"w.x.y.z\" (the peer's 5066 address)"
    );
}

const ROUTE_ALL: &str = "[[route]]\nmatch = \"*\"\nto = \"shore\"\n";

#[test]
fn unknown_compression() {
    let text = format!("{SHORE}skywave = true\ncompression = \"zstd\"\n{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:15: error: unknown compression \"zstd\"; expected none, lzw9 ... lzw16, or deflate"
    );
}

#[test]
fn lzw_without_code_width() {
    let text = format!("{SHORE}skywave = true\ncompression = \"lzw\"\n{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:15: error: \"lzw\" needs its maximum code width: lzw9 (the JNOS default) to lzw16 (best ratio)"
    );
}

#[test]
fn compression_towards_a_plain_hmtp_peer() {
    let text = format!("{SHORE}compression = \"deflate\"\n{ROUTE_ALL}");
    assert_eq!(
        rendered(&text),
        [
            "routes.toml:5:15: error: compression \"deflate\" towards peer \"shore\" needs skywave = true: \
          only another skywave gateway understands a compressed HMTP stream; other peers get plain HMTP\n  |\n\
          5 | compression = \"deflate\"\n  |               ^^^^^^^^^"
        ]
    );
}

#[test]
fn xcut_towards_a_plain_hmtp_peer() {
    let text = format!("{SHORE}xcut = true\n{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:8: error: xcut = true towards peer \"shore\" needs skywave = true: only a skywave \
         gateway's HMTP server honours the cut marker; any other would read it as data"
    );
}

#[test]
fn xcut_with_cftp() {
    let text = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"cftp\"\nskywave = true\nxcut = true\n[[route]]\nmatch = \"*\"\nto = \"shore\"\n";
    assert_eq!(
        one_error(text),
        "routes.toml:6:8: error: xcut is for protocol \"hmtp\" (skywave's cut marker on SAP 3); peer \"shore\" \
         has protocol \"cftp\""
    );
}

#[test]
fn xcut_towards_a_skywave_peer_is_kept_and_explained() {
    let text = format!("{SHORE}skywave = true\nxcut = true\n{ROUTE_ALL}");
    let table = RoutingTable::parse("routes.toml", &text).expect("valid");
    assert!(table.peer("shore").unwrap().xcut);
    let why = table.explain("ops@shore.example", None).to_string();
    assert!(why.contains("cut marker (XCUT): assumed"), "{why}");
    // false needs nothing, whatever the peer.
    let text = format!("{SHORE}xcut = false\n{ROUTE_ALL}");
    let table = RoutingTable::parse("routes.toml", &text).expect("valid");
    assert!(!table.peer("shore").unwrap().xcut);
}

#[test]
fn compression_with_cftp() {
    let text = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"cftp\"\nskywave = true\ncompression = \"lzw12\"\n[[route]]\nmatch = \"*\"\nto = \"shore\"\n";
    assert_eq!(
        one_error(text),
        "routes.toml:6:15: error: compression \"lzw12\" is not valid with protocol \"cftp\": CFTP gzips every \
         mail file itself (Annex F); use compression = \"none\" or leave it out"
    );
}

const JNOS: &str =
    "[[peer]]\nname = \"jnos\"\nprotocol = \"smtp\"\ntcp_address = \"44.128.1.1:25\"\n";
const ROUTE_JNOS: &str = "[[route]]\nmatch = \"*\"\nto = \"jnos\"\n";

#[test]
fn deflate_with_smtp() {
    let text = format!("{JNOS}compression = \"deflate\"\n{ROUTE_JNOS}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:15: error: compression \"deflate\" is not valid with protocol \"smtp\": SMTP peers \
         compress only with JNOS LZW (XLZW); use lzw9 ... lzw16 or none"
    );
    // LZW is what JNOS speaks, skywave peer or not.
    let text = format!("{JNOS}compression = \"lzw9\"\n{ROUTE_JNOS}");
    assert!(RoutingTable::parse("routes.toml", &text).is_ok());
}

#[test]
fn bearer_does_not_fit_protocol() {
    let text = format!("{SHORE}bearer = \"tcp\"\n{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:10: error: protocol \"hmtp\" runs over bearer \"sis\" (a STANAG 5066 server); \
         bearer \"tcp\" is only for protocol \"smtp\""
    );
    let text = format!("{JNOS}bearer = \"sis\"\n{ROUTE_JNOS}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:10: error: protocol \"smtp\" runs over bearer \"tcp\" (TCP/IP, e.g. through an \
         IP-over-HF router); bearer \"sis\" carries hmtp and cftp only"
    );
}

#[test]
fn smtp_peer_without_tcp_address() {
    let text =
        "[[peer]]\nname = \"jnos\"\nprotocol = \"smtp\"\n[[route]]\nmatch = \"*\"\nto = \"jnos\"\n";
    assert_eq!(
        one_error(text),
        "routes.toml:1:1: error: peer \"jnos\" speaks smtp over TCP and needs tcp_address = \"host:port\" (its SMTP server)"
    );
}

#[test]
fn bearer_keys_of_the_other_bearer() {
    let text = format!("{SHORE}tcp_address = \"10.0.0.1:25\"\n{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:15: error: tcp_address is only for protocol \"smtp\" (bearer \"tcp\"); peer \"shore\" speaks hmtp over the SIS"
    );
    let text = format!("{JNOS}sis_server = \"127.0.0.1:5066\"\n{ROUTE_JNOS}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:14: error: sis_server is only for protocols over STANAG 5066 (hmtp, cftp); peer \"jnos\" speaks smtp over TCP: use tcp_address"
    );
}

#[test]
fn invalid_host_and_port() {
    let text = format!("{SHORE}sis_server = \"127.0.0.1\"\n{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:14: error: invalid sis_server: \"127.0.0.1\" is not a host and port; expected host:port, \
         e.g. 127.0.0.1:5066, mail.example.org:25 or [::1]:25"
    );
}

#[test]
fn invalid_priority() {
    let text = format!("{SHORE}priority = \"urgent\"\n{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:5:12: error: invalid priority \"urgent\"; expected an MT-PRIORITY number from -9 to 9, \
         or one of deferred (-4), routine (-2), priority (0), immediate (2), flash (4), override (6)"
    );
    let text = format!("{SHORE}[[route]]\nmatch = \"*\"\nto = \"shore\"\npriority = 12\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:8:12: error: invalid priority 12; expected an MT-PRIORITY number from -9 to 9, \
         or one of deferred (-4), routine (-2), priority (0), immediate (2), flash (4), override (6)"
    );
}

#[test]
fn invalid_size() {
    let text = format!("{SHORE}size_limit = \"2 parsecs\"\nbatch_bytes = 0\n{ROUTE_ALL}");
    assert_eq!(
        errors(&text),
        [
            "routes.toml:5:14: error: invalid size_limit \"2 parsecs\"; expected a positive number of bytes, \
             e.g. 500_000 or \"500 kB\" (units: B, kB, KiB, MB, MiB, GB, GiB)",
            "routes.toml:6:15: error: invalid batch_bytes 0; expected a positive number of bytes, \
             e.g. 500_000 or \"500 kB\" (units: B, kB, KiB, MB, MiB, GB, GiB)",
        ]
    );
}

#[test]
fn unknown_peer_in_route() {
    let text = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\n\
                [[peer]]\nname = \"ship\"\nnode = \"0.0.1.2\"\nprotocol = \"hmtp\"\n\n\
                [[route]]\nmatch = \"*.navy.example\"\nto = \"shroe\"\n\n\
                [[route]]\nmatch = \"*\"\nto = \"ship\"\n";
    assert_eq!(
        rendered(text),
        [
            "routes.toml:13:6: error: unknown peer \"shroe\" in route for \"*.navy.example\"; known peers: \
             ship, shore (or \"lan\" for delivery on the LAN)\n   |\n13 | to = \"shroe\"\n   |      ^^^^^^^",
            // The typo also leaves "shore" unused: the warning says so.
            "routes.toml:1:1: warning: peer \"shore\" is never used: no [[route]] sends mail to it\n  |\n\
             1 | [[peer]]\n  | ^^^^^^^^",
        ]
    );
}

#[test]
fn misplaced_wildcard() {
    let text = format!("{SHORE}[[route]]\nmatch = \"navy.*.example\"\nto = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:9: error: \"navy.*.example\": a wildcard may only be the whole first label, as in \
         *.example.org, or * alone"
    );
}

#[test]
fn pattern_with_trailing_dot() {
    let text = format!("{SHORE}[[route]]\nmatch = \"navy.example.\"\nto = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:9: error: \"navy.example.\" is not a valid domain: trailing dot in domain \
         \"navy.example.\"; write it without the final dot"
    );
}

#[test]
fn pattern_with_ip_literal() {
    let text = format!("{SHORE}[[route]]\nmatch = \"ops@[10.0.0.1]\"\nto = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:9: error: \"ops@[10.0.0.1]\" is not a valid address: IP-literal domains such as \
         [10.0.0.1] are not routed; use a domain name"
    );
}

#[test]
fn pattern_with_relay_trick() {
    let text =
        format!("{SHORE}[[route]]\nmatch = \"ops%navy.example@shore.example\"\nto = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:9: error: \"ops%navy.example@shore.example\" is not a valid address: percent hack \
         (user%domain@relay) is refused; this gateway does not relay by local-part routing"
    );
}

#[test]
fn pattern_with_bad_characters() {
    let text = format!("{SHORE}[[route]]\nmatch = \"navy_example.org\"\nto = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:9: error: \"navy_example.org\" is not a valid domain: character '_' is not allowed in \
         domain \"navy_example.org\" (letters, digits, hyphens and dots only)"
    );
}

#[test]
fn empty_pattern() {
    let text = format!("{SHORE}[[route]]\nmatch = \"\"\nto = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:9: error: empty pattern; expected user@domain, domain, *.domain or *"
    );
}

#[test]
fn duplicate_route() {
    let text = format!(
        "{SHORE}[[route]]\nmatch = \"navy.example\"\nto = \"shore\"\n[[route]]\nmatch = \"NAVY.example\"\nto = \"shore\"\n"
    );
    assert_eq!(
        one_error(&text),
        "routes.toml:9:9: error: duplicate route for \"NAVY.example\"; the same pattern is routed at line 6"
    );
}

#[test]
fn conflicting_routes() {
    let text = format!(
        "{SHORE}[[route]]\nmatch = \"Ops@navy.example\"\nto = \"shore\"\n[[route]]\nmatch = \"ops@navy.example\"\nto = \"lan\"\n"
    );
    assert_eq!(
        one_error(&text),
        "routes.toml:9:9: error: conflicting routes for \"ops@navy.example\": line 6 sends it to peer \"shore\", \
         this one to the LAN; keep one"
    );
}

#[test]
fn route_repeats_a_local_domain() {
    let text = format!(
        "[lan]\ndomains = [\"ship.example\"]\n{SHORE}[[route]]\nmatch = \"ship.example\"\nto = \"shore\"\n"
    );
    assert_eq!(
        one_error(&text),
        "routes.toml:8:9: error: route for \"ship.example\" repeats local domain \"ship.example\" ([lan] domains, \
         line 2); mail for local domains is delivered on the LAN"
    );
}

#[test]
fn catch_all_as_local_domain() {
    let text = format!("[lan]\ndomains = [\"ship.example\", \"*\"]\n{SHORE}{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:2:28: error: \"*\" cannot be a local domain: every address would count as local and anyone \
         could send mail through this gateway; list your domains"
    );
}

#[test]
fn address_as_local_domain() {
    let text = format!("[lan]\ndomains = [\"ops@ship.example\"]\n{SHORE}{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:2:12: error: [lan] domains lists domains (example.org or *.example.org), not addresses; \
         send \"ops@ship.example\" somewhere with a [[route]]"
    );
}

#[test]
fn local_domain_listed_twice() {
    let text = format!("[lan]\ndomains = [\"ship.example\", \"Ship.Example\"]\n{SHORE}{ROUTE_ALL}");
    assert_eq!(
        one_error(&text),
        "routes.toml:2:28: error: local domain \"ship.example\" is listed twice; first at line 2"
    );
}

#[test]
fn invalid_relay_network() {
    let text = format!("[lan]\nrelay_networks = [\"10.1.2.0/16\", \"lan\"]\n{SHORE}{ROUTE_ALL}");
    assert_eq!(
        errors(&text),
        [
            "routes.toml:2:19: error: invalid relay network: \"10.1.2.0/16\" has host bits set; did you mean 10.1.0.0/16?",
            "routes.toml:2:34: error: invalid relay network: \"lan\" is not a network; expected CIDR notation \
             such as 10.1.0.0/16 or fd00::/8",
        ]
    );
}

#[test]
fn no_routes_at_all() {
    assert_eq!(
        errors(SHORE),
        [
            "routes.toml:1:1: error: no routes: the table has no [[route]] entries and no [lan] domains, so no \
          mail could go anywhere; add e.g. [[route]] with match = \"*\" and to = \"shore\""
        ]
    );
    assert_eq!(errors("").len(), 1);
}

#[test]
fn unused_peer_is_a_warning_not_an_error() {
    let text = format!(
        "{SHORE}\n[[peer]]\nname = \"spare\"\nnode = \"0.0.1.9\"\nprotocol = \"hmtp\"\n{ROUTE_ALL}"
    );
    let table = RoutingTable::parse("routes.toml", &text).expect("valid with a warning");
    let warnings: Vec<String> = table.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "routes.toml:6:1: warning: peer \"spare\" is never used: no [[route]] sends mail to it\n  |\n\
          6 | [[peer]]\n  | ^^^^^^^^"
        ]
    );
}

#[test]
fn open_relay_network_is_a_warning() {
    let text = format!("[lan]\nrelay_networks = [\"0.0.0.0/0\"]\n{SHORE}{ROUTE_ALL}");
    let table = RoutingTable::parse("routes.toml", &text).expect("valid with a warning");
    let warnings: Vec<String> = table.warnings().iter().map(|d| d.headline()).collect();
    assert_eq!(
        warnings,
        [
            "routes.toml:2:19: warning: relay network 0.0.0.0/0 contains every address: anyone who can reach \
          the gateway may send mail to the HF peers (an open relay)"
        ]
    );
}

#[test]
fn nobody_may_relay_is_a_warning() {
    let text = format!(
        "[lan]\ndomains = [\"ship.example\"]\nrelay_networks = []\nauthenticated_relay = false\n{SHORE}{ROUTE_ALL}"
    );
    let table = RoutingTable::parse("routes.toml", &text).expect("valid with a warning");
    let warnings: Vec<String> = table.warnings().iter().map(|d| d.headline()).collect();
    assert_eq!(
        warnings,
        [
            "routes.toml:1:1: warning: nobody may relay: relay_networks is empty and authenticated_relay is false, \
          so only mail for [lan] domains is accepted"
        ]
    );
}

#[test]
fn every_semantic_error_is_reported_at_once() {
    let text = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.300\"\nprotocol = \"hmtp\"\ncompression = \"lzw12\"\n\
                [[route]]\nmatch = \"*.navy..example\"\nto = \"shore\"\n[[route]]\nmatch = \"*\"\nto = \"ship\"\n";
    assert_eq!(
        errors(text),
        [
            "routes.toml:3:8: error: \"0.0.1.300\" is not a STANAG 5066 node address; expected w.x.y.z with \
             w 0-15 and x, y, z 0-255, e.g. 0.0.1.2",
            "routes.toml:5:15: error: compression \"lzw12\" towards peer \"shore\" needs skywave = true: only \
             another skywave gateway understands a compressed HMTP stream; other peers get plain HMTP",
            "routes.toml:7:9: error: \"*.navy..example\" is not a valid domain: empty label in domain \
             \"navy..example\" (two dots in a row, or a leading dot)",
            "routes.toml:11:6: error: unknown peer \"ship\" in route for \"*\"; known peers: shore (or \"lan\" \
             for delivery on the LAN)",
        ]
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    // A comment with non-ASCII text before the mistake on the same line is not possible in
    // TOML, but a string is: the column of the second key counts characters.
    let text = format!("{SHORE}[[route]]\nmatch = \"ø!\"\nto = \"shore\"\n");
    assert_eq!(
        one_error(&text),
        "routes.toml:6:9: error: \"ø!\" is not a valid domain: \"ø!\" is not a valid \
         internationalised domain name (IDNA2008, UTS #46)"
    );
    let text = "name = \"é\"\nx = 1\n";
    assert_eq!(
        one_error(text),
        "routes.toml:1:1: error: unknown field `name`, expected one of `lan`, `peer`, `route`, `group`"
    );
}

#[test]
fn unreadable_and_non_utf8_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("missing.toml");
    let err = RoutingTable::load(&missing).expect_err("missing file");
    assert!(matches!(err, LoadError::Io { .. }));
    assert!(err.to_string().starts_with(&format!(
        "{}: cannot read the routing table: ",
        missing.display()
    )));

    let bad = dir.path().join("latin1.toml");
    std::fs::write(&bad, b"[[route]]\nmatch = \"caf\xe9.example\"\n").expect("write");
    let err = RoutingTable::load(&bad).expect_err("not UTF-8");
    let headline = err.diagnostics()[0].headline();
    assert_eq!(
        headline,
        format!(
            "{}:2:13: error: the file is not valid UTF-8; TOML files must be UTF-8",
            bad.display()
        )
    );
}

#[test]
fn two_peers_at_the_same_node_through_one_sis_server_is_an_error() {
    // The gateway runs one link per node and SAP on a SIS server: it would not start.
    let text = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
                [[peer]]\nname = \"shore2\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
                [[route]]\nmatch = \"a.example\"\nto = \"shore\"\n[[route]]\nmatch = \"b.example\"\nto = \"shore2\"\n";
    assert_eq!(
        one_error(text),
        "routes.toml:5:1: error: peers \"shore\" (line 1) and \"shore2\" both speak hmtp to node \
         0.0.1.1 through the same SIS server; the gateway runs one link per node there and would \
         not start: give this peer its own node, or remove it"
    );
}

#[test]
fn two_peers_at_the_same_node_through_two_sis_servers_is_a_warning() {
    let text = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
                [[peer]]\nname = \"shore2\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
                sis_server = \"10.0.0.2:5066\"\n\
                [[route]]\nmatch = \"a.example\"\nto = \"shore\"\n[[route]]\nmatch = \"b.example\"\nto = \"shore2\"\n";
    let table = RoutingTable::parse("routes.toml", text).expect("valid with a warning");
    let warnings: Vec<String> = table.warnings().iter().map(|d| d.headline()).collect();
    assert_eq!(
        warnings,
        [
            "routes.toml:5:1: warning: peers \"shore\" (line 1) and \"shore2\" both speak hmtp to node 0.0.1.1: \
          mail for both goes to the same place"
        ]
    );
}

#[test]
fn schedule_mistakes_point_at_the_window() {
    let peer = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n";
    let route = "[[route]]\nmatch = \"a.example\"\nto = \"shore\"\n";
    assert_eq!(
        one_error(&format!(
            "{peer}schedule = [\"06:00-07:00\", \"18:00-25:00\"]\n{route}"
        )),
        "routes.toml:5:28: error: schedule window \"18:00-25:00\": 25:00 is out of range (00:00-24:00)"
    );
    assert_eq!(
        one_error(&format!("{peer}schedule = [\"6-7\"]\n{route}")),
        "routes.toml:5:13: error: schedule window \"6-7\" is not a window; expected \"HH:MM-HH:MM\" \
         (UTC, e.g. \"06:00-07:30\") or \"*:MM-*:MM\" (those minutes of every hour)"
    );
    assert_eq!(
        one_error(&format!("{peer}schedule = []\n{route}")),
        "routes.toml:5:12: error: schedule = [] has no window: its mail would never go; \
         leave schedule out for any time"
    );
    assert_eq!(
        one_error(&format!("{peer}schedule_bypass = \"flash\"\n{route}")),
        "routes.toml:5:19: error: schedule_bypass is for a peer with a schedule; peer \"shore\" has none, \
         so all its mail goes at any time"
    );
    assert_eq!(
        one_error(&format!(
            "{peer}schedule = [\"06:00-07:00\"]\nschedule_bypass = \"urgent\"\n{route}"
        )),
        "routes.toml:6:19: error: invalid priority \"urgent\"; expected an MT-PRIORITY number from -9 to 9, \
         or one of deferred (-4), routine (-2), priority (0), immediate (2), flash (4), override (6)"
    ); // A peer reached only by P_MUL has no sessions to gate.
    let errors = errors(&format!(
        "[[peer]]\nname = \"ship1\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\nemcon = true\n\
         schedule = [\"06:00-07:00\"]\n{route}"
    ));
    assert!(
        errors.iter().any(|e| e.starts_with(
            "routes.toml:6:12: error: peer \"ship1\" is reached only by P_MUL multicast: its schedule goes in its [[group]]"
        )),
        "{errors:#?}"
    );
}

/// The fleet's multicast keeps a schedule of its own: the group's.
const FLEET: &str = "[[peer]]\nname = \"ship1\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
                     [[peer]]\nname = \"ship2\"\nnode = \"0.0.1.2\"\nprotocol = \"hmtp\"\n\
                     [[route]]\nmatch = \"fleet.example\"\nto = \"fleet\"\n\
                     [[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"ship2\"]\n";

#[test]
fn a_group_schedule_reads_back_and_is_explained() {
    let text = format!("{FLEET}schedule = [\"*:00-*:03\"]\nschedule_bypass = \"flash\"\n");
    let table = RoutingTable::parse("routes.toml", &text).expect("valid");
    let group = &table.groups()[0];
    assert_eq!(
        group.schedule.as_ref().map(ToString::to_string).as_deref(),
        Some("*:00-*:03 UTC")
    );
    assert_eq!(group.schedule_bypass.map(|p| p.value()), Some(4));
    let explained = table.explain("ops@fleet.example", None).to_string();
    assert!(
        explained.contains(
            "  radio schedule: *:00-*:03 UTC: multicasts start only in a window, with what fits in \
             the time left; priority 4 (flash) and above goes at any time\n  repair rounds and \
             EMCON repeats: also only in a window (unless the message goes at any time)\n"
        ),
        "{explained}"
    );
    // Without one, nothing is said of it.
    let table = RoutingTable::parse("routes.toml", FLEET).expect("valid");
    assert!(table.groups()[0].schedule.is_none());
    assert!(
        !table
            .explain("ops@fleet.example", None)
            .to_string()
            .contains("radio schedule")
    );
}

#[test]
fn group_schedule_mistakes_point_at_the_key() {
    assert_eq!(
        one_error(&format!("{FLEET}schedule = [\"*:00-*:61\"]\n")),
        "routes.toml:16:13: error: schedule window \"*:00-*:61\": minute 61 is out of range (0-59)"
    );
    assert_eq!(
        one_error(&format!("{FLEET}schedule_bypass = \"flash\"\n")),
        "routes.toml:16:19: error: schedule_bypass is for a group with a schedule; group \"fleet\" has \
         none, so all its multicast mail goes at any time"
    );
    // Over IP nothing shares the air: a schedule there is a mistake, said at the key.
    let ip = "[[peer]]\nname = \"ship1\"\nprotocol = \"pmul\"\nbearer = \"pmul-ip\"\nip = \"10.0.0.1\"\n\
              [[peer]]\nname = \"ship2\"\nprotocol = \"pmul\"\nbearer = \"pmul-ip\"\nip = \"10.0.0.2\"\n\
              [[route]]\nmatch = \"fleet.example\"\nto = \"fleet\"\n\
              [[group]]\nname = \"fleet\"\nbearer = \"pmul-ip\"\naddress = \"239.1.2.3\"\n\
              members = [\"ship1\", \"ship2\"]\nschedule = [\"*:00-*:03\"]\n";
    let got = one_error(ip);
    assert!(
        got.starts_with("routes.toml:19:12: error: group \"fleet\" runs over UDP/IP"),
        "{got}"
    );
}

#[test]
fn a_schedule_reads_back_as_written() {
    let text = "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
                schedule = [\"0600Z-0700Z\", \"*:15-*:25\"]\nschedule_bypass = \"flash\"\n\
                [[route]]\nmatch = \"a.example\"\nto = \"shore\"\n";
    let table = RoutingTable::parse("routes.toml", text).expect("valid");
    let peer = table.peer("shore").expect("the peer");
    assert_eq!(
        peer.schedule.as_ref().map(ToString::to_string).as_deref(),
        Some("06:00-07:00, *:15-*:25 UTC")
    );
    assert_eq!(peer.schedule_bypass.map(|p| p.value()), Some(4));
    let explained = table.explain("ops@a.example", None).to_string();
    assert!(
        explained.contains(
            "  radio schedule: 06:00-07:00, *:15-*:25 UTC: sessions start only in a window, \
             with what fits in the time left; priority 4 (flash) and above goes at any time\n"
        ),
        "{explained}"
    );
}

#[test]
fn hold_above_is_read_and_explained_and_useless_values_are_warned_of() {
    let table = |extra: &str| {
        RoutingTable::parse(
            "routes.toml",
            &format!(
                "[[peer]]\nname = \"shore\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n{extra}\
                 [[route]]\nmatch = \"a.example\"\nto = \"shore\"\n"
            ),
        )
        .expect("valid")
    };
    let t = table("hold_above = \"100 kB\"\n");
    assert_eq!(t.peer("shore").and_then(|p| p.hold_above), Some(100_000));
    assert!(t.warnings().is_empty());
    let explained = t.explain("ops@a.example", None).to_string();
    assert!(
        explained.contains(
            "  held for the operator: messages over 100000 bytes (released with skywave queue release)\n"
        ),
        "{explained}"
    );
    let t = table("size_limit = \"1 MB\"\nhold_above = \"2 MB\"\n");
    let warnings: Vec<String> = t.warnings().iter().map(|d| d.headline()).collect();
    assert_eq!(
        warnings,
        [
            "routes.toml:6:14: warning: hold_above (2000000 bytes) is not below size_limit (1000000 bytes): \
             no message for peer \"shore\" is large enough to be held, as larger ones are refused"
        ]
    );
}

/// A satellite peer with the HF peer behind it: read, explained, and the HF peer counts as used
/// (no "never used" warning) although no route names it.
#[test]
fn a_fallback_is_read_and_explained() {
    let text = "[[peer]]\nname = \"shore-sat\"\nprotocol = \"smtp\"\ntcp_address = \"mail.shore.example:25\"\n\
                fallback = \"shore-hf\"\nfallback_after = \"45m\"\n\
                [[peer]]\nname = \"shore-hf\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n\
                fallback = \"shore-cftp\"\n\
                [[peer]]\nname = \"shore-cftp\"\nnode = \"0.0.1.1\"\nprotocol = \"cftp\"\n\
                [[route]]\nmatch = \"shore.example\"\nto = \"shore-sat\"\n";
    let table = RoutingTable::parse("routes.toml", text).expect("valid");
    let fb = |name: &str| table.peer(name).and_then(|p| p.fallback.clone());
    // Over TCP/IP a silent peer is probed every minute unless it says otherwise; over
    // STANAG 5066 never.
    assert_eq!(
        fb("shore-sat").map(|f| (f.peer, f.after, f.probe_every)),
        Some(("shore-hf".to_owned(), 2700, 60))
    );
    // fallback_after left out: half an hour.
    assert_eq!(
        fb("shore-hf").map(|f| (f.peer, f.after, f.probe_every)),
        Some(("shore-cftp".to_owned(), 1800, 0))
    );
    assert!(table.warnings().is_empty(), "{:?}", table.warnings());
    let explained = table.explain("ops@shore.example", None).to_string();
    assert!(
        explained.contains(
            "  fallback: mail still waiting 45 min after its arrival goes to peer \"shore-hf\" \
             (if within that peer's size limit and not held for its size)\n  \
             while \"shore-sat\" has answered none of this gateway's sessions for 45 min, mail \
             it was tried for goes at once; what went while it was silent comes back when it \
             answers again\n  \
             while it is silent and such mail waits to come back, \"shore-sat\" is probed every \
             1 min (a connection, its greeting, QUIT)\n"
        ),
        "{explained}"
    );
    for (probe, every) in [
        ("\"5m\"", Some(300)),
        ("0", None),
        ("\"0\"", None),
        ("\"0s\"", None),
    ] {
        let table = RoutingTable::parse(
            "routes.toml",
            &text.replace(
                "fallback_after = \"45m\"\n",
                &format!("fallback_after = \"45m\"\nprobe_every = {probe}\n"),
            ),
        )
        .expect("valid");
        let fb = table.peer("shore-sat").and_then(|p| p.fallback.clone());
        assert_eq!(fb.map(|f| f.probe_every), Some(every.unwrap_or(0)));
        let explained = table.explain("ops@shore.example", None).to_string();
        assert_eq!(
            explained.contains("is probed every 5 min"),
            every.is_some(),
            "{explained}"
        );
        assert!(!explained.contains("is probed every 1 min"), "{explained}");
    }
}

#[test]
fn fallback_mistakes_point_at_the_key() {
    let peer = |name: &str, extra: &str| {
        format!("[[peer]]\nname = \"{name}\"\nnode = \"0.0.1.1\"\nprotocol = \"hmtp\"\n{extra}")
    };
    let route = "[[route]]\nmatch = \"a.example\"\nto = \"a\"\n";
    assert_eq!(
        one_error(&format!("{}{route}", peer("a", "fallback = \"b\"\n"))),
        "routes.toml:5:12: error: fallback \"b\" is not a peer; expected the name of a [[peer]] \
         that takes the mail of \"a\" when it has waited too long"
    );
    assert_eq!(
        one_error(&format!("{}{route}", peer("a", "fallback = \"a\"\n"))),
        "routes.toml:5:12: error: peer \"a\" cannot be its own fallback"
    );
    let errs = errors(&format!(
        "{}{}{route}",
        peer("a", "fallback = \"b\"\n"),
        peer("b", "protocol = \"cftp\"\n").replace("protocol = \"hmtp\"\n", "")
            + "fallback = \"a\"\n"
    ));
    assert!(
        errs.iter().any(|e| e
            == "routes.toml:5:12: error: fallback \"b\" leads back to \"a\": mail would go round the fallbacks for ever"),
        "{errs:#?}"
    );
    // a -> b -> c -> b: the loop is told at b and c, and at a as what it leads into.
    let errs = errors(&format!(
        "{}{}{}{route}",
        peer("a", "fallback = \"b\"\n"),
        peer("b", "fallback = \"c\"\n").replace("0.0.1.1", "0.0.1.2"),
        peer("c", "fallback = \"b\"\n").replace("0.0.1.1", "0.0.1.3")
    ));
    assert!(
        errs.iter().any(|e| e
            == "routes.toml:5:12: error: fallback \"b\" leads into a loop of fallbacks that never ends"),
        "{errs:#?}"
    );
    assert!(
        errs.iter().any(|e| e.ends_with(
            "error: fallback \"c\" leads back to \"b\": mail would go round the fallbacks for ever"
        )),
        "{errs:#?}"
    );
    assert_eq!(
        one_error(&format!(
            "{}{route}",
            peer("a", "fallback_after = \"30m\"\n")
        )),
        "routes.toml:5:18: error: fallback_after without fallback: say which peer takes the mail of \
         peer \"a\" that waited too long (fallback = \"name\")"
    );
    let tcp = |extra: &str| {
        format!(
            "[[peer]]\nname = \"a\"\nprotocol = \"smtp\"\ntcp_address = \"192.0.2.1:25\"\n{extra}{}{route}",
            peer("b", "").replace("0.0.1.1", "0.0.1.2")
        )
    };
    assert_eq!(
        one_error(&tcp("probe_every = \"1m\"\n")),
        "routes.toml:5:15: error: probe_every without fallback: say which peer takes the mail of \
         peer \"a\" that waited too long (fallback = \"name\")"
    );
    assert_eq!(
        one_error(&tcp("fallback = \"b\"\nprobe_every = \"often\"\n")),
        "routes.toml:6:15: error: probe_every is not a duration; expected seconds, or a number \
         with a unit s, m, h or d, such as \"30m\", or 0 for none"
    );
    assert_eq!(
        one_error(&format!(
            "{}{}{route}",
            peer("a", "fallback = \"b\"\nprobe_every = 0\n"),
            peer("b", "").replace("0.0.1.1", "0.0.1.2")
        )),
        "routes.toml:6:15: error: probe_every is for a peer over TCP/IP (tcp_address); peer \"a\" \
         is not, and a probe over HF would cost airtime: its mail comes back when a session of its \
         own is answered"
    );
    assert_eq!(
        one_error(&format!(
            "{}{}{route}",
            peer("a", "fallback = \"b\"\nfallback_after = \"soon\"\n"),
            peer("b", "").replace("0.0.1.1", "0.0.1.2")
        )),
        "routes.toml:6:18: error: fallback_after is not a duration; expected seconds, or a number \
         with a unit s, m, h or d, such as \"30m\""
    );
    // A wait shorter than the gap between the peer's windows is a warning at fallback_after.
    let scheduled = |after: &str| {
        let text = format!(
            "{}{}{route}",
            peer(
                "a",
                &format!(
                    "schedule = [\"06:00-07:00\", \"18:00-18:30\"]\nfallback = \"b\"\n\
                     fallback_after = \"{after}\"\n"
                )
            ),
            peer("b", "").replace("0.0.1.1", "0.0.1.2")
        );
        let table = RoutingTable::parse("routes.toml", &text).expect("valid with a warning");
        table
            .warnings()
            .iter()
            .map(|d| d.headline())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        scheduled("2h"),
        [
            "routes.toml:7:18: warning: peer \"a\"'s windows are up to 690 min apart, longer \
             than its fallback_after (2 h): mail that comes as a window closes goes to \"b\" \
             before \"a\" is tried; make fallback_after longer than the gap if its mail should \
             wait for the next window"
        ]
    );
    assert!(scheduled("12h").is_empty());
}

/// `strip_headers`: the default list, or names and prefixes; what must stay, or is not a
/// name, is an error at the key; explained.
#[test]
fn strip_headers_is_read_checked_and_explained() {
    let table = |value: &str| {
        RoutingTable::parse(
            "routes.toml",
            &format!(
                "[[peer]]\nname = \"ship\"\nnode = \"0.0.2.1\"\nprotocol = \"hmtp\"\n\
                 strip_headers = {value}\n[[route]]\nmatch = \"ship.example\"\nto = \"ship\"\n"
            ),
        )
    };
    let names = |value: &str| {
        table(value)
            .expect("valid")
            .peer("ship")
            .map(|p| {
                p.strip_headers
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        names("true"),
        [
            "dkim-signature",
            "domainkey-signature",
            "arc-seal",
            "arc-message-signature",
            "arc-authentication-results",
            "authentication-results",
            "received-spf",
            "x-*"
        ]
    );
    assert!(names("false").is_empty());
    assert_eq!(names("[\"List-*\", \"X-Spam-*\"]"), ["list-*", "x-spam-*"]);
    let explained = table("[\"List-*\"]")
        .expect("valid")
        .explain("ops@ship.example", None)
        .to_string();
    assert!(
        explained.contains(
            "  header fields left out on the air: list-* (the spool keeps each message whole)\n"
        ),
        "{explained}"
    );
    let Err(e) = table("[\"X-*\", \"Received\"]") else {
        panic!("Received may not be stripped");
    };
    assert_eq!(
        e.to_string().lines().next().unwrap_or_default(),
        "routes.toml:5:17: error: strip_headers: \"Received\" would strip Received, which must \
         stay (the trace, what a reader or MIME needs, or what skywave reads)"
    );
    let Err(e) = table("\"yes\"") else {
        panic!("not a list");
    };
    assert!(
        e.to_string()
            .contains("expected true (the default list), false, or a list of header field names"),
        "{e}"
    );
    // A group strips what its P_MUL carries; a peer reached only by P_MUL is told to set it
    // there.
    let fleet = "[[peer]]\nname = \"ship1\"\nnode = \"0.0.2.1\"\nprotocol = \"hmtp\"\n\
                 [[peer]]\nname = \"ship2\"\nnode = \"0.0.2.2\"\nprotocol = \"hmtp\"\n\
                 [[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"ship2\"]\n\
                 strip_headers = [\"X-*\"]\n\
                 [[route]]\nmatch = \"fleet.example\"\nto = \"fleet\"\n";
    let t = RoutingTable::parse("routes.toml", fleet).expect("valid");
    let g = t
        .groups()
        .first()
        .map(|g| g.strip_headers.clone())
        .unwrap_or_default();
    assert_eq!(
        g.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["x-*"]
    );
    assert!(
        t.explain("notices@fleet.example", None)
            .to_string()
            .contains(
                "  header fields left out on the air: x-* (the spool keeps each message whole)\n"
            )
    );
    let pmul_only = "[[peer]]\nname = \"sat\"\nprotocol = \"pmul\"\nbearer = \"pmul-ip\"\nip = \"10.1.0.2\"\n\
                     strip_headers = true\n[[route]]\nmatch = \"x.example\"\nto = \"sat\"\n";
    let Err(e) = RoutingTable::parse("routes.toml", pmul_only) else {
        panic!("a P_MUL-only peer has no sessions to strip");
    };
    assert!(e.to_string().contains("set it on its [[group]]"), "{e}");
    let Err(e) = RoutingTable::parse(
        "routes.toml",
        &pmul_only.replace("strip_headers = true", "text_only = true"),
    ) else {
        panic!("a P_MUL-only peer has no sessions to cut down");
    };
    assert!(
        e.to_string()
            .contains("error: text_only is for the sessions of hmtp, cftp and smtp peers"),
        "{e}"
    );
    // text_only, on a peer and on a group: read and explained.
    let both = fleet
        .replace("strip_headers = [\"X-*\"]\n", "text_only = true\n")
        .replace(
            "protocol = \"hmtp\"\n[[group]]",
            "protocol = \"hmtp\"\ntext_only = true\n[[group]]",
        )
        + "[[route]]\nmatch = \"ship2.example\"\nto = \"ship2\"\n";
    let t = RoutingTable::parse("routes.toml", &both).expect("valid");
    assert!(t.peer("ship2").is_some_and(|p| p.text_only));
    assert!(t.peer("ship1").is_some_and(|p| !p.text_only));
    assert!(t.groups().first().is_some_and(|g| g.text_only));
    let said = "  text only: of a multipart/alternative, only its text/plain part goes (the HTML \
                twin stays ashore)\n";
    assert!(
        t.explain("notices@fleet.example", None)
            .to_string()
            .contains(said)
    );
    assert!(
        t.explain("ops@ship2.example", None)
            .to_string()
            .contains(said)
    );
}

#[test]
fn shrink_images_is_read_checked_and_explained() {
    use skywave_smtp::shrink::{DEFAULT_QUALITY, ImageLimit};
    let fleet = "[[peer]]\nname = \"ship1\"\nnode = \"0.0.2.1\"\nprotocol = \"hmtp\"\n\
                 [[peer]]\nname = \"ship2\"\nnode = \"0.0.2.2\"\nprotocol = \"hmtp\"\n\
                 shrink_images = 1024\nimage_quality = 75\n\
                 [[group]]\nname = \"fleet\"\nnode = \"16.0.9.9\"\nmembers = [\"ship1\", \"ship2\"]\n\
                 shrink_images = 800\n\
                 [[route]]\nmatch = \"fleet.example\"\nto = \"fleet\"\n\
                 [[route]]\nmatch = \"ship2.example\"\nto = \"ship2\"\n";
    // On a peer and on a group: read (the quality 60 unless said) and explained.
    let t = RoutingTable::parse("routes.toml", fleet).expect("valid");
    assert_eq!(
        t.peer("ship2").and_then(|p| p.shrink_images),
        Some(ImageLimit::new(1024, 75).unwrap())
    );
    assert_eq!(t.peer("ship1").and_then(|p| p.shrink_images), None);
    let group = t.groups().first().and_then(|g| g.shrink_images).unwrap();
    assert_eq!((group.max_side(), group.quality()), (800, DEFAULT_QUALITY));
    assert_eq!(DEFAULT_QUALITY, 60);
    let explained = t.explain("ops@ship2.example", None).to_string();
    assert!(
        explained.contains(
            "  images over 1024 px on their longer side scaled down to fit on the air (JPEG \
             quality 75; the spool keeps each message whole)\n"
        ),
        "{explained}"
    );
    let explained = t.explain("notices@fleet.example", None).to_string();
    assert!(
        explained.contains(
            "  images over 800 px on their longer side scaled down to fit on the air (JPEG \
             quality 60; the spool keeps each message whole)\n"
        ),
        "{explained}"
    );
    assert!(
        !t.explain("ops@ship1.example", None)
            .to_string()
            .contains("images over"),
    );

    // Out of range, each at its key (both reported, not only the first).
    assert_eq!(
        errors(&fleet.replace(
            "shrink_images = 1024\nimage_quality = 75",
            "shrink_images = 10\nimage_quality = 5"
        )),
        [
            "routes.toml:9:17: error: shrink_images: 10 pixels is not a longest side images can \
             be made to fit; expected 64-16384",
            "routes.toml:10:17: error: image_quality: JPEG quality 5 is out of range; expected \
             10-100 (60 by default)",
        ]
    );
    assert_eq!(
        errors(&fleet.replace("shrink_images = 800", "shrink_images = 20000")),
        [
            "routes.toml:15:17: error: shrink_images: 20000 pixels is not a longest side images \
               can be made to fit; expected 64-16384"
        ]
    );
    assert_eq!(
        errors(&fleet.replace("image_quality = 75", "image_quality = 101")),
        [
            "routes.toml:10:17: error: image_quality: JPEG quality 101 is out of range; expected \
               10-100 (60 by default)"
        ]
    );
    assert_eq!(
        errors(&fleet.replace(
            "shrink_images = 1024\nimage_quality = 75",
            "shrink_images = -1024\nimage_quality = -60"
        )),
        [
            "routes.toml:9:17: error: shrink_images: -1024 pixels is not a longest side images \
             can be made to fit; expected 64-16384",
            "routes.toml:10:17: error: image_quality: JPEG quality -60 is out of range; \
             expected 10-100 (60 by default)",
        ]
    );
    // A number it must be: the TOML type is checked first.
    let e = errors(&fleet.replace("shrink_images = 800", "shrink_images = \"800px\""));
    assert!(
        e.len() == 1 && e[0].starts_with("routes.toml:15:17: error: invalid type: string"),
        "{e:?}"
    );
    let e = errors(&fleet.replace("image_quality = 75", "image_quality = 75.5"));
    assert!(
        e.len() == 1 && e[0].starts_with("routes.toml:10:17: error: invalid type: floating point"),
        "{e:?}"
    );

    // image_quality alone, on a peer or on a group, says what it needs.
    let needs = "error: image_quality needs shrink_images: it is the JPEG quality of the images \
                 shrink_images = N scales down to N pixels on their longer side";
    assert_eq!(
        errors(&fleet.replace("shrink_images = 1024\n", "")),
        [format!("routes.toml:9:17: {needs}")]
    );
    assert_eq!(
        errors(&fleet.replace("shrink_images = 800", "image_quality = 80")),
        [format!("routes.toml:15:17: {needs}")]
    );

    // A peer reached only by P_MUL has no sessions to shrink for: its group does it.
    let pmul_only = "[[peer]]\nname = \"sat\"\nprotocol = \"pmul\"\nbearer = \"pmul-ip\"\nip = \"10.1.0.2\"\n\
                     shrink_images = 1024\nimage_quality = 60\n\
                     [[route]]\nmatch = \"x.example\"\nto = \"sat\"\n";
    let Err(e) = RoutingTable::parse("routes.toml", pmul_only) else {
        panic!("a P_MUL-only peer has no sessions to shrink images for");
    };
    let e = e.to_string();
    for key in ["shrink_images", "image_quality"] {
        assert!(
            e.contains(&format!(
                "error: {key} is for the sessions of hmtp, cftp and smtp peers; peer \"sat\" is \
                 reached only by P_MUL: set it on its [[group]]"
            )),
            "{e}"
        );
    }
}
