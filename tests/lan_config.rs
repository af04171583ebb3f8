//! Mistakes in `skywave.toml` as a person meets them: `skywave run --config FILE` refuses to
//! start, exits with status 2 and prints file:line:column, the line, a caret and what was
//! expected. One test per kind of mistake; the exact text is compared.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "lan_support.rs"]
mod support;

use support::{run, skywave};

const HEAD: &str = "hostname = \"gw.ship.test\"\nstate_dir = \"state\"\nroutes = \"routes.toml\"\n";

/// Writes the config, runs `skywave run`, returns (exit code, stderr with the path replaced by
/// `skywave.toml`).
async fn mistake(text: &str) -> (i32, String) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("routes.toml"),
        support::routes("\"127.0.0.0/8\""),
    )
    .unwrap();
    let path = tmp.path().join("skywave.toml");
    std::fs::write(&path, text).unwrap();
    let (code, out, err) = run(
        skywave().to_str().unwrap(),
        &["run", "--config", path.to_str().unwrap()],
    )
    .await;
    assert_eq!(out, "", "nothing on stdout when the config is refused");
    (code, err.replace(path.to_str().unwrap(), "skywave.toml"))
}

#[tokio::test]
async fn misspelt_key() {
    let (code, err) = mistake(&format!("{HEAD}[smtp]\nlisten_on = \"127.0.0.1:25\"\n")).await;
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "skywave.toml:5:1: error: unknown field `listen_on`, expected one of `listen`, \
         `max_message_size`, `max_recipients`, `idle_timeout`, `data_timeout`, `shutdown_grace`, \
         `tls`, `auth`\n  |\n5 | listen_on = \"127.0.0.1:25\"\n  | ^^^^^^^^^\n"
    );
}

#[tokio::test]
async fn missing_required_key() {
    let (code, err) = mistake("hostname = \"gw.ship.test\"\nroutes = \"routes.toml\"\n").await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with("skywave.toml:1:1: error: missing field `state_dir`\n"),
        "{err}"
    );
}

#[tokio::test]
async fn listen_address_with_a_name() {
    let (code, err) = mistake(&format!("{HEAD}[smtp]\nlisten = \"mail:25\"\n")).await;
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "skywave.toml:5:10: error: \"mail:25\" is not an address and port; expected an IP \
         address and a port such as \"127.0.0.1:2525\" or \"[::1]:2525\"\n  |\n5 | listen = \
         \"mail:25\"\n  |          ^^^^^^^^^\n"
    );
}

#[tokio::test]
async fn size_without_a_known_unit() {
    let (code, err) = mistake(&format!("{HEAD}[smtp]\nmax_message_size = \"10 megs\"\n")).await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "skywave.toml:5:20: error: \"10 megs\" is not a size; expected a number with an \
             optional unit B, kB, MB, GB, KiB, MiB or GiB, such as \"10 MiB\"\n"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn value_of_the_wrong_type() {
    let (code, err) = mistake(&format!("{HEAD}[metrics]\nenabled = \"yes\"\n")).await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "skywave.toml:5:11: error: invalid type: string \"yes\", expected a boolean\n"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn two_delivery_methods() {
    let (code, err) = mistake(&format!(
        "{HEAD}[delivery]\nmaildir = \"md\"\nsmarthost = \"mail:25\"\n"
    ))
    .await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "skywave.toml:6:13: error: [delivery] has both maildir (line 5) and smarthost; \
             expected one of them\n"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn auth_without_tls() {
    let (code, err) = mistake(&format!("{HEAD}[smtp.auth]\nusers = {{ ops = \"pw\" }}\n")).await;
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "skywave.toml:5:17: error: [smtp.auth] needs [smtp.tls]: passwords are only \
             accepted over STARTTLS; add cert and key under [smtp.tls]\n"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn toml_syntax_error() {
    let (code, err) = mistake("hostname = \"gw.ship.test\nstate_dir = \"s\"\n").await;
    assert_eq!(code, 2);
    assert!(err.starts_with("skywave.toml:1:"), "{err}");
    assert!(err.contains(": error: "), "{err}");
}

#[tokio::test]
async fn broken_routing_table_is_reported_with_its_own_position() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("routes.toml"),
        "[[route]]\nmatch = \"*\"\nto = \"nowhere\"\n",
    )
    .unwrap();
    let path = tmp.path().join("skywave.toml");
    std::fs::write(
        &path,
        format!("{HEAD}[smtp]\nlisten = \"127.0.0.1:0\"\n[metrics]\nenabled = false\n"),
    )
    .unwrap();
    let (code, out, err) = run(
        skywave().to_str().unwrap(),
        &["run", "--config", path.to_str().unwrap()],
    )
    .await;
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("the routing table cannot be loaded:"), "{err}");
    assert!(err.contains("routes.toml:3:6: error: "), "{err}");
    assert!(err.contains("nowhere"), "{err}");
}
