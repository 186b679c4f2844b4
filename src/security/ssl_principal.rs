//! The principal of a client certificate, as Kafka builds it: the subject's
//! distinguished name in RFC 2253 form (Java's `X500Principal.getName()`:
//! `CN=client,OU=eng,O=Acme,C=US`, most specific first, RFC 2253's keywords and
//! dotted OIDs with `#`-hex values for the rest), then shortened by
//! `ssl.principal.mapping.rules`.
//!
//! A rule list is Kafka's: comma-separated `RULE:pattern/replacement/[LU]` and
//! `DEFAULT`, tried in order. A `RULE` applies when its pattern matches the
//! whole DN; the name is then the replacement (`$1`.. its groups; a `$n` past
//! the last group is literal, as Kafka escapes it), lower- or upper-cased with
//! `L` or `U`. `DEFAULT` is the DN itself. When no rule applies the connection
//! is refused, as Kafka refuses it.

use std::fmt::Write as _;

use regex::Regex;
use x509_cert::der::asn1::ObjectIdentifier;
use x509_cert::der::{Decode, Encode, Tag};
use x509_cert::Certificate;

/// RFC 2253's attribute keywords, by OID; every other type is written as its
/// dotted OID (Java's `X500Principal.RFC2253`).
const RFC2253_KEYWORDS: [(&str, &str); 9] = [
    ("2.5.4.3", "CN"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.6", "C"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject DN of a DER certificate in RFC 2253 form.
pub fn subject_dn(certificate_der: &[u8]) -> Result<String, String> {
    let certificate = Certificate::from_der(certificate_der)
        .map_err(|e| format!("the client certificate does not parse: {e}"))?;
    let mut dn = String::new();
    // RFC 2253 writes the sequence last RDN first.
    for rdn in certificate.tbs_certificate.subject.0.iter().rev() {
        if !dn.is_empty() {
            dn.push(',');
        }
        for (index, attribute) in rdn.0.iter().enumerate() {
            if index > 0 {
                dn.push('+');
            }
            let keyword = keyword(&attribute.oid);
            dn.push_str(keyword.unwrap_or(&attribute.oid.to_string()));
            dn.push('=');
            // RFC 2253 §2.4: a type in dotted form has its value in hex.
            let text = keyword.and_then(|_| {
                directory_string(
                    x509_cert::der::Tagged::tag(&attribute.value),
                    attribute.value.value(),
                )
            });
            match text {
                Some(text) => escape_value(&text, &mut dn),
                None => {
                    let der = attribute
                        .value
                        .to_der()
                        .map_err(|e| format!("a subject attribute does not encode: {e}"))?;
                    dn.push('#');
                    for byte in der {
                        let _ = write!(dn, "{byte:02x}");
                    }
                }
            }
        }
    }
    Ok(dn)
}

fn keyword(oid: &ObjectIdentifier) -> Option<&'static str> {
    let dotted = oid.to_string();
    RFC2253_KEYWORDS
        .iter()
        .find(|(known, _)| *known == dotted)
        .map(|(_, keyword)| *keyword)
}

/// The text of a string-typed attribute value; None for any other type.
fn directory_string(tag: Tag, bytes: &[u8]) -> Option<String> {
    match tag {
        Tag::Utf8String | Tag::PrintableString | Tag::Ia5String | Tag::VisibleString => {
            std::str::from_utf8(bytes).ok().map(str::to_string)
        }
        // Latin-1, as Java reads it.
        Tag::TeletexString => Some(bytes.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// RFC 2253 §2.4: `,+"\<>;` escaped anywhere, `#` and space at the start and
/// space at the end.
fn escape_value(value: &str, out: &mut String) {
    let last = value.chars().count().saturating_sub(1);
    for (index, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (index == 0 && (c == '#' || c == ' '))
            || (index == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
}

/// Kafka's `ssl.principal.mapping.rules`, parsed.
#[derive(Clone, Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Clone, Debug)]
enum Rule {
    Default,
    Replace {
        /// The pattern anchored to the whole DN.
        pattern: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

impl Default for PrincipalMapper {
    /// `DEFAULT`: the DN as it is.
    fn default() -> PrincipalMapper {
        PrincipalMapper {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapper {
    /// Parses a rule list; the error names the rule that is wrong.
    pub fn parse(rules: &str) -> Result<PrincipalMapper, String> {
        let mut parsed = Vec::new();
        let mut rest = rules.trim();
        while !rest.is_empty() {
            let (rule, after) = if let Some(after) = rest.strip_prefix("DEFAULT") {
                (Rule::Default, after)
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after)
                    .ok_or_else(|| format!("rule '{rest}' has no '/' after its pattern"))?;
                let (replacement, after) = until_slash(after)
                    .ok_or_else(|| format!("rule '{rest}' has no '/' after its replacement"))?;
                let (case, after) = match after.chars().next() {
                    Some('L') => (Case::Lower, &after[1..]),
                    Some('U') => (Case::Upper, &after[1..]),
                    _ => (Case::Keep, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("rule '{rest}': its pattern does not compile: {e}"))?;
                (
                    Rule::Replace {
                        pattern,
                        replacement: replacement.to_string(),
                        case,
                    },
                    after,
                )
            } else {
                return Err(format!(
                    "'{rest}' is neither DEFAULT nor RULE:pattern/replacement/[LU]"
                ));
            };
            parsed.push(rule);
            let after = after.trim_start();
            rest = match after.strip_prefix(',') {
                Some(next) => next.trim_start(),
                None if after.is_empty() => after,
                None => return Err(format!("unexpected '{after}' after a rule")),
            };
        }
        if parsed.is_empty() {
            return Ok(PrincipalMapper::default());
        }
        Ok(PrincipalMapper { rules: parsed })
    }

    /// The principal of a client certificate (DER): `User:` and its mapped
    /// subject DN.
    pub fn principal(&self, certificate_der: &[u8]) -> Result<super::Principal, String> {
        let dn = subject_dn(certificate_der)?;
        self.map(&dn).map(super::Principal::user)
    }

    /// The principal name of `dn`: the first rule that applies; an error when
    /// none does.
    pub fn map(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace {
                    pattern,
                    replacement,
                    case,
                } => {
                    let Some(groups) = pattern.captures(dn) else {
                        continue;
                    };
                    let name = expand(replacement, &groups);
                    return Ok(match case {
                        Case::Keep => name,
                        Case::Lower => name.to_lowercase(),
                        Case::Upper => name.to_uppercase(),
                    });
                }
            }
        }
        Err(format!(
            "no ssl.principal.mapping.rules rule applies to {dn}"
        ))
    }
}

/// The text up to the first `/` not escaped by a backslash, and what follows
/// that `/`.
fn until_slash(text: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '/' => return Some((&text[..index], &text[index + 1..])),
            _ => {}
        }
    }
    None
}

/// Java's replacement syntax, as Kafka uses it: `\x` is `x`; `$n` is group n,
/// taking as many digits as still name a group; a `$n` past the last group is
/// literal.
fn expand(replacement: &str, groups: &regex::Captures<'_>) -> String {
    let group_count = groups.len() - 1;
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '$' => {
                let first = chars.peek().and_then(|d| d.to_digit(10));
                match first {
                    Some(digit) if digit as usize <= group_count && digit > 0 => {
                        chars.next();
                        let mut number = digit as usize;
                        while let Some(next) = chars.peek().and_then(|d| d.to_digit(10)) {
                            let longer = number * 10 + next as usize;
                            if longer > group_count {
                                break;
                            }
                            number = longer;
                            chars.next();
                        }
                        out.push_str(groups.get(number).map_or("", |m| m.as_str()));
                    }
                    _ => out.push('$'),
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_keeps_the_dn() {
        let mapper = PrincipalMapper::parse("DEFAULT").expect("rules");
        assert_eq!(mapper.map("CN=a,O=b").expect("mapped"), "CN=a,O=b");
        let mapper = PrincipalMapper::parse("").expect("rules");
        assert_eq!(mapper.map("CN=a").expect("mapped"), "CN=a");
    }

    /// The examples of Kafka's documentation of `ssl.principal.mapping.rules`
    /// and its SslPrincipalMapper tests.
    #[test]
    fn rules_map_as_kafkas_documentation_shows() {
        let mapper = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        )
        .expect("rules");
        assert_eq!(
            mapper
                .map("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US")
                .expect("mapped"),
            "kafka-server1"
        );
        assert_eq!(
            mapper
                .map("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US")
                .expect("mapped"),
            "duke@javasoft"
        );
        assert_eq!(
            mapper.map("cn=Duke,ou=JavaSoft").expect("mapped"),
            "duke",
            "the third rule, lower-cased"
        );
        assert_eq!(mapper.map("OU=x").expect("mapped"), "OU=x", "DEFAULT");
    }

    #[test]
    fn upper_case_escapes_and_groups_past_the_last_are_literal() {
        let mapper = PrincipalMapper::parse("RULE:^CN=(.*)$/$1$2/U").expect("rules");
        assert_eq!(mapper.map("CN=abc").expect("mapped"), "ABC$2");
        let mapper = PrincipalMapper::parse(r"RULE:^CN=([^,]*)\/x$/\$$1/").expect("rules");
        assert_eq!(mapper.map("CN=a/x").expect("mapped"), "$a");
        // $12 with one group is group 1 then a literal 2.
        let mapper = PrincipalMapper::parse("RULE:^CN=(.*)$/$12/").expect("rules");
        assert_eq!(mapper.map("CN=z").expect("mapped"), "z2");
    }

    #[test]
    fn no_rule_applying_is_an_error_and_bad_rules_are_named() {
        let mapper = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/").expect("rules");
        assert!(mapper.map("OU=x").is_err());
        let error = PrincipalMapper::parse("RULE:^CN=(.*$/$1/").expect_err("bad pattern");
        assert!(error.contains("does not compile"), "{error}");
        let error = PrincipalMapper::parse("RULE:abc").expect_err("no slash");
        assert!(error.contains("'/'"), "{error}");
        let error = PrincipalMapper::parse("DEFAULTS").expect_err("junk");
        assert!(error.contains("unexpected"), "{error}");
        let error = PrincipalMapper::parse("NOPE").expect_err("junk");
        assert!(error.contains("neither"), "{error}");
    }

    #[test]
    fn a_certificates_subject_reads_as_javas_rfc_2253_name() {
        use rcgen::{CertificateParams, DnType, DnValue, KeyPair};
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        // rcgen writes the common name first, then the others in order.
        params.distinguished_name.push(DnType::CountryName, "US");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Acme, Inc.");
        params
            .distinguished_name
            .push(DnType::OrganizationalUnitName, "eng");
        params.distinguished_name.push(
            DnType::CommonName,
            DnValue::PrintableString("client-1".try_into().expect("printable")),
        );
        params.distinguished_name.push(
            DnType::CustomDnType(vec![1, 2, 840, 113549, 1, 9, 1]),
            DnValue::Ia5String("a@b.c".try_into().expect("ia5")),
        );
        let cert = params.self_signed(&key).expect("certificate");
        let dn = subject_dn(cert.der()).expect("subject");
        assert_eq!(
            dn,
            "1.2.840.113549.1.9.1=#16056140622e63,OU=eng,O=Acme\\, Inc.,C=US,CN=client-1"
        );
        let mapper =
            PrincipalMapper::parse("RULE:^.*OU=([^,]+),.*CN=([^,]+)$/$2@$1/U").expect("rules");
        assert_eq!(mapper.map(&dn).expect("mapped"), "CLIENT-1@ENG");
        assert!(subject_dn(b"not a certificate").is_err());
    }

    #[test]
    fn values_are_escaped_as_rfc_2253_says() {
        let mut out = String::new();
        escape_value("#a,b+c \"d\" ", &mut out);
        assert_eq!(out, "\\#a\\,b\\+c \\\"d\\\"\\ ");
    }
}
