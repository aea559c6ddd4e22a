//! What the router tells the app cluster's users about its providers'
//! schemas, as Events on the APIServices it serves (`kubectl describe
//! apiservice v1.<group>` shows them): a provider refused at the start or
//! held while it runs, and every provider compatible again. The app
//! cluster has no bind object of the router's to carry a condition, so the
//! Events, the refusal's message and the router's log say why.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// Reasons of the router's Events.
pub const REFUSED: &str = "ProviderSchemaIncompatible";
pub const HELD: &str = "ProviderHeld";
pub const COMPATIBLE: &str = "ProvidersCompatible";

/// The longest note an Event takes (events.k8s.io: 1 kB).
const LONGEST_NOTE: usize = 1024;

/// Publishes the router's Events on the APIServices of `api_services`.
pub struct Teller {
    recorder: Recorder,
    api_services: Vec<String>,
}

impl Teller {
    pub fn new(app: kube::Client, api_services: Vec<String>) -> Self {
        let reporter = Reporter {
            controller: "bindery-route".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(app, reporter),
            api_services,
        }
    }

    /// A warning with `reason` saying `what`, on every APIService.
    pub async fn warn(&self, reason: &str, what: &str) {
        self.publish(EventType::Warning, reason, what).await;
    }

    /// A normal Event with `reason` saying `what`, on every APIService.
    pub async fn tell(&self, reason: &str, what: &str) {
        self.publish(EventType::Normal, reason, what).await;
    }

    async fn publish(&self, type_: EventType, reason: &str, what: &str) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note(what)),
            action: "Route".into(),
            secondary: None,
        };
        for name in &self.api_services {
            let reference = ObjectReference {
                api_version: Some("apiregistration.k8s.io/v1".into()),
                kind: Some("APIService".into()),
                name: Some(name.clone()),
                ..Default::default()
            };
            if let Err(error) = self.recorder.publish(&event, &reference).await {
                tracing::warn!(apiservice = %name, %error, "an Event could not be written");
            }
        }
    }
}

/// `what`, cut to an Event's longest note at a character boundary.
fn note(what: &str) -> String {
    if what.len() <= LONGEST_NOTE {
        return what.to_string();
    }
    let mut end = LONGEST_NOTE - '…'.len_utf8();
    while !what.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &what[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_note_is_cut_within_an_events_limit() {
        assert_eq!(note("short"), "short");
        let long = "é".repeat(1000);
        let cut = note(&long);
        assert!(cut.len() <= LONGEST_NOTE, "{}", cut.len());
        assert!(cut.ends_with('…'));
    }
}
