//! Standard output for skywave's three programs (`skywave`, `skywave-emu`, `skywave-bench`):
//! [`outln!`] and [`out!`] in place of `println!` and `print!`.
//!
//! `println!` panics when stdout is a pipe its reader has closed (`skywave queue trace ... |
//! head`, `skywave-bench calibrate | head`): "failed printing to stdout: Broken pipe", with a
//! backtrace hint, and exit status 101. These end the program quietly with success instead, as
//! ripgrep and the coreutils do, since the reader has seen what it wanted; any other write error
//! is reported on stderr and ends the program with status 1. It sits below every command of the
//! programs and above nothing but `std`.

use std::io::Write;

/// `println!`, ending the program quietly when the reader has closed the pipe (see the crate's
/// docs).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` as [`outln!`] writes.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_out(format_args!($($arg)*))
    };
}

/// Writes `args` to stdout; see the crate's docs for what a failed write does.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        std::process::exit(exit_status(&e, &program()));
    }
}

/// The status a failed write to stdout ends the program with: 0 for a closed pipe (the reader
/// has seen enough: nothing more to say to anyone), 1 with the error on stderr for anything
/// else.
fn exit_status(e: &std::io::Error, program: &str) -> i32 {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return 0;
    }
    eprintln!("{program}: cannot write to stdout: {e}");
    1
}

/// The running program's name, as its error messages start.
fn program() -> String {
    std::env::args_os()
        .next()
        .as_deref()
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .map_or_else(
            || "skywave".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_success_and_any_other_error_is_not() {
        let closed = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(exit_status(&closed, "skywave"), 0);
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        assert_eq!(exit_status(&full, "skywave"), 1);
    }
}
