//! Shared helpers of the `lan_*` end-to-end tests: start the real `skywave run` binary with a
//! temporary configuration, read the addresses it bound from its stdout, run Python and swaks
//! clients with time limits, and wait for files to appear. Every child is killed on drop.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// Longest any single step of a test may take.
pub const STEP: Duration = Duration::from_secs(30);

/// The `skywave` binary beside this test's executable (`scripts/test.sh` builds it first).
pub fn skywave() -> PathBuf {
    skywave_e2e::bin("skywave")
}

/// A routing table for the tests: ship.test is ours (LAN), shore.test goes to the peer "shore".
pub fn routes(relay_networks: &str) -> String {
    format!(
        r#"[lan]
domains = ["ship.test"]
relay_networks = [{relay_networks}]
authenticated_relay = true

[[peer]]
name = "shore"
node = "0.0.1.1"
protocol = "hmtp"

[[route]]
match = "shore.test"
to = "shore"
"#
    )
}

/// A running gateway.
pub struct Gateway {
    pub child: Child,
    pub smtp: SocketAddr,
    pub metrics: Option<SocketAddr>,
    pub dir: PathBuf,
    pub config: PathBuf,
}

impl Gateway {
    /// Writes `routes.toml` and `skywave.toml` (with `extra` appended: further tables) into
    /// `dir`, starts `skywave run`, and waits for it to print its addresses.
    pub async fn start(dir: &Path, routes_text: &str, extra: &str) -> Gateway {
        std::fs::write(dir.join("routes.toml"), routes_text).expect("write routes");
        let config = dir.join("skywave.toml");
        std::fs::write(
            &config,
            format!(
                "hostname = \"gw.ship.test\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n\
                 [smtp]\nlisten = \"127.0.0.1:0\"\nshutdown_grace = \"5s\"\n\
                 [metrics]\nlisten = \"127.0.0.1:0\"\n{extra}"
            ),
        )
        .expect("write config");
        let stderr = std::fs::File::create(dir.join("skywave.log")).expect("log file");
        let mut command = Command::new(skywave());
        command
            .args(["--log", "info,skywave_gateway=debug", "run", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stderr(Stdio::from(stderr));
        let g = skywave_e2e::start_gateway(command, STEP)
            .await
            .unwrap_or_else(|e| {
                let log = std::fs::read_to_string(dir.join("skywave.log")).unwrap_or_default();
                panic!("skywave {e}; its log:\n{log}")
            });
        Gateway {
            child: g.child,
            smtp: g.smtp.parse().expect("smtp address"),
            metrics: g.metrics.map(|a| a.parse().expect("metrics address")),
            dir: dir.to_path_buf(),
            config,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("skywave.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    /// Sends a signal with kill(1).
    pub async fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(status.success());
    }

    /// SIGTERM, then the exit code (within the time limit).
    pub async fn stop(mut self) -> i32 {
        self.signal("TERM").await;
        let status = tokio::time::timeout(STEP, self.child.wait())
            .await
            .expect("skywave did not stop in time")
            .expect("wait");
        status.code().unwrap_or(-1)
    }
}

/// Runs a program with arguments and a time limit; returns (exit code, stdout, stderr).
pub async fn run(program: &str, args: &[&str]) -> (i32, String, String) {
    let out = tokio::time::timeout(
        STEP,
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{program} {args:?} took too long"))
    .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a Python script (`python3 -c`) with arguments.
/// `skywave status --config CONFIG`: the exit code, stdout and stderr.
pub async fn skywave_status(config: &Path) -> (i32, String, String) {
    run(
        skywave().to_str().unwrap(),
        &["status", "--config", config.to_str().unwrap()],
    )
    .await
}

pub async fn python(script: &str, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["-c", script];
    all.extend_from_slice(args);
    run("python3", &all).await
}

/// Whether swaks is installed (scripts/test.sh installs it); when it is not, a SKIPPED note, or
/// a failure under `SKYWAVE_REQUIRE_TOOLS=1` (see `skywave_emu::missing`).
pub fn have_swaks(check: &str) -> bool {
    skywave_emu::missing::have_tool("swaks", check)
}

/// Files in `dir`, waiting until there are at least `n` (or the time limit).
pub async fn wait_files(dir: &Path, n: usize) -> Vec<PathBuf> {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_none_or(|x| x != "tmp"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        if files.len() >= n || tokio::time::Instant::now() > deadline {
            return files;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A raw SMTP client for exact command bytes: sends each line and returns each reply's text.
pub struct RawClient {
    stream: BufReader<TcpStream>,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> (RawClient, String) {
        let stream = tokio::time::timeout(STEP, TcpStream::connect(addr))
            .await
            .expect("connect in time")
            .expect("connect");
        let mut c = RawClient {
            stream: BufReader::new(stream),
        };
        let greeting = c.reply().await;
        (c, greeting)
    }

    /// Reads one (possibly multi-line) reply.
    pub async fn reply(&mut self) -> String {
        let mut text = String::new();
        tokio::time::timeout(STEP, async {
            loop {
                let mut line = String::new();
                let n = self.stream.read_line(&mut line).await.expect("read reply");
                assert!(n > 0, "connection closed; got so far: {text}");
                text.push_str(&line);
                if line.len() < 4 || line.as_bytes()[3] != b'-' {
                    break;
                }
            }
        })
        .await
        .expect("reply in time");
        text
    }

    pub async fn cmd(&mut self, line: &str) -> String {
        self.stream
            .get_mut()
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .expect("write");
        self.reply().await
    }

    /// Reads until the server closes (for tests of shutdown).
    pub async fn rest(&mut self) -> String {
        let mut s = String::new();
        let _ = tokio::time::timeout(STEP, self.stream.read_to_string(&mut s)).await;
        s
    }
}

/// An HTTP GET of the metrics page.
pub async fn metrics(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut body = String::new();
    tokio::time::timeout(STEP, s.read_to_string(&mut body))
        .await
        .expect("metrics in time")
        .expect("read metrics");
    body
}
