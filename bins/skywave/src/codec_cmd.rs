//! `skywave codec ...`: compression tools for operators choosing a scheme for a peer.
//!
//! `compress` and `decompress` filter stdin to stdout with the same code the gateway uses on the
//! air; `stats` compares the schemes on a set of mail files, per message and as one session
//! stream; `corpus` writes the reproducible synthetic mail corpus to a directory.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use skywave_compress::corpus;
use skywave_compress::{
    Limits, Scheme, StreamDecoder, StreamEncoder, gzip_compress, gzip_decompress, is_gzip,
};

/// `skywave codec` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum CodecCommand {
    /// Compress stdin to stdout.
    Compress(CompressArgs),
    /// Decompress stdin to stdout, detecting the scheme unless one is given.
    Decompress(DecompressArgs),
    /// Compressed size and ratio per scheme for each file, and for all files as one session.
    Stats(StatsArgs),
    /// Write the synthetic mail corpus (one .eml file per message) to a directory.
    Corpus(CorpusArgs),
    /// Write the preset deflate dictionary for short mail (version 1) and print its id.
    Dictionary(DictionaryArgs),
}

/// Arguments of `skywave codec dictionary`.
#[derive(Debug, Args)]
pub(crate) struct DictionaryArgs {
    /// File to write the dictionary to (crates/compress/data/mail-dict-v1.txt regenerates the
    /// embedded copy).
    #[arg(long)]
    out: PathBuf,
}

/// Arguments of `skywave codec compress`.
#[derive(Debug, Args)]
pub(crate) struct CompressArgs {
    /// lzw9 .. lzw16 (JNOS LZW), deflate (zlib stream) or gzip (file).
    #[arg(long)]
    scheme: Scheme,
    /// End a transmission (LZW flush code, deflate partial flush) every N input bytes, as a session
    /// would at each reply or message; default: one flush at the end.
    #[arg(long, value_name = "N")]
    flush_every: Option<usize>,
}

/// Arguments of `skywave codec decompress`.
#[derive(Debug, Args)]
pub(crate) struct DecompressArgs {
    /// Require this scheme (lzw9 .. lzw16, deflate, gzip); detect it when absent.
    #[arg(long)]
    scheme: Option<Scheme>,
    /// Refuse to produce more than this many bytes (protects against decompression bombs).
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    max_output: u64,
}

/// Arguments of `skywave codec stats`.
#[derive(Debug, Args)]
pub(crate) struct StatsArgs {
    /// Mail files to compare the schemes on (each one is one message).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print only the summary, as a Markdown table.
    #[arg(long)]
    markdown: bool,
}

/// Arguments of `skywave codec corpus`.
#[derive(Debug, Args)]
pub(crate) struct CorpusArgs {
    /// Directory to write msg-NNN.eml files into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// Seed of the generator; the same seed always gives the same bytes.
    #[arg(long, default_value_t = corpus::DEFAULT_SEED)]
    seed: u64,
    /// Number of messages.
    #[arg(long, default_value_t = corpus::DEFAULT_COUNT)]
    count: usize,
}

pub(crate) fn run(command: CodecCommand) -> anyhow::Result<ExitCode> {
    match command {
        CodecCommand::Compress(args) => compress(&args),
        CodecCommand::Decompress(args) => decompress(&args),
        CodecCommand::Stats(args) => stats(&args),
        CodecCommand::Corpus(args) => write_corpus(&args),
        CodecCommand::Dictionary(args) => write_dictionary(&args),
    }
}

fn read_stdin() -> anyhow::Result<Vec<u8>> {
    let mut input = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut input)
        .context("reading stdin")?;
    Ok(input)
}

fn compress(args: &CompressArgs) -> anyhow::Result<ExitCode> {
    let input = read_stdin()?;
    let mut stdout = std::io::stdout().lock();
    if args.scheme == Scheme::Gzip {
        if args.flush_every.is_some() {
            bail!("--flush-every applies to the stream schemes (lzw9 .. lzw16, deflate), not gzip");
        }
        stdout.write_all(&gzip_compress(
            &input,
            skywave_compress::deflate::DEFAULT_LEVEL,
        )?)?;
        stdout.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let step = match args.flush_every {
        Some(0) => bail!("--flush-every must be at least 1"),
        Some(n) => n,
        None => input.len().max(1),
    };
    let mut enc = StreamEncoder::for_scheme(args.scheme)?;
    for piece in input.chunks(step) {
        enc.push(piece)?;
        enc.flush()?;
        stdout.write_all(&enc.take_output())?;
    }
    if input.is_empty() {
        enc.flush()?;
        stdout.write_all(&enc.take_output())?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn decompress(args: &DecompressArgs) -> anyhow::Result<ExitCode> {
    let input = read_stdin()?;
    let limits = Limits::single(args.max_output);
    let mut stdout = std::io::stdout().lock();
    let gzip = match args.scheme {
        Some(Scheme::Gzip) => {
            if !is_gzip(&input) {
                bail!("stdin is not a gzip file (it does not start with 1f 8b)");
            }
            true
        }
        Some(_) => false,
        None => is_gzip(&input),
    };
    if gzip {
        stdout.write_all(&gzip_decompress(&input, limits)?)?;
        stdout.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut dec = match args.scheme.and_then(Scheme::stream_kind) {
        Some(kind) => StreamDecoder::expecting(kind, limits),
        None => StreamDecoder::detect(limits),
    };
    for (i, piece) in input.chunks(64 * 1024).enumerate() {
        dec.feed(piece)?;
        if i == 0
            && let Some(Scheme::Lzw(want)) = args.scheme
            && let Some(got) = dec.lzw_maxbits()
            && got != want
        {
            bail!("stream is lzw{got}, expected lzw{want}");
        }
        stdout.write_all(&dec.take_output())?;
    }
    dec.finish()?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Compressed size of one message on its own, in a fresh stream or file.
fn compressed_len(scheme: Scheme, data: &[u8]) -> anyhow::Result<usize> {
    if scheme == Scheme::Gzip {
        return Ok(gzip_compress(data, skywave_compress::deflate::DEFAULT_LEVEL)?.len());
    }
    let mut enc = StreamEncoder::for_scheme(scheme)?;
    enc.push(data)?;
    enc.flush()?;
    Ok(enc.take_output().len())
}

/// Compressed size of all messages sent one after the other in one session stream, flushed after
/// each message (gzip has no session form: CFTP sends one file per message, so it is the sum).
fn session_len(scheme: Scheme, files: &[Vec<u8>]) -> anyhow::Result<usize> {
    if scheme == Scheme::Gzip {
        let mut total = 0;
        for f in files {
            total += compressed_len(scheme, f)?;
        }
        return Ok(total);
    }
    let mut enc = StreamEncoder::for_scheme(scheme)?;
    let mut total = 0;
    for f in files {
        enc.push(f)?;
        enc.flush()?;
        total += enc.take_output().len();
    }
    Ok(total)
}

fn ratio(size: usize, compressed: usize) -> f64 {
    if compressed == 0 {
        0.0
    } else {
        size as f64 / compressed as f64
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Left-aligns the first column and right-aligns the rest.
fn print_aligned(rows: &[Vec<String>], out: &mut impl Write) -> std::io::Result<()> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let w = widths[c];
            if c == 0 {
                line.push_str(&format!("{cell:<w$}"));
            } else {
                line.push_str(&format!("  {cell:>w$}"));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

fn stats(args: &StatsArgs) -> anyhow::Result<ExitCode> {
    let mut files = Vec::with_capacity(args.files.len());
    for path in &args.files {
        files.push(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?);
    }
    let schemes = Scheme::STATS;
    // per_file[i][s] = compressed size of file i with scheme s.
    let mut per_file = Vec::with_capacity(files.len());
    for f in &files {
        let mut row = Vec::with_capacity(schemes.len());
        for &s in &schemes {
            row.push(compressed_len(s, f)?);
        }
        per_file.push(row);
    }
    let total: usize = files.iter().map(Vec::len).sum();
    let mut sessions = Vec::with_capacity(schemes.len());
    for &s in &schemes {
        sessions.push(session_len(s, &files)?);
    }
    let mut means = Vec::new();
    let mut medians = Vec::new();
    let mut sums = Vec::new();
    for si in 0..schemes.len() {
        let mut ratios: Vec<f64> = files
            .iter()
            .zip(&per_file)
            .map(|(f, row)| ratio(f.len(), row[si]))
            .collect();
        means.push(ratios.iter().sum::<f64>() / ratios.len().max(1) as f64);
        medians.push(median(&mut ratios));
        sums.push(per_file.iter().map(|row| row[si]).sum::<usize>());
    }

    let mut stdout = std::io::stdout().lock();
    if args.markdown {
        let mut sizes: Vec<f64> = files.iter().map(|f| f.len() as f64).collect();
        writeln!(
            stdout,
            "{} messages, {} bytes in all (median {:.0} bytes). Ratio = original / compressed.\n",
            files.len(),
            total,
            median(&mut sizes)
        )?;
        let head: Vec<String> = schemes.iter().map(Scheme::to_string).collect();
        writeln!(stdout, "| | {} |", head.join(" | "))?;
        writeln!(stdout, "|---|{}", "---:|".repeat(schemes.len()))?;
        let fmt_row =
            |label: &str, cells: Vec<String>| format!("| {label} | {} |", cells.join(" | "));
        writeln!(
            stdout,
            "{}",
            fmt_row(
                "per message, mean ratio",
                means.iter().map(|r| format!("{r:.2}:1")).collect()
            )
        )?;
        writeln!(
            stdout,
            "{}",
            fmt_row(
                "per message, median ratio",
                medians.iter().map(|r| format!("{r:.2}:1")).collect()
            )
        )?;
        writeln!(
            stdout,
            "{}",
            fmt_row(
                "messages compressed separately, total",
                sums.iter()
                    .map(|&c| format!("{c} B ({:.2}:1)", ratio(total, c)))
                    .collect()
            )
        )?;
        writeln!(
            stdout,
            "{}",
            fmt_row(
                "one session stream (gzip: sum of files)",
                sessions
                    .iter()
                    .map(|&c| format!("{c} B ({:.2}:1)", ratio(total, c)))
                    .collect()
            )
        )?;
        stdout.flush()?;
        return Ok(ExitCode::SUCCESS);
    }

    let mut rows = Vec::new();
    let mut head = vec!["file".to_string(), "size".to_string()];
    head.extend(schemes.iter().map(Scheme::to_string));
    rows.push(head);
    let cell = |size: usize, c: usize| format!("{c} {:>5.2}", ratio(size, c));
    for ((path, f), row) in args.files.iter().zip(&files).zip(&per_file) {
        let mut r = vec![path.display().to_string(), f.len().to_string()];
        r.extend(row.iter().map(|&c| cell(f.len(), c)));
        rows.push(r);
    }
    rows.push(Vec::new());
    let mut r = vec!["separately, total".to_string(), total.to_string()];
    r.extend(sums.iter().map(|&c| cell(total, c)));
    rows.push(r);
    let mut r = vec!["one session stream".to_string(), total.to_string()];
    r.extend(sessions.iter().map(|&c| cell(total, c)));
    rows.push(r);
    let mut r = vec!["mean ratio per message".to_string(), String::new()];
    r.extend(means.iter().map(|m| format!("{m:.2}")));
    rows.push(r);
    let mut r = vec!["median ratio per message".to_string(), String::new()];
    r.extend(medians.iter().map(|m| format!("{m:.2}")));
    rows.push(r);
    print_aligned(&rows, &mut stdout)?;
    writeln!(
        stdout,
        "\nCells: compressed bytes and ratio (original / compressed). Streams are flushed after each\nmessage as a session would; gzip has no session form (one file per message), so its\nsession figure is the sum of the files."
    )?;
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn write_dictionary(args: &DictionaryArgs) -> anyhow::Result<ExitCode> {
    let d = skywave_compress::dictionary::build_mail_v1();
    std::fs::write(&args.out, &d).with_context(|| format!("writing {}", args.out.display()))?;
    outln!(
        "wrote the mail dictionary v1 ({} bytes, id {:08x}) to {}{}",
        d.len(),
        skywave_compress::dictionary::adler32(&d),
        args.out.display(),
        if d == skywave_compress::dictionary::MAIL_V1 {
            ""
        } else {
            " (differs from the copy built into this binary)"
        }
    );
    Ok(ExitCode::SUCCESS)
}

fn write_corpus(args: &CorpusArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let messages = corpus::standard_corpus(args.seed, args.count);
    let mut total = 0;
    for (i, m) in messages.iter().enumerate() {
        let path = args.out.join(format!("msg-{:03}.eml", i + 1));
        std::fs::write(&path, m).with_context(|| format!("writing {}", path.display()))?;
        total += m.len();
    }
    outln!(
        "wrote {} messages ({} bytes) to {} (seed {})",
        messages.len(),
        total,
        args.out.display(),
        args.seed
    );
    Ok(ExitCode::SUCCESS)
}
