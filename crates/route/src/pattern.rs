//! Route patterns: what the left-hand side of a rule may say.
//!
//! Four forms, from most to least specific:
//! - `user@example.org`: one exact address;
//! - `example.org`: one domain (not its subdomains);
//! - `*.example.org`: every subdomain of `example.org` at any depth (not `example.org` itself);
//!   when several wildcards match, the deepest one wins;
//! - `*`: everything else (the catch-all).

use std::fmt;

use crate::address::{Address, AddressError, DomainError, check_domain};

/// A parsed, normalised route pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// One exact address; local part lower-cased for matching, domain lower-cased.
    Address {
        /// Local part (ASCII lower case).
        local: String,
        /// Domain (lower case).
        domain: String,
    },
    /// One domain, exactly.
    Domain(String),
    /// Every subdomain of the given domain (stored without the `*.`).
    Subdomains(String),
    /// Everything.
    CatchAll,
}

/// The kind of a pattern, for explanations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternKind {
    /// `user@example.org`.
    Address,
    /// `example.org`.
    Domain,
    /// `*.example.org`.
    Subdomains,
    /// `*`.
    CatchAll,
}

impl fmt::Display for PatternKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PatternKind::Address => "address",
            PatternKind::Domain => "domain",
            PatternKind::Subdomains => "wildcard",
            PatternKind::CatchAll => "catch-all",
        })
    }
}

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Empty string.
    #[error("empty pattern; expected user@domain, domain, *.domain or *")]
    Empty,
    /// A `*` anywhere but as the whole first label.
    #[error(
        "\"{0}\": a wildcard may only be the whole first label, as in *.example.org, or * alone"
    )]
    MisplacedWildcard(String),
    /// Exact-address pattern with a bad address.
    #[error("\"{pattern}\" is not a valid address: {reason}")]
    Address {
        /// The pattern text.
        pattern: String,
        /// Why.
        reason: AddressError,
    },
    /// Domain pattern with a bad domain.
    #[error("\"{pattern}\" is not a valid domain: {reason}")]
    Domain {
        /// The pattern text.
        pattern: String,
        /// Why.
        reason: DomainError,
    },
}

impl Pattern {
    /// Parses a pattern as written in `routes.toml`.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        if text == "*" {
            return Ok(Pattern::CatchAll);
        }
        if text.contains('@') {
            if text.contains('*') {
                return Err(PatternError::MisplacedWildcard(text.to_owned()));
            }
            let address = Address::parse(text).map_err(|reason| PatternError::Address {
                pattern: text.to_owned(),
                reason,
            })?;
            return Ok(Pattern::Address {
                local: address.local_key(),
                domain: address.domain().to_owned(),
            });
        }
        let (wild, rest) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if rest.contains('*') {
            return Err(PatternError::MisplacedWildcard(text.to_owned()));
        }
        let domain = check_domain(rest).map_err(|reason| PatternError::Domain {
            pattern: text.to_owned(),
            reason,
        })?;
        Ok(if wild {
            Pattern::Subdomains(domain)
        } else {
            Pattern::Domain(domain)
        })
    }

    /// The kind of this pattern.
    pub fn kind(&self) -> PatternKind {
        match self {
            Pattern::Address { .. } => PatternKind::Address,
            Pattern::Domain(_) => PatternKind::Domain,
            Pattern::Subdomains(_) => PatternKind::Subdomains,
            Pattern::CatchAll => PatternKind::CatchAll,
        }
    }

    /// True when this pattern matches `address`.
    pub fn matches(&self, address: &Address) -> bool {
        match self {
            Pattern::Address { local, domain } => {
                domain == address.domain() && local.eq_ignore_ascii_case(address.local_part())
            }
            Pattern::Domain(d) => d == address.domain(),
            Pattern::Subdomains(d) => address
                .domain()
                .strip_suffix(d.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            Pattern::CatchAll => true,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Address { local, domain } => write!(f, "{local}@{domain}"),
            Pattern::Domain(d) => f.write_str(d),
            Pattern::Subdomains(d) => write!(f, "*.{d}"),
            Pattern::CatchAll => f.write_str("*"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(Pattern::parse("*"), Ok(Pattern::CatchAll));
        assert_eq!(
            Pattern::parse("*.Navy.Example"),
            Ok(Pattern::Subdomains("navy.example".into()))
        );
        assert_eq!(
            Pattern::parse("Example.ORG"),
            Ok(Pattern::Domain("example.org".into()))
        );
        assert_eq!(
            Pattern::parse("Ops@Example.org"),
            Ok(Pattern::Address {
                local: "ops".into(),
                domain: "example.org".into()
            })
        );
        for bad in [
            "",
            "*.",
            "a.*.b",
            "*example.org",
            "**",
            "*.*.b",
            "u@*.b",
            "x.",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn subdomain_matching() {
        let p = Pattern::parse("*.example.org").unwrap();
        let yes = Address::parse("a@x.example.org").unwrap();
        let deep = Address::parse("a@y.x.example.org").unwrap();
        let apex = Address::parse("a@example.org").unwrap();
        let lookalike = Address::parse("a@badexample.org").unwrap();
        assert!(p.matches(&yes));
        assert!(p.matches(&deep));
        assert!(!p.matches(&apex));
        assert!(!p.matches(&lookalike));
    }
}
