//! Tables of a sweep: Markdown for people, CSV for tools. One row per scenario, TCP profile and
//! condition, with the columns `scenario, tcp_profile, channel, snr_db, rate_bps,
//! message_bytes, messages, seconds (mean), seconds_spread, throughput_bps, transmissions,
//! bytes_on_air, retransmissions, tcp_resent, tcp_resent_bytes, delivered`; `interleaver`,
//! `mss` and `window` are appended only when the sweep varies them. `retransmissions` counts
//! D_PDUs the 5066 ARQ resent (on the raw modem, which has no ARQ: TCP segments resent);
//! `tcp_resent` and `tcp_resent_bytes` count the segments and payload bytes the TCP hosts
//! resent (empty for the HF-native stacks); `tcp_profile` is empty for them too. `delivered` reads `delivered/expected`, summed over the seeds; a point
//! that could not run shows its error there and leaves the figures empty.
//!
//! Sits between [`crate::sweep`] and the CLI's output.

use std::fmt::Write as _;

use crate::sweep::Row;

/// The fixed column names, in order.
pub const COLUMNS: [&str; 16] = [
    "scenario",
    "tcp_profile",
    "channel",
    "snr_db",
    "rate_bps",
    "message_bytes",
    "messages",
    "seconds (mean)",
    "seconds_spread",
    "throughput_bps",
    "transmissions",
    "bytes_on_air",
    "retransmissions",
    "tcp_resent",
    "tcp_resent_bytes",
    "delivered",
];

/// Which optional columns the rows need.
#[derive(Debug, Clone, Copy)]
struct Extra {
    interleaver: bool,
    tcp: bool,
}

fn extra(rows: &[Row]) -> Extra {
    let first = rows.first();
    Extra {
        interleaver: rows
            .iter()
            .any(|r| first.is_some_and(|f| f.point.interleaver != r.point.interleaver)),
        // Profiles differ in MSS and window by design; the columns show overrides.
        tcp: rows.iter().any(|r| {
            rows.iter().any(|o| {
                r.point.scenario.is_tcp()
                    && o.point.scenario.is_tcp()
                    && r.point.tcp.profile == o.point.tcp.profile
                    && (r.point.tcp.mss, r.point.tcp.window)
                        != (o.point.tcp.mss, o.point.tcp.window)
            })
        }),
    }
}

fn header(extra: Extra) -> Vec<&'static str> {
    let mut h = COLUMNS.to_vec();
    if extra.interleaver {
        h.push("interleaver");
    }
    if extra.tcp {
        h.extend(["mss", "window"]);
    }
    h
}

/// The cells of one row (numbers formatted for reading; empty figures for a failed point).
fn cells(row: &Row, extra: Extra) -> Vec<String> {
    let p = &row.point;
    let tcp = p.scenario.is_tcp();
    let mut c = vec![
        p.scenario.name().to_string(),
        profile_cell(row),
        p.channel.clone(),
        format_num(p.snr_db),
        p.rate_bps.to_string(),
        p.size.to_string(),
        p.count.to_string(),
    ];
    match &row.stats {
        Ok(s) => c.extend([
            format!("{:.1}", s.seconds_mean),
            format!("{:.1}", s.seconds_spread),
            format!("{:.1}", s.throughput_bps),
            format_num(s.transmissions),
            format_num(s.bytes_on_air),
            format_num(s.retransmissions),
            tcp_cell(tcp, s.tcp_resent_segments),
            tcp_cell(tcp, s.tcp_resent_bytes),
            format!("{}/{}", s.delivered, s.expected),
        ]),
        Err(e) => {
            c.extend(std::iter::repeat_n(String::new(), 8));
            c.push(format!("error: {e}"));
        }
    }
    if extra.interleaver {
        c.push(p.interleaver.clone());
    }
    if extra.tcp {
        if p.scenario.is_tcp() {
            c.extend([p.tcp.mss.to_string(), p.tcp.window.to_string()]);
        } else {
            c.extend([String::new(), String::new()]);
        }
    }
    c
}

/// The TCP profile of a TCP scenario's row, empty otherwise.
fn profile_cell(row: &Row) -> String {
    if row.point.scenario.is_tcp() {
        row.point.tcp.profile_name().to_string()
    } else {
        String::new()
    }
}

/// A TCP figure for a TCP scenario, empty otherwise.
fn tcp_cell(tcp: bool, x: f64) -> String {
    if tcp { format_num(x) } else { String::new() }
}

/// A number with at most one decimal, and none when it is whole.
fn format_num(x: f64) -> String {
    // Adding 0.0 turns -0.0 into 0.0.
    let x = x + 0.0;
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The rows as a Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let extra = extra(rows);
    let h = header(extra);
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", h.join(" | "));
    let align: Vec<&str> = h
        .iter()
        .map(|c| match *c {
            "scenario" | "tcp_profile" | "channel" | "delivered" | "interleaver" => "---",
            _ => "---:",
        })
        .collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
    for row in rows {
        let cells: Vec<String> = cells(row, extra)
            .into_iter()
            .map(|c| {
                if c.is_empty() {
                    "—".into()
                } else {
                    c.replace('|', "\\|")
                }
            })
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    out
}

/// The rows as CSV (RFC 4180 quoting), with the header line.
pub fn csv(rows: &[Row]) -> String {
    let extra = extra(rows);
    let mut out = String::new();
    let h: Vec<String> = header(extra).into_iter().map(csv_field).collect();
    let _ = writeln!(out, "{}", h.join(","));
    for row in rows {
        let p = &row.point;
        // Full precision in the CSV; the Markdown rounds for reading.
        let tcp = p.scenario.is_tcp();
        let mut c = vec![
            p.scenario.name().to_string(),
            profile_cell(row),
            p.channel.clone(),
            p.snr_db.to_string(),
            p.rate_bps.to_string(),
            p.size.to_string(),
            p.count.to_string(),
        ];
        match &row.stats {
            Ok(s) => c.extend([
                format!("{:.3}", s.seconds_mean),
                format!("{:.3}", s.seconds_spread),
                format!("{:.3}", s.throughput_bps),
                format_num(s.transmissions),
                format_num(s.bytes_on_air),
                format_num(s.retransmissions),
                tcp_cell(tcp, s.tcp_resent_segments),
                tcp_cell(tcp, s.tcp_resent_bytes),
                format!("{}/{}", s.delivered, s.expected),
            ]),
            Err(e) => {
                c.extend(std::iter::repeat_n(String::new(), 8));
                c.push(format!("error: {e}"));
            }
        }
        let tail = cells(row, extra);
        c.extend(tail.into_iter().skip(COLUMNS.len()));
        let c: Vec<String> = c.iter().map(csv_field).collect();
        let _ = writeln!(out, "{}", c.join(","));
    }
    out
}

fn csv_field(f: impl AsRef<str>) -> String {
    let f = f.as_ref();
    if f.contains([',', '"', '\n', '\r']) || f.starts_with(' ') || f.ends_with(' ') {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Scenario;
    use crate::sweep::{Stats, SweepSpec};

    fn rows() -> Vec<Row> {
        let spec = SweepSpec::quick();
        let mut points = spec.points();
        points.retain(|p| p.size == 386);
        points
            .into_iter()
            .map(|point| {
                let stats = if point.scenario.is_tcp() {
                    Err("scenario x not built yet, really".to_string())
                } else {
                    Ok(Stats {
                        runs: 2,
                        seconds_mean: 12.34,
                        seconds_spread: 0.5,
                        throughput_bps: 250.0,
                        transmissions: 3.0,
                        bytes_on_air: 420.5,
                        retransmissions: 0.0,
                        tcp_resent_segments: 0.0,
                        tcp_resent_bytes: 0.0,
                        delivered: 2,
                        expected: 2,
                    })
                };
                Row { point, stats }
            })
            .collect()
    }

    #[test]
    fn markdown_has_every_column_and_row() {
        let md = markdown(&rows());
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 2 + Scenario::ALL.len());
        assert!(lines[0].starts_with("| scenario | tcp_profile | channel | snr_db | rate_bps | message_bytes | messages | seconds (mean) | seconds_spread | throughput_bps | transmissions | bytes_on_air | retransmissions | tcp_resent | tcp_resent_bytes | delivered |"));
        assert!(md.contains("| hmtp-5066-deflate | — | awgn | 30 | 1200 | 386 | 1 | 12.3 | 0.5 | 250.0 | 3 | 420.5 | 0 | — | — | 2/2 |"), "{md}");
        assert!(md.contains("error: scenario x not built yet, really"));
    }

    #[test]
    fn csv_quotes_and_keeps_columns() {
        let text = csv(&rows());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "scenario,tcp_profile,channel,snr_db,rate_bps,message_bytes,messages,seconds (mean),seconds_spread,throughput_bps,transmissions,bytes_on_air,retransmissions,tcp_resent,tcp_resent_bytes,delivered"
        );
        assert!(
            lines.contains(&"cftp-5066,,awgn,30,1200,386,1,12.340,0.500,250.000,3,420.5,0,,,2/2")
        );
        assert!(lines.contains(
            &"smtp-tcp-modem,jnos-1998,awgn,30,1200,386,1,,,,,,,,,\"error: scenario x not built yet, really\""
        ));
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn varied_settings_get_their_columns() {
        let mut r = rows();
        r[0].point.interleaver = "long".into();
        let mut wide = r[0].clone();
        wide.point.tcp.window = 3072;
        r.insert(0, wide);
        let md = markdown(&r);
        assert!(
            md.lines()
                .next()
                .unwrap()
                .ends_with("| interleaver | mss | window |")
        );
        let text = csv(&r);
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with(",interleaver,mss,window")
        );
        assert!(text.lines().nth(1).unwrap().ends_with(",long,216,3072"));
    }
}
