//! Helpers shared by the routing-table tests.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use skywave_route::{Destination, RoutingTable, Severity};

/// The headlines of the errors of a table that must not load.
pub fn errors(text: &str) -> Vec<String> {
    match RoutingTable::parse("routes.toml", text) {
        Ok(_) => panic!("expected errors in:\n{text}"),
        Err(e) => e
            .diagnostics()
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.headline())
            .collect(),
    }
}

/// The spool targets of some recipients, as the intake records them.
pub fn targets(t: &RoutingTable, rcpts: &[&str]) -> Vec<String> {
    rcpts
        .iter()
        .map(|r| match t.lookup(r).unwrap().destination {
            Destination::Peer(p) => p.name.clone(),
            Destination::Group(g) => g.name.clone(),
            Destination::Lan => "lan".to_owned(),
        })
        .collect()
}
