//! Certificates made in a test: a fresh CA, and the certificates it signs.

#![allow(clippy::unwrap_used)]

use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair};

/// A CA of a test's own: its key and its self-signed certificate.
pub struct TestCa {
    key: KeyPair,
    pub cert: Certificate,
}

impl TestCa {
    /// A fresh CA whose common name is `name`.
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        TestCa { key, cert }
    }

    /// A fresh key and, signed by this CA, its certificate for the name
    /// `subject_alt_name`, with the common name `common_name` if any.
    pub fn sign(
        &self,
        subject_alt_name: &str,
        common_name: Option<&str>,
    ) -> (KeyPair, Certificate) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![subject_alt_name.to_string()]).unwrap();
        if let Some(common_name) = common_name {
            params
                .distinguished_name
                .push(DnType::CommonName, common_name);
        }
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (key, cert)
    }
}
