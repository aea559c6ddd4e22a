//! The resourceVersion of a read across providers: one version per provider,
//! in the router's order of providers, written as one string, the versions
//! joined by `.` (`3051.882`). A client resumes a merged list or watch with
//! it, and each provider is asked from its own version: nothing is missed
//! or seen twice. A provider's own version (digits) names one provider's
//! state only; a merged read cannot resume from it. Pure.

use crate::status::ApiError;

/// One version per provider, in the router's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions(Vec<String>);

/// What a merged read asks for by its `resourceVersion`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Asked {
    /// Unset: the most recent state (a consistent read).
    Latest,
    /// `0`: any state the provider holds.
    Any,
    /// A merged version, each provider from its own.
    Exact(Versions),
}

impl Asked {
    /// The `resourceVersion` a merged read gives provider `index`.
    pub fn of(&self, index: usize) -> &str {
        match self {
            Asked::Latest => "",
            Asked::Any => "0",
            Asked::Exact(versions) => versions.of(index),
        }
    }

    /// What `text` asks for among `providers` providers; a version that is
    /// not one of a merged read (a provider's own, or another router's) is
    /// kube-apiserver's 410 for a version it does not hold, so that the
    /// client lists again.
    pub fn parse(text: &str, providers: usize) -> Result<Self, ApiError> {
        match text {
            "" => Ok(Asked::Latest),
            "0" => Ok(Asked::Any),
            _ => Versions::parse(text, providers)
                .map(Asked::Exact)
                .ok_or_else(|| ApiError::expired(format!("too old resource version: {text}"))),
        }
    }
}

impl Asked {
    /// What a list's `text` and `resourceVersionMatch` (`matching`) ask for
    /// among `providers` providers. A provider's own version (a single
    /// object's) that the list need only be not older than (`NotOlderThan`,
    /// or no match) is answered by every provider's most recent state,
    /// which is newer than anything any of them had written; an exact list
    /// at it is [`Asked::parse`]'s 410.
    pub fn for_list(text: &str, matching: &str, providers: usize) -> Result<Self, ApiError> {
        let not_older = matches!(matching, "" | "NotOlderThan");
        if not_older && text != "0" && is_plain(text) && providers > 1 {
            return Ok(Asked::Latest);
        }
        Asked::parse(text, providers)
    }
}

/// Whether `text` is a provider's own resourceVersion: decimal digits.
fn is_plain(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

impl Versions {
    /// `providers` versions, each `start`.
    pub fn all(start: &str, providers: usize) -> Self {
        Versions(vec![start.to_string(); providers])
    }

    /// The merged version `text` for `providers` providers; `None` unless it
    /// has exactly one plain version per provider.
    pub fn parse(text: &str, providers: usize) -> Option<Self> {
        let parts: Vec<String> = text.split('.').map(str::to_string).collect();
        (parts.len() == providers && parts.iter().all(|part| is_plain(part)))
            .then_some(Versions(parts))
    }

    /// Provider `index`'s version.
    pub fn of(&self, index: usize) -> &str {
        self.0.get(index).map_or("", String::as_str)
    }

    /// Moves provider `index` on to `version`: a provider's own version
    /// only, and never back (a watch's first events, the state it starts
    /// from, come in name order, not in version order).
    pub fn advance(&mut self, index: usize, version: &str) {
        let Some(slot) = self.0.get_mut(index) else {
            return;
        };
        if !is_plain(version) {
            return;
        }
        let newer = !is_plain(slot) || (version.len(), version) > (slot.len(), slot.as_str());
        if newer {
            *slot = version.to_string();
        }
    }

    /// The one string a client is given.
    pub fn text(&self) -> String {
        self.0.join(".")
    }
}

/// The version a request routed to provider `index` gives it: the
/// provider's part of a merged version, else the version as it came (a
/// provider's own, or one it will refuse as kube-apiserver would).
pub fn routed(text: &str, index: usize, providers: usize) -> String {
    match Versions::parse(text, providers) {
        Some(versions) if providers > 1 => versions.of(index).to_string(),
        _ => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_merged_version_names_each_providers_own() {
        let versions = Versions::parse("3051.882", 2).expect("two plain versions");
        assert_eq!((versions.of(0), versions.of(1)), ("3051", "882"));
        assert_eq!(versions.text(), "3051.882");
        assert_eq!(routed("3051.882", 1, 2), "882");
        assert_eq!(
            routed("77", 1, 2),
            "77",
            "a provider's own version goes as it came"
        );
    }

    #[test]
    fn a_version_no_merged_read_gave_is_expired() {
        for text in ["77", "1.2.3", "1.", ".1", "a.b", "1.-2"] {
            let error = Asked::parse(text, 2).expect_err(text);
            assert_eq!((error.code, error.reason), (410, "Expired"), "{text}");
        }
        assert_eq!(Asked::parse("", 2), Ok(Asked::Latest));
        // A single object's version: a list not older than it is every
        // provider's latest; an exact list at it cannot be.
        assert_eq!(Asked::for_list("353", "NotOlderThan", 2), Ok(Asked::Latest));
        assert_eq!(Asked::for_list("353", "", 2), Ok(Asked::Latest));
        assert_eq!(
            Asked::for_list("353", "Exact", 2).map_err(|e| e.code),
            Err(410)
        );
        assert_eq!(Asked::for_list("0", "", 2), Ok(Asked::Any));
        assert_eq!(
            Asked::for_list("5.6", "NotOlderThan", 2).map(|a| a.of(1).to_string()),
            Ok("6".to_string())
        );
        assert_eq!(Asked::parse("0", 2), Ok(Asked::Any));
        assert_eq!(
            Asked::parse("5.6", 2).map(|a| a.of(1).to_string()),
            Ok("6".into())
        );
    }

    #[test]
    fn a_provider_never_goes_back() {
        let mut versions = Versions::all("0", 2);
        versions.advance(0, "120");
        versions.advance(0, "99");
        versions.advance(1, "1000");
        versions.advance(1, "not a version");
        assert_eq!(versions.text(), "120.1000");
    }

    proptest! {
        #[test]
        fn versions_read_back_as_written(parts in proptest::collection::vec(1u64..u64::MAX, 1..5)) {
            let text = parts.iter().map(u64::to_string).collect::<Vec<_>>().join(".");
            let versions = Versions::parse(&text, parts.len()).expect("plain versions");
            prop_assert_eq!(versions.text(), text);
            for (index, part) in parts.iter().enumerate() {
                prop_assert_eq!(versions.of(index), part.to_string());
            }
        }

        #[test]
        fn any_text_is_read_without_panic(text in ".{0,40}", providers in 1usize..4) {
            let _ = Asked::parse(&text, providers);
            let _ = routed(&text, 0, providers);
        }
    }
}
