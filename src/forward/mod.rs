//! The one forwarding pipeline every endpoint that serves resources shares:
//! a request is read in full with kube-apiserver's rules
//! ([`request::ApiRequest`]), sent as what bindery encoded, and answered
//! with what the endpoint's [`answer::View`] made of the upstream's answer,
//! in the representation the caller negotiated ([`encode`]). What differs
//! between endpoints (whose objects, which upstream, which names) is the
//! view and the upstream around it.

pub mod answer;
pub mod encode;
pub mod request;
