//! Benchmark scenarios shared by `skywave-bench` and the tests: complete stacks (SMTP over TCP/IP
//! over HF, HMTP and CFTP over STANAG 5066) in virtual time over the emulator.
//!
//! - [`model`]: scenarios, conditions, workloads and run results.
//! - [`workload`]: the Isode- and NTIA-shaped workloads, from the compress crate's corpus.
//! - [`stack`]: the two-node emulated STANAG 5066 link, SIS clients and the paused runtime.
//! - [`hmtp5066`], [`cftp5066`]: the HF-native scenarios.
//! - [`tcp`]: the SMTP-over-TCP/IP baselines (smoltcp over the raw modem or the 5066 IP client).
//! - [`udp5066`]: UDP over the 5066 IP client at the link's rate (the Isode IP table).
//! - [`runner`]: [`run`] one scenario under one condition with one workload.
//! - [`sweep`]: every combination of a sweep, mean and spread over seeds.
//! - [`report`], [`plot`]: Markdown and CSV tables, SVG figures.
//! - [`calibrate`]: the published conditions re-run, with ratios and the goal lines.

pub mod calibrate;
pub mod cftp5066;
pub mod fleet;
pub mod hmtp5066;
pub mod model;
pub mod modem_survey;
pub mod plot;
pub mod report;
pub mod runner;
pub mod stack;
pub mod sweep;
pub mod tcp;
pub mod udp5066;
pub mod workload;

pub use runner::{BenchError, RunDetail, run, run_detailed};
