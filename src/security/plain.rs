//! SASL PLAIN (RFC 4616) as Kafka reads it: `[authzid] NUL authcid NUL
//! passwd`, an authzid other than the user refused, the password checked
//! against the user's stored SCRAM credential (one store of users).

/// The longest PLAIN token taken.
pub const PLAIN_TOKEN_BYTES_MAX: usize = 4096;

/// A parsed PLAIN token.
#[derive(Debug, PartialEq, Eq)]
pub struct PlainToken {
    pub username: String,
    pub password: String,
}

/// Parses a PLAIN token; the error never names the user.
pub fn parse(token: &[u8]) -> Result<PlainToken, &'static str> {
    if token.len() > PLAIN_TOKEN_BYTES_MAX {
        return Err("token too long");
    }
    let text = std::str::from_utf8(token).map_err(|_| "token is not UTF-8")?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(username), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("token is not authzid NUL username NUL password");
    };
    if username.is_empty() {
        return Err("username not specified");
    }
    if password.is_empty() {
        return Err("password not specified");
    }
    if !authzid.is_empty() && authzid != username {
        return Err("authorization id differs from the user name");
    }
    Ok(PlainToken {
        username: username.to_string(),
        password: password.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_as_kafka_reads_them() {
        assert_eq!(
            parse(b"\0alice\0secret"),
            Ok(PlainToken {
                username: "alice".to_string(),
                password: "secret".to_string()
            })
        );
        assert!(parse(b"alice\0alice\0secret").is_ok());
        assert!(parse(b"bob\0alice\0secret").is_err());
        assert!(parse(b"\0\0secret").is_err());
        assert!(parse(b"\0alice\0").is_err());
        assert!(parse(b"\0alice\0secret\0more").is_err());
        assert!(parse(b"alice secret").is_err());
        assert!(parse(&[0, 0xff, 0, b'x']).is_err());
    }
}
