//! Benchmark scenarios shared by `skywave-bench` and the tests: complete stacks (SMTP over TCP/IP
//! over HF, HMTP and CFTP over STANAG 5066) in virtual time over the emulator.
//!
//! - [`model`]: scenarios, conditions, workloads and run results.

pub mod model;
