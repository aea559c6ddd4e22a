//! The key continue tokens are sealed with, shared by every bindery replica
//! that serves the same provider: 32 random bytes in a provider Secret,
//! made by whichever replica starts first. A page's token from one replica
//! then opens on any other, as kube-apiserver's tokens do behind a load
//! balancer.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use ring::rand::{SecureRandom, SystemRandom};

/// The Secret's data key.
const KEY: &str = "key";

/// Where the key is kept: `<namespace>/<name>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySecret {
    pub namespace: String,
    pub name: String,
}

impl std::str::FromStr for KeySecret {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => Ok(Self {
                namespace: namespace.into(),
                name: name.into(),
            }),
            _ => Err(format!("{s:?} is not <namespace>/<name>")),
        }
    }
}

/// The shared key: read from the Secret, or made and stored there when
/// there is none (a replica that loses the race to create it reads the
/// winner's).
pub async fn shared_key(provider: &kube::Client, secret: &KeySecret) -> kube::Result<[u8; 32]> {
    let secrets: Api<Secret> = Api::namespaced(provider.clone(), &secret.namespace);
    for _ in 0..2 {
        if let Some(existing) = secrets.get_opt(&secret.name).await? {
            if let Some(key) = key_of(&existing) {
                return Ok(key);
            }
            return Err(kube::Error::Api(Box::new(kube::core::Status::failure(
                &format!(
                    "Secret {}/{} has no 32-byte {KEY:?}",
                    secret.namespace, secret.name
                ),
                "Invalid",
            ))));
        }
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .expect("the system random source works");
        let made = Secret {
            metadata: ObjectMeta {
                name: Some(secret.name.clone()),
                namespace: Some(secret.namespace.clone()),
                ..ObjectMeta::default()
            },
            data: Some([(KEY.to_string(), ByteString(key.to_vec()))].into()),
            ..Secret::default()
        };
        match secrets.create(&PostParams::default(), &made).await {
            Ok(_) => return Ok(key),
            // Another replica made it first: read theirs.
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(kube::Error::Api(Box::new(kube::core::Status::failure(
        &format!(
            "Secret {}/{} neither reads nor creates",
            secret.namespace, secret.name
        ),
        "Conflict",
    ))))
}

fn key_of(secret: &Secret) -> Option<[u8; 32]> {
    let bytes = &secret.data.as_ref()?.get(KEY)?.0;
    bytes.as_slice().try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_named_namespace_slash_name() {
        assert_eq!(
            "kube-system/bindery-continue-tokens".parse::<KeySecret>(),
            Ok(KeySecret {
                namespace: "kube-system".into(),
                name: "bindery-continue-tokens".into()
            })
        );
        for bad in ["", "x", "/x", "x/", "/"] {
            assert!(bad.parse::<KeySecret>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_32_byte_key_is_taken() {
        let with = |bytes: Vec<u8>| Secret {
            data: Some([(KEY.to_string(), ByteString(bytes))].into()),
            ..Secret::default()
        };
        assert_eq!(key_of(&with(vec![7; 32])), Some([7; 32]));
        assert_eq!(key_of(&with(vec![7; 31])), None);
        assert_eq!(key_of(&Secret::default()), None);
    }
}
