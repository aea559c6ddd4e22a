//! Binding an app cluster to a provider. The provider side is bindery's
//! `/bind` endpoints ([`server`], routes and their credentials in
//! [`routes`]): binders show provider credentials, checked by the
//! authentication layer, and need the `bind` verb on a template ([`binder`]);
//! once an app cluster is registered, only who proves control of it changes
//! that ([`proof`]), and what is recorded of its trust is read from it
//! ([`published`]); the interactive bind runs through a browser session
//! ([`sessions`], [`page`]). The app-cluster side is `bindery bind`
//! ([`cli`]), which writes the objects [`app_objects`] describes. [`wire`]
//! holds the messages between them.

pub mod aggregator_wait;
pub mod app_account;
pub mod app_objects;
pub mod app_writes;
pub mod binder;
pub mod cli;
pub mod connect;
pub mod konnector;
pub mod kubeconfig_check;
pub mod offers;
pub mod page;
pub mod proof;
pub mod published;
pub mod routes;
pub mod server;
pub mod sessions;
pub mod unbind;
pub mod wire;
