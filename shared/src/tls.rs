//! The roots a function trusts for TLS, compiled in rather than read from the system's
//! certificate files.
//!
//! Reading the system's roots is most of a cold start's CPU on a machine whose
//! environment names a bundle and a directory of the same certificates (3 to 9 ms here,
//! docs/benchmarks.md, "Cold starts"), and a function's first request would wait for it. Compiled-in
//! roots cost no file:
//!
//! - DynamoDB: the five roots of Amazon Trust Services ([`AMAZON_TRUST_SERVICES`]), to
//!   which the endpoints of AWS's commercial regions chain (and which Amazon Trust
//!   Services recommends a custom trust store hold, all five). The SDK decodes and
//!   parses its trust store each time it makes a connector, on a client's first call, so
//!   a cold request pays for every root it holds: a first connector took 0.09-0.11 ms
//!   with these five and 0.8-1.4 ms with Mozilla's 118 (docs/benchmarks.md, "Cold starts"). The five
//!   are a fixed file: they change only when it is edited, and the test below fails
//!   when Mozilla's set, on a `cargo update`, no longer holds one of them. Should AWS
//!   move DynamoDB to a root outside them, every call fails (503) until a function is
//!   rebuilt with it: the price of the smaller set.
//! - Stripe (the billing function) and webhook receivers (the dispatcher): Mozilla's
//!   roots ([`ROOTS`], as the `webpki-root-certs` crate compiles them in, changing with
//!   `Cargo.lock`), since neither promises its CA.
//!
//! `cairn-admin`, on an operator's machine, keeps the system's roots (a company's own CA,
//! a TLS-inspecting proxy).

use aws_smithy_http_client::tls::TrustStore;
pub use webpki_root_certs::TLS_SERVER_ROOT_CERTS as ROOTS;

/// Amazon Root CA 1 to 4 and Starfield Services Root Certificate Authority - G2 (which
/// cross-signs the Amazon roots for older clients), as PEM: the roots Amazon Trust
/// Services lists (amazontrust.com/repository).
pub const AMAZON_TRUST_SERVICES: &str = include_str!("amazon-trust-services.pem");

/// A trust store of [`AMAZON_TRUST_SERVICES`] alone, for the AWS SDK's HTTPS client
/// (which takes certificates as PEM, and decodes and parses them each time it makes a
/// connector: once per client, on its first call).
#[must_use]
pub fn trust_store() -> TrustStore {
    TrustStore::empty().with_native_roots(false).with_pem_certificate(AMAZON_TRUST_SERVICES)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The certificates of a PEM document, decoded.
    fn decoded(pem: &str) -> Vec<Vec<u8>> {
        pem.split("-----END CERTIFICATE-----")
            .filter_map(|block| block.split("-----BEGIN CERTIFICATE-----").nth(1))
            .map(|body| aws_smithy_types::base64::decode(body.replace(['\r', '\n'], "")).expect("base64"))
            .collect()
    }

    /// Whether `der` holds `name` (a subject's common name as the certificate spells it).
    fn names(der: &[u8], name: &str) -> bool {
        der.windows(name.len()).any(|window| window == name.as_bytes())
    }

    #[test]
    fn dynamodb_is_trusted_through_amazon_trust_services_roots_that_mozilla_trusts() {
        let certificates = decoded(AMAZON_TRUST_SERVICES);
        let names_in_order = [
            "Amazon Root CA 1",
            "Amazon Root CA 2",
            "Amazon Root CA 3",
            "Amazon Root CA 4",
            "Starfield Services Root Certificate Authority - G2",
        ];
        assert_eq!(certificates.len(), names_in_order.len());
        for (der, name) in certificates.iter().zip(names_in_order) {
            assert!(names(der, name), "expected {name}");
            assert!(ROOTS.iter().any(|root| root.as_ref() == der.as_slice()), "{name} is not one of Mozilla's roots");
        }
    }

    #[test]
    fn stripe_is_trusted_through_mozillas_roots() {
        assert!(ROOTS.len() > 100, "Mozilla's set has over 100 roots, got {}", ROOTS.len());
        assert!(ROOTS.iter().any(|root| names(root, "DigiCert Global Root G2")), "api.stripe.com's root");
    }
}
