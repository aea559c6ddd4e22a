//! One app cluster, several providers of the same group: `bindery route`
//! runs in (or beside) the app cluster as the aggregated API server of the
//! bound group/versions and sends each request to the provider that owns
//! it: a namespace belongs to one provider ([`routes`]), reads across
//! namespaces ask every provider and are answered as one list or one watch
//! ([`merge`]) whose resourceVersion holds one version per provider
//! ([`version`]). Each provider is reached at its bindery's consumer
//! endpoint with the consumer's own credential ([`router`]); the app
//! cluster's users are authenticated (its front proxy) and authorized
//! (a SubjectAccessReview in the app cluster) by the router.

pub mod copy;
pub mod merge;
pub mod pages;
pub mod relocate;
pub mod router;
pub mod routes;
pub mod schemas;
pub mod serve;
pub mod version;
