//! The gateway's EMCON switch (emission control: radio silence).
//!
//! A ship under EMCON may receive but must not transmit. The gateway's state is one boolean in
//! a `watch` channel that every HF link reads before it puts anything on the air (sessions,
//! files, P_MUL PDUs and acknowledgements). It starts from `[hf] emcon` and an operator changes
//! it on the running gateway with `skywave emcon on|off`, which writes `state_dir/emcon`; the
//! daemon looks at that file every two seconds. A file rather than a signal: the command needs
//! no pid and says the state even when the gateway is down. A restart goes back to the
//! configuration's setting (and rewrites the file), so a gateway configured for EMCON never
//! starts transmitting because of an old command.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

/// The switch file under the state directory.
pub const FILE: &str = "emcon";

/// How often the daemon reads the switch file.
pub const POLL: Duration = Duration::from_secs(2);

/// The switch file of a gateway whose state directory is `state_dir`.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE)
}

/// Writes the switch (`on` or `off`), durably: a power cut must not lift EMCON.
pub fn write(state_dir: &Path, on: bool) -> std::io::Result<()> {
    crate::durable::replace(&path(state_dir), if on { b"on\n" } else { b"off\n" })
}

/// Reads the switch: `None` when there is no file; an unreadable or garbled file reads as
/// `Some(true)`, because silence is the safe side of a doubt.
pub fn read(state_dir: &Path) -> Option<bool> {
    match std::fs::read_to_string(path(state_dir)) {
        Ok(text) => Some(text.trim() != "off"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(_) => Some(true),
    }
}

/// Follows the switch file until `shutdown`, setting `state` when it changes.
pub(crate) async fn follow(
    state_dir: PathBuf,
    state: Arc<watch::Sender<bool>>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = shutdown.changed() => return,
        }
        let dir = state_dir.clone();
        let Ok(Some(on)) = crate::blocking::spawn(move || read(&dir)).await else {
            continue;
        };
        if *state.borrow() != on {
            if on {
                warn!("EMCON set by an operator: the gateway transmits nothing from now on");
            } else {
                info!("EMCON lifted by an operator");
            }
            state.send_replace(on);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_switch_file_round_trips_and_doubt_means_silence() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        write(dir.path(), true).unwrap();
        assert_eq!(read(dir.path()), Some(true));
        write(dir.path(), false).unwrap();
        assert_eq!(read(dir.path()), Some(false));
        std::fs::write(path(dir.path()), "maybe").unwrap();
        assert_eq!(read(dir.path()), Some(true));
    }
}
