//! Who is on the other end of a connection: Kafka's principals, read from a
//! client certificate (`ssl_principal`) or proven by a SASL exchange (`sasl`,
//! with its mechanisms `plain` and `scram`).
//!
//! Pure code: no sockets, no metadata, no clock of its own. The server hands
//! it certificates and tokens, the metadata image hands it credentials, and it
//! answers with principals, challenges and failures. Invariant: a principal
//! other than ANONYMOUS exists only after a certificate chain rustls verified
//! or a SASL exchange that checked a credential.

pub mod acl;
pub mod oauthbearer;
pub mod plain;
pub mod sasl;
pub mod scram;
pub mod scram_client;
pub mod ssl_principal;
#[cfg(test)]
pub(crate) mod test_certs;
pub mod tls;

use std::fmt;

/// Kafka's KafkaPrincipal: a type ("User" for every principal a broker
/// builds) and a name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    pub principal_type: String,
    pub name: String,
}

/// The principal type Kafka gives users, certificate subjects and SASL names.
pub const USER_TYPE: &str = "User";

/// The name of the principal of a connection nothing authenticated (Kafka's
/// `KafkaPrincipal.ANONYMOUS`).
pub const ANONYMOUS_NAME: &str = "ANONYMOUS";

impl Principal {
    /// `User:name`.
    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            principal_type: USER_TYPE.to_string(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`: a PLAINTEXT connection, or an SSL one without a
    /// client certificate.
    pub fn anonymous() -> Principal {
        Principal::user(ANONYMOUS_NAME)
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}
