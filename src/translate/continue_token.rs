//! Continue tokens in consumer terms. The provider's token names a provider
//! namespace and object key, so bindery hands out its own: the provider token
//! sealed (ChaCha20-Poly1305) under a server key, bound to the consumer and
//! the resource it was issued for. A token from another consumer or resource,
//! or altered in any way, does not open.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

pub struct ContinueTokens {
    key: LessSafeKey,
    random: SystemRandom,
}

/// Why a continue token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Not raw URL-safe base64; the offset is where Go's decoder stops,
    /// so the message reads as kube-apiserver's does.
    #[error("illegal base64 data at input byte {0}")]
    Encoding(usize),
    #[error("token was not issued for this request")]
    Forged,
}

/// The byte offset Go's `base64.RawURLEncoding` reports for `token`.
fn corrupt_offset(token: &str, error: base64::DecodeError) -> usize {
    use base64::DecodeError::*;
    match error {
        InvalidByte(offset, _) | InvalidLastSymbol(offset, _) => offset,
        // A trailing lone character: Go names the start of its quantum.
        InvalidLength(length) => length.saturating_sub(1),
        InvalidPadding => token.find('=').unwrap_or(0),
    }
}

impl ContinueTokens {
    /// Tokens sealed with `key` (32 bytes). Replicas that share the key accept
    /// each other's tokens.
    pub fn new(key: [u8; 32]) -> Self {
        let key = UnboundKey::new(&CHACHA20_POLY1305, &key).expect("32-byte key");
        Self {
            key: LessSafeKey::new(key),
            random: SystemRandom::new(),
        }
    }

    /// Tokens under a fresh random key.
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .expect("the system random source works");
        Self::new(key)
    }

    /// Seals `provider_token` for the request scope `scope` (consumer,
    /// resource, namespace).
    pub fn seal(&self, scope: &str, provider_token: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system random source works");
        let mut sealed = provider_token.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(scope.as_bytes()),
                &mut sealed,
            )
            .expect("tokens are far below the AEAD length limit");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// Opens a token sealed for `scope`.
    pub fn open(&self, scope: &str, token: &str) -> Result<String, TokenError> {
        let raw = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|e| TokenError::Encoding(corrupt_offset(token, e)))?;
        if raw.len() < NONCE_LEN {
            return Err(TokenError::Forged);
        }
        let (nonce, sealed) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| TokenError::Forged)?;
        let mut sealed = sealed.to_vec();
        let opened = self
            .key
            .open_in_place(nonce, Aad::from(scope.as_bytes()), &mut sealed)
            .map_err(|_| TokenError::Forged)?;
        String::from_utf8(opened.to_vec()).map_err(|_| TokenError::Forged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_scope_binding() {
        let tokens = ContinueTokens::random();
        let token = tokens.seal("c1/widgets/ns", "upstream-token");
        assert!(!token.contains("upstream"));
        assert_eq!(
            tokens.open("c1/widgets/ns", &token).as_deref(),
            Ok("upstream-token")
        );
        assert_eq!(
            tokens.open("c2/widgets/ns", &token),
            Err(TokenError::Forged)
        );
        assert_eq!(
            ContinueTokens::random().open("c1/widgets/ns", &token),
            Err(TokenError::Forged)
        );
        assert_eq!(
            tokens.open("c1/widgets/ns", "%%"),
            Err(TokenError::Encoding(0))
        );
        assert_eq!(tokens.open("c1/widgets/ns", "abc"), Err(TokenError::Forged));
    }

    #[test]
    fn encoding_errors_name_the_offset_go_names() {
        let tokens = ContinueTokens::random();
        for (token, offset) in [("ab$d", 2), ("abcde", 4), ("abcd=", 4), ("a", 0)] {
            assert_eq!(
                tokens.open("s", token),
                Err(TokenError::Encoding(offset)),
                "{token}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn tampered_tokens_never_open(flip in 0usize..64, garbage in "[A-Za-z0-9_-]{0,80}") {
            let tokens = ContinueTokens::new([7; 32]);
            let token = tokens.seal("s", "t");
            let mut bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
            let i = flip % bytes.len();
            bytes[i] ^= 1;
            proptest::prop_assert!(tokens.open("s", &URL_SAFE_NO_PAD.encode(bytes)).is_err());
            let _ = tokens.open("s", &garbage);
        }
    }
}
