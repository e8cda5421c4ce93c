//! The roots a function trusts for TLS (DynamoDB, Stripe): Mozilla's root certificates
//! as the `webpki-root-certs` crate compiles them in, not the system's certificate files.
//!
//! Reading the system's roots is most of a cold start's CPU on a machine whose
//! environment names a bundle and a directory of the same certificates (3 to 9 ms here,
//! README "Cold starts"), and a function's first request would wait for it. The
//! compiled-in roots (127 KB of DER) cost no file, and the SDK turns them into its
//! trust store in about a millisecond; they are Mozilla's, the set most TLS clients
//! trust, and change when `Cargo.lock`'s `webpki-root-certs` is updated.
//! Every AWS endpoint chains to Amazon Trust Services and Stripe's API to DigiCert, both
//! in the set (a test checks it). `cairn-admin`, on an operator's machine, keeps the
//! system's roots (a company's own CA, a TLS-inspecting proxy).

use aws_smithy_http_client::tls::TrustStore;
pub use webpki_root_certs::TLS_SERVER_ROOT_CERTS as ROOTS;

/// A trust store of [`ROOTS`] alone, for the AWS SDK's HTTPS client (which takes
/// certificates as PEM, and decodes them each time it makes a connector: once per
/// client, on its first call).
#[must_use]
pub fn trust_store() -> TrustStore {
    TrustStore::empty().with_native_roots(false).with_pem_certificate(pem(ROOTS))
}

/// `certificates` as one PEM document.
fn pem(certificates: &[impl AsRef<[u8]>]) -> String {
    let mut out = String::with_capacity(certificates.iter().map(|der| der.as_ref().len() * 4 / 3 + 80).sum());
    for der in certificates {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let encoded = aws_smithy_types::base64::encode(der.as_ref());
        let mut rest = encoded.as_str();
        while !rest.is_empty() {
            // Base64 is ASCII: any byte index is a character boundary.
            let (line, next) = rest.split_at(rest.len().min(64));
            out.push_str(line);
            out.push('\n');
            rest = next;
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The certificates of a PEM document, decoded.
    fn decoded(pem: &str) -> Vec<Vec<u8>> {
        pem.split("-----END CERTIFICATE-----")
            .filter_map(|block| block.split("-----BEGIN CERTIFICATE-----\n").nth(1))
            .map(|body| aws_smithy_types::base64::decode(body.replace('\n', "")).expect("base64"))
            .collect()
    }

    #[test]
    fn every_root_goes_to_the_sdk_and_those_aws_and_stripe_chain_to_are_among_them() {
        let certificates = decoded(&pem(ROOTS));
        let roots: Vec<&[u8]> = ROOTS.iter().map(AsRef::as_ref).collect();
        assert_eq!(certificates, roots);
        assert!(ROOTS.len() > 100, "Mozilla's set has over 100 roots, got {}", ROOTS.len());
        // Amazon Trust Services (every AWS endpoint) and DigiCert (api.stripe.com), by
        // the subject's common name as the certificate spells it.
        for name in
            ["Amazon Root CA 1", "Amazon Root CA 2", "Amazon Root CA 3", "Amazon Root CA 4", "DigiCert Global Root G2"]
        {
            let found = roots.iter().any(|der| der.windows(name.len()).any(|window| window == name.as_bytes()));
            assert!(found, "{name} is not trusted");
        }
    }
}
