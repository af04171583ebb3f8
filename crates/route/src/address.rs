//! Mail addresses as the routing table sees them: parsing, normalisation and relay safety.
//!
//! Every recipient the SMTP front end is given goes through [`Address::parse`] before the table
//! is consulted. The parser accepts the RFC 5321 `Mailbox` forms that real mail uses
//! (`Dot-string@Domain`, `"Quoted string"@Domain`) and refuses, with a reason, everything that an
//! open relay could be tricked with: the percent hack (`a%b@c`), source routes (`@a,@b:u@c`),
//! UUCP bang paths (`a!b@c`), quoted local parts hiding `@`, `%` or `!`, more than one `@`,
//! IP literals (`[1.2.3.4]`) and numeric domains, trailing dots, empty parts and over-long
//! addresses (RFC 5321 §4.5.3.1: local part 64 octets, domain 255, path 256).
//!
//! Normalisation: the domain is lower-cased (DNS names are case-insensitive), and an
//! internationalised domain is written as A-labels (`münchen.example` becomes
//! `xn--mnchen-3ya.example`: IDNA2008 with UTS #46 processing, the form RFC 5890 makes
//! equivalent and every bearer carries, so mail to it needs no `SMTPUTF8` of any next hop); the
//! local part is kept exactly as written, because only the final mailbox host may interpret its
//! case. A local part that is not ASCII (RFC 6531) is refused: it has no ASCII form.
//! Matching against exact-address rules compares local parts ASCII-case-insensitively, as most
//! MTAs' lookup tables do (Postfix lower-cases lookup keys).

use std::borrow::Cow;
use std::fmt;

/// RFC 5321 §4.5.3.1.1: maximum length of a local part, in octets.
pub const MAX_LOCAL_PART: usize = 64;
/// RFC 5321 §4.5.3.1.2: maximum length of a domain, in octets.
pub const MAX_DOMAIN: usize = 255;
/// RFC 5321 §4.5.3.1.3: maximum length of a path including its angle brackets, in octets.
/// A mailbox inside `<...>` may therefore be at most 254 octets long.
pub const MAX_PATH: usize = 256;
/// RFC 1035: maximum length of one domain label, in octets.
pub const MAX_LABEL: usize = 63;

/// A recipient address, checked and normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    local: String,
    domain: String,
}

impl Address {
    /// Parses a recipient as given in `RCPT TO:` (with or without the angle brackets), and
    /// refuses the relay tricks listed in the module documentation.
    pub fn parse(input: &str) -> Result<Address, AddressError> {
        // Bound the work before looking at the text at all.
        if input.len() > MAX_PATH {
            return Err(AddressError::PathTooLong { len: input.len() });
        }
        let inner = match (input.strip_prefix('<'), input.ends_with('>')) {
            (Some(rest), true) => rest.strip_suffix('>').unwrap_or(rest),
            (Some(_), false) => return Err(AddressError::UnbalancedBrackets),
            (None, true) => return Err(AddressError::UnbalancedBrackets),
            (None, false) => input,
        };
        if inner.len() + 2 > MAX_PATH {
            return Err(AddressError::PathTooLong {
                len: inner.len() + 2,
            });
        }
        if inner.is_empty() {
            return Err(AddressError::Empty);
        }
        if inner.starts_with('@') {
            // `@relay1,@relay2:user@dest`: an RFC 821 source route. RFC 5321 says to ignore
            // the route and deliver to the mailbox, but then the address a relay check sees
            // and the one a downstream MTA uses can differ; refuse instead.
            return Err(if inner.contains(':') {
                AddressError::SourceRoute
            } else {
                AddressError::EmptyLocalPart
            });
        }
        let (local, domain) = split_mailbox(inner)?;
        if let Some(c) = local.chars().find(|c| !c.is_ascii()) {
            return Err(AddressError::NonAscii(c));
        }
        check_local_part(local)?;
        let domain = check_domain(domain).map_err(AddressError::Domain)?;
        if local.len() + 1 + domain.len() + 2 > MAX_PATH {
            // An internationalised domain's A-labels are longer than its U-labels.
            return Err(AddressError::PathTooLong {
                len: local.len() + 1 + domain.len() + 2,
            });
        }
        Ok(Address {
            local: local.to_owned(),
            domain,
        })
    }

    /// The local part, exactly as written (quotes included when it was quoted).
    pub fn local_part(&self) -> &str {
        &self.local
    }

    /// The domain, lower-cased.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The local part in the form exact-address rules are matched with (ASCII lower case).
    pub(crate) fn local_key(&self) -> String {
        self.local.to_ascii_lowercase()
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.local, self.domain)
    }
}

/// Splits `local@domain`, handling a quoted local part; refuses a second `@`.
fn split_mailbox(inner: &str) -> Result<(&str, &str), AddressError> {
    let bytes = inner.as_bytes();
    let local_end = if bytes.first() == Some(&b'"') {
        // Find the closing quote, honouring backslash escapes.
        let mut i = 1;
        let mut close = None;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => i += 2,
                b'"' => {
                    close = Some(i);
                    break;
                }
                _ => i += 1,
            }
        }
        let close = close.ok_or(AddressError::UnterminatedQuote)?;
        let end = close + 1;
        if bytes.get(end) != Some(&b'@') {
            return Err(if end >= bytes.len() {
                AddressError::MissingAt
            } else {
                AddressError::TextAfterQuote
            });
        }
        end
    } else {
        let first = inner.find('@').ok_or(AddressError::MissingAt)?;
        if inner[first + 1..].contains('@') {
            return Err(AddressError::MultipleAt);
        }
        first
    };
    let local = &inner[..local_end];
    let domain = &inner[local_end + 1..];
    if domain.contains('@') {
        return Err(AddressError::MultipleAt);
    }
    Ok((local, domain))
}

/// RFC 5321 `atext`: the characters allowed in an unquoted atom.
fn is_atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c)
}

fn check_local_part(local: &str) -> Result<(), AddressError> {
    if local.is_empty() {
        return Err(AddressError::EmptyLocalPart);
    }
    if local.len() > MAX_LOCAL_PART {
        return Err(AddressError::LocalPartTooLong { len: local.len() });
    }
    if let Some(quoted) = local.strip_prefix('"') {
        let content = quoted.strip_suffix('"').unwrap_or(quoted);
        // Unescape to see what the final MTA would see: `"a\@b"` is `a@b`.
        let mut unescaped = String::with_capacity(content.len());
        let mut chars = content.chars();
        while let Some(c) = chars.next() {
            let c = if c == '\\' {
                chars.next().ok_or(AddressError::UnterminatedQuote)?
            } else {
                c
            };
            if c.is_ascii_control() {
                return Err(AddressError::BadLocalChar(c));
            }
            unescaped.push(c);
        }
        if unescaped.is_empty() {
            return Err(AddressError::EmptyLocalPart);
        }
        if let Some(c) = unescaped.chars().find(|c| matches!(c, '@' | '%' | '!')) {
            return Err(AddressError::QuotedRouting(c));
        }
        return Ok(());
    }
    // Relay tricks first, so that the reason names the trick rather than a syntax rule.
    if local.contains('%') {
        return Err(AddressError::PercentHack);
    }
    if local.contains('!') {
        return Err(AddressError::BangPath);
    }
    if let Some(c) = local.chars().find(|&c| c != '.' && !is_atext(c)) {
        return Err(AddressError::BadLocalChar(c));
    }
    if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return Err(AddressError::BadLocalDots);
    }
    Ok(())
}

/// Why a domain was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// Nothing after the `@` (or an empty pattern).
    #[error("the domain is empty")]
    Empty,
    /// `[1.2.3.4]` or `[IPv6:...]`.
    #[error("IP-literal domains such as {0} are not routed; use a domain name")]
    IpLiteral(String),
    /// `example.org.`: the absolute form of a DNS name.
    #[error("trailing dot in domain \"{0}\"; write it without the final dot")]
    TrailingDot(String),
    /// `a..b` or a leading dot.
    #[error("empty label in domain \"{0}\" (two dots in a row, or a leading dot)")]
    EmptyLabel(String),
    /// Longer than 255 octets.
    #[error("domain is {len} octets long; at most 255 are allowed (RFC 5321)")]
    TooLong {
        /// Length found.
        len: usize,
    },
    /// A label longer than 63 octets.
    #[error("label \"{label}\" is {len} octets long; at most 63 are allowed")]
    LabelTooLong {
        /// The label.
        label: String,
        /// Its length.
        len: usize,
    },
    /// A character other than letters, digits and hyphens.
    #[error(
        "character {ch:?} is not allowed in domain \"{domain}\" (letters, digits, hyphens and dots only)"
    )]
    BadChar {
        /// The domain.
        domain: String,
        /// The character.
        ch: char,
    },
    /// A label starting or ending with a hyphen.
    #[error("label \"{0}\" starts or ends with a hyphen")]
    HyphenEdge(String),
    /// The last label is all digits: an IP address without brackets, or not a domain name.
    #[error("\"{0}\" looks like an IP address, not a domain name; IP addresses are not routed")]
    Numeric(String),
    /// A domain that is not ASCII and has no A-label form (IDNA2008 with UTS #46 processing).
    #[error("\"{0}\" is not a valid internationalised domain name (IDNA2008, UTS #46)")]
    NotIdn(String),
}

/// Checks RFC 5321 `Domain` syntax (letters, digits, hyphens; labels 1-63 octets; at most 255
/// octets) and returns it lower-cased, an internationalised domain as its A-labels. IP
/// literals, trailing dots and all-numeric top labels are refused.
pub(crate) fn check_domain(domain: &str) -> Result<String, DomainError> {
    if domain.is_empty() {
        return Err(DomainError::Empty);
    }
    if domain.starts_with('[') {
        return Err(DomainError::IpLiteral(domain.to_owned()));
    }
    if !domain.is_ascii() {
        if domain.ends_with('.') {
            return Err(DomainError::TrailingDot(domain.to_owned()));
        }
        // Strict: hostname characters only (STD3), hyphen rules, DNS lengths. The A-labels
        // are then checked as any ASCII domain is; they are ASCII by the crate's contract,
        // and the guard makes sure this calls itself once at most.
        let ascii = idna::domain_to_ascii_strict(domain)
            .ok()
            .filter(|a| a.is_ascii())
            .ok_or_else(|| DomainError::NotIdn(domain.to_owned()))?;
        return check_domain(&ascii);
    }
    if domain.len() > MAX_DOMAIN {
        return Err(DomainError::TooLong { len: domain.len() });
    }
    if domain.ends_with('.') && domain.len() > 1 && !domain.ends_with("..") {
        return Err(DomainError::TrailingDot(domain.to_owned()));
    }
    if let Some(ch) = domain
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
    {
        return Err(DomainError::BadChar {
            domain: domain.to_owned(),
            ch,
        });
    }
    let mut last = "";
    for label in domain.split('.') {
        if label.is_empty() {
            return Err(DomainError::EmptyLabel(domain.to_owned()));
        }
        if label.len() > MAX_LABEL {
            return Err(DomainError::LabelTooLong {
                label: label.to_owned(),
                len: label.len(),
            });
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(DomainError::HyphenEdge(label.to_owned()));
        }
        last = label;
    }
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DomainError::Numeric(domain.to_owned()));
    }
    Ok(domain.to_ascii_lowercase())
}

/// `path` (a sender or recipient as MAIL or RCPT gave it, without angle brackets) with an
/// internationalised domain written as A-labels, the form the spool keeps and every bearer
/// carries; an ASCII path as it is. `Err` when it has no ASCII form: a local part that is not
/// ASCII (RFC 6531), or a domain that is not a valid internationalised domain name.
///
/// ```
/// use skywave_route::address::ascii_path;
/// assert_eq!(ascii_path("ops@hafen.M\u{dc}nchen.example").unwrap(), "ops@hafen.xn--mnchen-3ya.example");
/// assert_eq!(ascii_path("Ops@Ship.example").unwrap(), "Ops@Ship.example");
/// assert!(ascii_path("j\u{f6}rg@ship.example").is_err());
/// ```
pub fn ascii_path(path: &str) -> Result<Cow<'_, str>, AddressError> {
    if path.is_ascii() {
        return Ok(Cow::Borrowed(path));
    }
    // A domain has no `@`; a quoted local part may.
    let (local, domain) = path.rsplit_once('@').ok_or(AddressError::MissingAt)?;
    if let Some(c) = local.chars().find(|c| !c.is_ascii()) {
        return Err(AddressError::NonAscii(c));
    }
    let domain = check_domain(domain).map_err(AddressError::Domain)?;
    Ok(Cow::Owned(format!("{local}@{domain}")))
}

/// Why a recipient address was refused. Each reason maps to an SMTP reply with
/// [`AddressError::smtp_reply`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// `<>` or an empty string.
    #[error("empty address")]
    Empty,
    /// `<` without `>` or the reverse.
    #[error("unbalanced angle brackets")]
    UnbalancedBrackets,
    /// Longer than the RFC 5321 path limit.
    #[error(
        "address path is {len} octets long; at most 256 are allowed including the angle brackets (RFC 5321)"
    )]
    PathTooLong {
        /// Length found (with the angle brackets).
        len: usize,
    },
    /// Local part longer than 64 octets.
    #[error("local part is {len} octets long; at most 64 are allowed (RFC 5321)")]
    LocalPartTooLong {
        /// Length found.
        len: usize,
    },
    /// A non-ASCII character in the local part: UTF-8 header fields and internationalised
    /// domains (as A-labels) cross every bearer, internationalised local parts (RFC 6531) do
    /// not (JNOS and P_MUL's envelope are ASCII).
    #[error(
        "non-ASCII character U+{:04X} in address; this gateway carries UTF-8 header fields (SMTPUTF8) and internationalised domains but not internationalised local parts",
        u32::from(*.0)
    )]
    NonAscii(char),
    /// No `@` at all.
    #[error("no @ in address; a domain is required")]
    MissingAt,
    /// More than one `@` outside quotes.
    #[error("more than one @ in address; relaying through this host by address tricks is refused")]
    MultipleAt,
    /// Nothing before the `@`.
    #[error("empty local part")]
    EmptyLocalPart,
    /// `@a,@b:user@c`.
    #[error(
        "source routes (@host,@host:user@domain) are refused; address the final mailbox directly"
    )]
    SourceRoute,
    /// `user%other@thishost`.
    #[error(
        "percent hack (user%domain@relay) is refused; this gateway does not relay by local-part routing"
    )]
    PercentHack,
    /// `host!user@thishost`.
    #[error("bang paths (host!user) are refused; this gateway does not relay UUCP-style routes")]
    BangPath,
    /// `"a@b"@c`, `"a%b"@c`, `"a!b"@c`.
    #[error("quoted local part contains {0:?}, which could route the mail onwards; refused")]
    QuotedRouting(char),
    /// A quoted local part without its closing quote.
    #[error("quoted local part is not terminated")]
    UnterminatedQuote,
    /// Text between the closing quote and the `@`.
    #[error("text after the closing quote of the local part; expected @")]
    TextAfterQuote,
    /// A character not allowed in an unquoted local part.
    #[error("character {0:?} is not allowed in the local part")]
    BadLocalChar(char),
    /// Leading, trailing or doubled dots in an unquoted local part.
    #[error("local part has a leading, trailing or doubled dot")]
    BadLocalDots,
    /// The domain is not acceptable.
    #[error("{0}")]
    Domain(DomainError),
}

/// An SMTP refusal: the reply code, the RFC 3463 enhanced status code and the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Basic reply code: 550 (mailbox unavailable / not routed), 553 (an address this gateway
    /// cannot carry) or 554 (relay denied).
    pub code: u16,
    /// Enhanced status code, e.g. `5.7.1`.
    pub enhanced: &'static str,
    /// Human-readable text for the reply line.
    pub text: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.code, self.enhanced, self.text)
    }
}

impl AddressError {
    /// True when the address is refused because it tries to route mail through this host
    /// (the classic open-relay tricks), as opposed to plain bad syntax.
    pub fn is_relay_trick(&self) -> bool {
        matches!(
            self,
            AddressError::MultipleAt
                | AddressError::SourceRoute
                | AddressError::PercentHack
                | AddressError::BangPath
                | AddressError::QuotedRouting(_)
                | AddressError::Domain(DomainError::IpLiteral(_) | DomainError::Numeric(_))
        )
    }

    /// The SMTP reply a server should give for this refusal: 550 5.7.1 for relay tricks
    /// (delivery not authorised), 553 5.6.7 for an internationalised local part (RFC 6531's
    /// "non-ASCII addresses not permitted", as Postfix answers), 550 5.1.3 for bad syntax or
    /// length.
    pub fn smtp_reply(&self) -> Refusal {
        let (code, enhanced) = if self.is_relay_trick() {
            (550, "5.7.1")
        } else if matches!(self, AddressError::NonAscii(_)) {
            (553, "5.6.7")
        } else {
            (550, "5.1.3")
        };
        Refusal {
            code,
            enhanced,
            text: self.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_domain_keeps_local_case() {
        let a = Address::parse("<Ops.Officer@Ship.NAVY.Example>").unwrap();
        assert_eq!(a.local_part(), "Ops.Officer");
        assert_eq!(a.domain(), "ship.navy.example");
        assert_eq!(a.to_string(), "Ops.Officer@ship.navy.example");
    }

    #[test]
    fn quoted_local_part_without_routing_chars_is_fine() {
        let a = Address::parse("\"John Smith\"@example.org").unwrap();
        assert_eq!(a.local_part(), "\"John Smith\"");
    }

    #[test]
    fn limits() {
        let local = "a".repeat(64);
        assert!(Address::parse(&format!("{local}@example.org")).is_ok());
        let local = "a".repeat(65);
        assert_eq!(
            Address::parse(&format!("{local}@example.org")),
            Err(AddressError::LocalPartTooLong { len: 65 })
        );
        // 254-octet mailbox: fits a 256-octet path.
        let label = "b".repeat(63);
        let domain = format!("{label}.{label}.{label}.{}", "c".repeat(61));
        assert_eq!(domain.len(), 253);
        assert!(Address::parse(&format!("a@{domain}")).is_err()); // 255 > 254
        let domain = format!("{label}.{label}.{label}.{}", "c".repeat(59));
        assert!(Address::parse(&format!("a@{domain}")).is_ok()); // 253 octets
    }
}
