//! CFTP receiver: arbitrary U_PDUs (split from the input at 0xFF bytes) into one receiver,
//! and the whole input as a decompressed mail-file and as a skywave bundle of them. Nothing
//! may panic; memory stays bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skywave_hmtp::cftp::{MailFile, Receiver, ReceiverLimits};

fuzz_target!(|data: &[u8]| {
    let _ = MailFile::decode(data, 1 << 20);
    if let Ok(mails) = MailFile::decode_bundle(data, 1 << 20, 64) {
        assert!(!mails.is_empty() && mails.len() <= 64);
    }
    let mut rx = Receiver::new(ReceiverLimits {
        max_file: 1 << 20,
        max_message: 1 << 20,
        max_files_in_progress: 16,
        max_bundle: 64,
    });
    for updu in data.split(|&b| b == 0xFF) {
        let _ = rx.receive(updu);
    }
});
