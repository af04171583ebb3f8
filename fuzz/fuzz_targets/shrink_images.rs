//! Fuzzes `shrink_images`, which decodes the JPEG and PNG images of any message a peer's links
//! send (a peer's `shrink_images`): the data as a whole message, or as the image of a
//! message's attachment, so that the image decoders see it. Nothing may panic or take more
//! than the decoder's bound; what is returned is never larger than what came, says exactly
//! what it saved, parses as a message again, and a second pass finds nothing more to do.
#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;
use skywave_smtp::shrink::{ImageLimit, shrink_images};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(limit) = ImageLimit::new(64, 50) else {
        return;
    };
    let message = match mode % 3 {
        0 => rest.to_vec(),
        kind => {
            let b64 = base64::engine::general_purpose::STANDARD.encode(rest);
            let ctype = if kind == 1 { "image/jpeg" } else { "image/png" };
            format!(
                "Subject: x\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
                 --b\r\nContent-Type: text/plain\r\n\r\nhello\r\n\
                 --b\r\nContent-Type: {ctype}\r\nContent-Transfer-Encoding: base64\r\n\r\n{b64}\r\n--b--\r\n"
            )
            .into_bytes()
        }
    };
    let (out, done) = shrink_images(&message, &limit);
    assert_eq!(out.len() + done.saved, message.len());
    if done.images > 0 {
        assert!(done.saved > 0);
        assert!(mail_parser::MessageParser::new().parse(&out[..]).is_some());
        assert_eq!(shrink_images(&out, &limit).1.images, 0);
    }
});
