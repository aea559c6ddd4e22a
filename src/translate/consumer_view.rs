//! A consumer's view of one bound resource: the provider's objects the
//! consumer's export made, in the consumer's namespaces and names, without
//! bindery's labels. It is the forwarding store's scope for the consumer
//! ([`BoundView`]), and, as a [`Translation`], what the watch cache applies
//! itself to the objects it keeps (data, not a callback). Pure.

use super::BoundResource;
use super::continue_token::ContinueTokens;
use super::identity::RESERVED_LABEL_PREFIX;
use super::objects::object_up;
use super::response::text_up;
use crate::forward::answer::{View, Visibility};
use serde_json::Value;
use std::sync::Arc;

/// The consumer's view of one bound resource.
#[derive(Clone)]
pub struct BoundView {
    pub bound: BoundResource,
    pub tokens: Arc<ContinueTokens>,
    /// What continue tokens are sealed to.
    pub scope: String,
}

impl View for BoundView {
    fn object_up(&self, object: &mut Value) -> Visibility {
        object_up(&self.bound, object, true)
    }

    fn scale_up(&self, scale: &mut Value) -> Visibility {
        object_up(&self.bound, scale, false)
    }

    fn text_up(&self, text: &str) -> String {
        text_up(&self.bound, text)
    }

    /// A cell that would still show a reserved label (a printer column
    /// over the labels) is left empty.
    fn cell_up(&self, text: &str) -> String {
        let text = self.text_up(text);
        if text.contains(RESERVED_LABEL_PREFIX) {
            String::new()
        } else {
            text
        }
    }

    fn continue_up(&self, token: &str) -> String {
        self.tokens.seal(&self.scope, token)
    }
}

/// How one consumer sees the objects of one resource, as the watch cache
/// keeps it: the consumer's view, shared, and its key. Equal keys translate
/// alike, so what one made may be reused for another.
#[derive(Clone)]
pub struct Translation {
    key: u64,
    view: Arc<BoundView>,
}

impl Translation {
    pub fn of(view: Arc<BoundView>) -> Self {
        Self {
            key: view.bound.translation_key(),
            view,
        }
    }

    pub fn key(&self) -> u64 {
        self.key
    }

    /// A provider object's JSON as the consumer gets it; `None`: not the
    /// consumer's (or not an object).
    pub fn item(&self, provider: &[u8]) -> Option<Vec<u8>> {
        let mut object: Value = crate::deep::from_slice(provider).ok()?;
        match object_up(&self.view.bound, &mut object, true) {
            Visibility::Visible => serde_json::to_vec(&object).ok(),
            Visibility::Hidden => None,
        }
    }

    /// The continue token the consumer is given for the provider's.
    pub fn continue_token(&self, token: &str) -> String {
        self.view.continue_up(token)
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::translate::binding::fixtures::widgets;
    use crate::translate::continue_token::ContinueTokens;

    /// Consumer `c1`'s widgets (`translate::binding::fixtures::widgets`),
    /// its namespace `mine` the provider's `a`, with `more` other
    /// namespaces mapped (each a new translation key).
    pub fn mine(more: usize) -> Translation {
        let mut bound = widgets();
        bound.namespaces.insert("mine", "a");
        for n in 0..more {
            bound
                .namespaces
                .insert(format!("other-{n}"), format!("p-other-{n}"));
        }
        Translation::of(Arc::new(BoundView {
            bound,
            tokens: Arc::new(ContinueTokens::new([7; 32])),
            scope: "test".into(),
        }))
    }

    /// `object` made consumer `c1`'s, as its export stores it.
    pub fn stamped(mut object: Value) -> Value {
        if let Some(metadata) = object["metadata"].as_object_mut() {
            super::super::objects::stamp_labels(&widgets(), metadata);
        }
        object
    }
}
