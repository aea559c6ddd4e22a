//! The one forwarding pipeline every endpoint that serves resources shares:
//! a request is read in full with kube-apiserver's rules
//! ([`request::ApiRequest`]), sent as what bindery encoded, and answered
//! by the one store ([`store::Store`]) with what the endpoint's scope, its
//! [`answer::View`], made of the upstream's answer or watch stream
//! ([`watch`]), in the representation the caller negotiated ([`encode`]).
//! What differs between endpoints (whose objects, which upstream, which
//! names) is the scope and the upstream given to the store.

pub mod answer;
pub mod encode;
pub mod request;
pub mod store;
pub mod watch;
