//! One app cluster, several providers of the same group: `bindery route`
//! runs in (or beside) the app cluster as the aggregated API server of the
//! bound group/versions and sends each request to the provider that owns
//! it: a namespace belongs to one provider ([`routes`]), reads across
//! namespaces ask every provider and are answered as one list or one watch
//! ([`merge`]) whose resourceVersion holds one version per provider
//! ([`version`]). Each provider is reached at its bindery's consumer
//! endpoint with the consumer's own credential ([`router`]); the app
//! cluster's users are authenticated (its front proxy) and authorized
//! (a SubjectAccessReview in the app cluster) by the router. A list across
//! providers is paged with tokens of the router's own ([`pages`]); a
//! namespace moves from one provider to another with [`relocate`]
//! ([`copy`] is what it writes); a provider whose schema would break a
//! consumer of the default provider's is refused at the start and held
//! while it runs ([`schemas`]), which it tells in Events ([`events`]).
//! The router points the app cluster's
//! APIServices at itself when asked ([`registration`]).

mod answers;
pub mod copy;
pub mod events;
pub mod merge;
mod merged;
pub mod pages;
pub mod registration;
pub mod relocate;
mod requests;
pub mod router;
pub mod routes;
mod schema_reads;
pub mod schemas;
pub mod serve;
pub mod version;
