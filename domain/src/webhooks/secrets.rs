//! Endpoint secrets: made, sealed for storage, and used to sign (Standard Webhooks).
//!
//! A secret is `whsec_` and the base64 of 32 random bytes, shown to the tenant once
//! (creation, rotation). It is stored sealed with AES-256-GCM under the service's key
//! (`WEBHOOK_SECRETS_KEY`: base64 of 32 bytes, from configuration), with the tenant and
//! endpoint as associated data: a read of the table alone signs nothing, and a sealed
//! secret copied to another endpoint does not open. Secrets are never logged.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use sha2::Sha256;

/// The prefix of every endpoint secret (Standard Webhooks' and Svix's).
pub const SECRET_PREFIX: &str = "whsec_";

/// A secret as the tenant sees it once: `whsec_…`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Why sealing or opening failed.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// `WEBHOOK_SECRETS_KEY` is unset or not base64 of 32 bytes.
    #[error("WEBHOOK_SECRETS_KEY is not configured (base64 of 32 random bytes)")]
    NotConfigured,
    /// No randomness.
    #[error("no randomness for a webhook secret")]
    NoRandomness,
    /// A sealed secret that does not open under this key for this endpoint.
    #[error("a sealed webhook secret does not open (wrong key or tampered)")]
    Sealed,
}

impl Secret {
    /// A new random secret.
    ///
    /// # Errors
    /// [`SecretError::NoRandomness`].
    pub fn generate() -> Result<Self, SecretError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|_| SecretError::NoRandomness)?;
        Ok(Self(format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))))
    }

    /// The secret as text, `whsec_…`.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The HMAC key: the bytes the base64 after `whsec_` stands for.
    fn key_bytes(&self) -> Vec<u8> {
        let encoded = self.0.strip_prefix(SECRET_PREFIX).unwrap_or(&self.0);
        STANDARD.decode(encoded).unwrap_or_else(|_| encoded.as_bytes().to_vec())
    }

    /// The Standard Webhooks signature of a message: `v1,` and the base64 of
    /// HMAC-SHA256 over `{id}.{timestamp}.{body}`.
    #[must_use]
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        // HMAC takes a key of any length.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key_bytes()) else {
            unreachable!("HMAC accepts every key length")
        };
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The service's sealing key.
#[derive(Clone)]
pub struct SecretBox {
    key: std::sync::Arc<LessSafeKey>,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(…)")
    }
}

impl SecretBox {
    /// The key of `WEBHOOK_SECRETS_KEY`.
    ///
    /// # Errors
    /// [`SecretError::NotConfigured`].
    pub fn from_env() -> Result<Self, SecretError> {
        Self::from_base64(&std::env::var("WEBHOOK_SECRETS_KEY").unwrap_or_default())
    }

    /// The key whose base64 is `encoded` (32 bytes).
    ///
    /// # Errors
    /// [`SecretError::NotConfigured`].
    pub fn from_base64(encoded: &str) -> Result<Self, SecretError> {
        let bytes = STANDARD.decode(encoded.trim()).map_err(|_| SecretError::NotConfigured)?;
        let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| SecretError::NotConfigured)?;
        Ok(Self { key: std::sync::Arc::new(LessSafeKey::new(key)) })
    }

    /// `secret` sealed for endpoint `owner` (tenant and endpoint ids): base64 of a
    /// random nonce and the ciphertext with its tag.
    ///
    /// # Errors
    /// [`SecretError::NoRandomness`].
    pub fn seal(&self, secret: &Secret, owner: &str) -> Result<String, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|_| SecretError::NoRandomness)?;
        let mut data = secret.0.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(owner.as_bytes()), &mut data)
            .map_err(|_| SecretError::Sealed)?;
        let mut out = nonce.to_vec();
        out.extend(data);
        Ok(STANDARD.encode(out))
    }

    /// The secret `sealed` for `owner`.
    ///
    /// # Errors
    /// [`SecretError::Sealed`] when it does not open (another key, owner or tampering).
    pub fn open(&self, sealed: &str, owner: &str) -> Result<Secret, SecretError> {
        let bytes = STANDARD.decode(sealed).map_err(|_| SecretError::Sealed)?;
        if bytes.len() < NONCE_LEN {
            return Err(SecretError::Sealed);
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretError::Sealed)?;
        let mut data = data.to_vec();
        let plain =
            self.key.open_in_place(nonce, Aad::from(owner.as_bytes()), &mut data).map_err(|_| SecretError::Sealed)?;
        String::from_utf8(plain.to_vec()).map(Secret).map_err(|_| SecretError::Sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SecretBox {
        SecretBox::from_base64(&STANDARD.encode([7u8; 32])).expect("key")
    }

    #[test]
    fn a_sealed_secret_opens_only_for_its_endpoint_under_its_key() {
        let secret = Secret::generate().expect("secret");
        assert!(secret.expose().starts_with("whsec_"));
        let sealed = key().seal(&secret, "ten_a/we_1").expect("seal");
        assert!(!sealed.contains(secret.expose().trim_start_matches("whsec_")), "stored sealed");
        assert_eq!(key().open(&sealed, "ten_a/we_1").expect("open"), secret);
        assert!(key().open(&sealed, "ten_b/we_1").is_err(), "another owner");
        let other = SecretBox::from_base64(&STANDARD.encode([8u8; 32])).expect("key");
        assert!(other.open(&sealed, "ten_a/we_1").is_err(), "another key");
        assert!(SecretBox::from_base64("c2hvcnQ=").is_err(), "16 bytes is no AES-256 key");
        assert!(SecretBox::from_base64("").is_err());
    }

    #[test]
    fn the_signature_is_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification (its reference libraries'
        // test vector).
        let secret = Secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned());
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
