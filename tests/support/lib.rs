//! Shared helpers for skywave's end-to-end tests (tests/*.rs): locating the workspace's binaries,
//! and reading a command's output in part.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of one of the workspace's binaries (`skywave`, `skywave-emu`, `skywave-bench`) as built
/// for this test run.
///
/// `cargo test --workspace` does not necessarily build other packages' binaries, so the first call
/// builds them all with the same cargo, profile and target directory as the running test, with the
/// very command `scripts/test.sh` runs before the tests (same feature unification), so that there
/// it is a no-op. Panics with the reason when the build fails: a test cannot go on without it.
pub fn bin(name: &str) -> PathBuf {
    let profile_dir = profile_dir();
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| build_all(&profile_dir));
    let bin = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} missing after `cargo build --workspace --bins`",
        bin.display()
    );
    bin
}

/// `target/<profile>`, from this test's own executable in `target/<profile>/deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test executable path: {e}"));
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("{} is not in target/<profile>/deps", exe.display()))
}

fn build_all(profile_dir: &Path) {
    let Some(target_dir) = profile_dir.parent() else {
        panic!("{} has no parent target directory", profile_dir.display());
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut build = Command::new(cargo);
    build
        .args(["build", "--quiet", "--workspace", "--bins", "--target-dir"])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    match build.status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("building the workspace binaries failed ({status})"),
        Err(e) => panic!("cannot run cargo to build the workspace binaries: {e}"),
    }
}

/// A running `skywave-emu`: the process (killed on drop), each node's address and SIS server
/// in the order it printed them, and the rest of its standard output (counters after SIGTERM,
/// the trace).
pub struct Emu {
    /// The process.
    pub child: tokio::process::Child,
    /// (node address, SIS `host:port`), one per node.
    pub servers: Vec<(String, String)>,
    /// What it prints after the addresses.
    pub stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Emu {
    /// Keeps reading what the emulator prints, so that it never blocks on a full pipe, and
    /// returns the process and the servers.
    pub fn drain(self) -> (tokio::process::Child, Vec<(String, String)>) {
        let mut lines = self.stdout;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        (self.child, self.servers)
    }

    /// Stops the emulator with SIGTERM as an operator would, and returns what it printed from
    /// then on (its counters, the rest of its trace). Panics unless it stops printing and exits
    /// with success, each within `wait`.
    pub async fn stop(mut self, wait: std::time::Duration) -> Vec<String> {
        let pid = self
            .child
            .id()
            .unwrap_or_else(|| panic!("skywave-emu has already exited"))
            .to_string();
        let killed = tokio::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap_or_else(|e| panic!("cannot run kill: {e}"));
        assert!(killed.success(), "kill -TERM {pid}: {killed}");
        let mut rest = Vec::new();
        while let Some(line) = tokio::time::timeout(wait, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("skywave-emu did not stop"))
            .unwrap_or_else(|e| panic!("cannot read skywave-emu's stdout: {e}"))
        {
            rest.push(line);
        }
        let status = tokio::time::timeout(wait, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("skywave-emu did not exit"))
            .unwrap_or_else(|e| panic!("cannot wait for skywave-emu: {e}"));
        assert!(
            status.success(),
            "skywave-emu exited with {status}: {rest:?}"
        );
        rest
    }

    /// The SIS server of node `node` (its address as printed, e.g. `0.0.2.1`).
    pub fn server(&self, node: &str) -> &str {
        self.servers
            .iter()
            .find(|(n, _)| n == node)
            .map(|(_, s)| s.as_str())
            .unwrap_or_else(|| panic!("the emulator has no node {node}: {:?}", self.servers))
    }
}

/// `skywave-emu` arguments most emulator tests start from: ephemeral loopback ports, 2400 bit/s
/// on a clean (30 dB) channel, twenty times faster than real time.
pub const FAST_LOOPBACK: [&str; 8] = [
    "--listen",
    "127.0.0.1:0",
    "--rate",
    "2400",
    "--snr",
    "30",
    "--time-scale",
    "20",
];

/// [`FAST_LOOPBACK`] for two nodes, 1.0.0.1 and 1.0.0.2, then `extra`.
pub fn two_fast_nodes<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    [
        &["--nodes", "2", "--addresses", "1.0.0.1,1.0.0.2"][..],
        &FAST_LOOPBACK,
        extra,
    ]
    .concat()
}

/// Starts `skywave-emu` with `args` (logging warnings only) and waits, up to a minute, for its
/// `node A listening on HOST:PORT` line of each of its `nodes` nodes.
pub async fn start_emu<I, S>(args: I, nodes: usize) -> Emu
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(bin("skywave-emu"))
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start skywave-emu: {e}"));
    let Some(out) = child.stdout.take() else {
        panic!("skywave-emu has no stdout pipe");
    };
    let mut stdout = tokio::io::BufReader::new(out).lines();
    let mut servers = Vec::new();
    while servers.len() < nodes {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("skywave-emu printed no address in time"))
            .unwrap_or_else(|e| panic!("cannot read skywave-emu's stdout: {e}"))
            .unwrap_or_else(|| panic!("skywave-emu exited before listening"));
        let (node, addr) = line
            .strip_prefix("node ")
            .and_then(|l| l.split_once(" listening on "))
            .unwrap_or_else(|| panic!("unexpected skywave-emu line {line:?}"));
        servers.push((node.to_owned(), addr.to_owned()));
    }
    Emu {
        child,
        servers,
        stdout,
    }
}

/// A `skywave run` process that has printed its addresses ([`start_gateway`]).
#[derive(Debug)]
pub struct RunningGateway {
    /// The process (killed when dropped).
    pub child: tokio::process::Child,
    /// The SMTP listener's address, as printed.
    pub smtp: String,
    /// The metrics endpoint's address, when the configuration enables it.
    pub metrics: Option<String>,
}

/// Why [`start_gateway`] got no SMTP address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayStart {
    /// Nothing printed within the wait.
    TimedOut,
    /// The process closed its stdout (exited) first.
    Exited,
}

impl std::fmt::Display for GatewayStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GatewayStart::TimedOut => "did not start in time",
            GatewayStart::Exited => "exited before listening",
        })
    }
}

/// Writes a test gateway's `skywave.toml` under `dir` (LAN on a free port, Maildir delivery,
/// no metrics, quick retries, then `hf`: the `[hf]` table's lines and any further tables) and
/// its `routes.toml`; returns the former.
pub fn write_gateway(dir: &Path, domain: &str, hf: &str, routes: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let config = format!(
        "hostname = \"gw.{domain}\"\n\
         state_dir = \"state\"\n\
         routes = \"routes.toml\"\n\n\
         [smtp]\n\
         listen = \"127.0.0.1:0\"\n\
         shutdown_grace = \"2s\"\n\n\
         [delivery]\n\
         maildir = \"Maildir\"\n\n\
         [metrics]\n\
         enabled = false\n\n\
         [spool]\n\
         min_backoff = 1\n\
         max_backoff = 5\n\n\
         [hf]\n\
         {hf}"
    );
    let path = dir.join("skywave.toml");
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    };
    write(&path, &config);
    write(&dir.join("routes.toml"), routes);
    path
}

/// Spawns `command` (a `skywave ... run` command line whose arguments, stdin and stderr the
/// caller has set) with its stdout piped here, and reads that for up to `wait` until the daemon
/// prints `skywave: smtp listening on ADDR`; the metrics address, printed on the next line at
/// once when metrics are on, is taken too. Stdout is then drained in the background, so the
/// daemon never blocks on a full pipe. Panics only if the process cannot be spawned.
pub async fn start_gateway(
    mut command: tokio::process::Command,
    wait: std::time::Duration,
) -> Result<RunningGateway, GatewayStart> {
    use tokio::io::AsyncBufReadExt;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start skywave run: {e}"));
    let Some(out) = child.stdout.take() else {
        panic!("skywave run has no stdout pipe");
    };
    let mut lines = tokio::io::BufReader::new(out).lines();
    let smtp = tokio::time::timeout(wait, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(a) = line.strip_prefix("skywave: smtp listening on ") {
                return Some(a.to_owned());
            }
        }
        None
    })
    .await
    .map_err(|_| GatewayStart::TimedOut)?
    .ok_or(GatewayStart::Exited)?;
    let metrics =
        match tokio::time::timeout(std::time::Duration::from_secs(1), lines.next_line()).await {
            Ok(Ok(Some(line))) => line
                .strip_prefix("skywave: metrics listening on ")
                .map(str::to_owned),
            _ => None,
        };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(RunningGateway {
        child,
        smtp,
        metrics,
    })
}

/// One datagram of a raw-IP capture (pcap link type 101, as the gateway's `[pmul_ip] pcap`
/// writes it) with its UDP ports.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub struct Datagram {
    pub src: std::net::IpAddr,
    pub dst: std::net::IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: Vec<u8>,
}

/// Reads the UDP datagrams of a raw-IP pcap file (as `[pmul_ip] pcap` writes it).
pub fn read_raw_ip_pcap(path: &std::path::Path) -> Vec<Datagram> {
    let le32 = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(bytes.len() >= 24, "{}: no pcap header", path.display());
    assert_eq!(
        bytes[..4],
        [0xd4, 0xc3, 0xb2, 0xa1],
        "little-endian pcap magic"
    );
    assert_eq!(le32(&bytes[20..24]), 101, "LINKTYPE_RAW");
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let len = le32(&bytes[at + 8..at + 12]) as usize;
        let p = &bytes[at + 16..at + 16 + len];
        at += 16 + len;
        let (src, dst, udp) = match p[0] >> 4 {
            4 => {
                let ihl = usize::from(p[0] & 0x0f) * 4;
                assert_eq!(p[9], 17, "UDP");
                let a = |o: usize| IpAddr::V4(Ipv4Addr::new(p[o], p[o + 1], p[o + 2], p[o + 3]));
                (a(12), a(16), &p[ihl..])
            }
            6 => {
                assert_eq!(p[6], 17, "UDP");
                let a = |o: usize| {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&p[o..o + 16]);
                    IpAddr::V6(Ipv6Addr::from(b))
                };
                (a(8), a(24), &p[40..])
            }
            v => panic!("IP version {v}"),
        };
        let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        assert_eq!(ulen, udp.len(), "UDP length field");
        out.push(Datagram {
            src,
            dst,
            src_port: u16::from_be_bytes([udp[0], udp[1]]),
            dst_port: u16::from_be_bytes([udp[2], udp[3]]),
            payload: udp[8..].to_vec(),
        });
    }
    assert_eq!(at, bytes.len(), "{}: trailing bytes", path.display());
    out
}

/// Runs `cmd` with its output piped, reads the first line of its standard output and closes the
/// pipe, as `| head -1` does; the line, and how the command ended (its standard error and exit
/// status; the standard output it wrote after the line is lost with the pipe).
pub fn first_line_then_close(cmd: &mut Command) -> (String, std::process::Output) {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut first = String::new();
    if let Some(stdout) = child.stdout.take() {
        // Dropped at the end of the statement: the reader's end of the pipe closes.
        BufReader::new(stdout)
            .read_line(&mut first)
            .unwrap_or_else(|e| panic!("cannot read {cmd:?}: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{cmd:?} did not end: {e}"));
    (first, out)
}

/// A photograph as a phone's camera writes it: `width` x `height` of gradients and a grain
/// that JPEG cannot squeeze away, at JPEG `quality` (cameras write 90-95), deterministic.
pub fn photograph(width: u32, height: u32, quality: u8) -> Vec<u8> {
    let mut seed = 0x2545_f491_u32;
    let pixels = image::RgbImage::from_fn(width, height, |x, y| {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let grain = (seed >> 27) as u8;
        image::Rgb([
            ((x * 255 / width.max(1)) as u8).wrapping_add(grain),
            ((y * 255 / height.max(1)) as u8).wrapping_add(grain / 2),
            (((x + y) % 256) as u8).wrapping_add(grain),
        ])
    });
    let mut out = Vec::new();
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality);
    if let Err(e) = image::DynamicImage::ImageRgb8(pixels).write_with_encoder(encoder) {
        panic!("encoding a test photograph: {e}");
    }
    out
}

/// A message from `from` to `to` with a line of text and `jpeg` attached as `name`, in base64
/// lines of 76 characters, CRLF.
pub fn message_with_photo(from: &str, to: &str, name: &str, jpeg: &[u8]) -> Vec<u8> {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(jpeg);
    let lines: Vec<&str> = text
        .as_bytes()
        .chunks(76)
        .filter_map(|l| std::str::from_utf8(l).ok())
        .collect();
    format!(
        "From: <{from}>\r\nTo: <{to}>\r\nSubject: {name}\r\nMessage-ID: <{name}.{from}>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"photo\"\r\n\r\n\
         --photo\r\nContent-Type: text/plain\r\n\r\nThe deck this morning.\r\n\
         --photo\r\nContent-Type: image/jpeg; name=\"{name}\"\r\n\
         Content-Disposition: attachment; filename=\"{name}\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n{}\r\n--photo--\r\n",
        lines.join("\r\n")
    )
    .into_bytes()
}
