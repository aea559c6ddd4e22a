//! A consumer's view of one bound resource, as the forwarding pipeline's
//! filter: the provider's objects the consumer's export made, in the
//! consumer's namespaces and names, without bindery's labels.

use crate::forward::answer::{View, Visibility};
use crate::translate::BoundResource;
use crate::translate::continue_token::ContinueTokens;
use crate::translate::identity::RESERVED_LABEL_PREFIX;
use crate::translate::objects::object_up;
use crate::translate::response::text_up;
use serde_json::Value;
use std::sync::Arc;

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
