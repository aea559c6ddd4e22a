//! Browser sessions of the interactive bind: the CLI opens one as the
//! binder; its random id, in the page's URL, lets the browser pick a
//! template for that binder, and carries the CLI's progress back to the
//! page. Kept in memory for a while; a replica restart ends them.

use super::binder::Binder;
use super::wire::SessionState;
use dashmap::DashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a session lives.
pub const LIFETIME: Duration = Duration::from_secs(15 * 60);
/// At most this many live sessions; more are refused.
pub const MAX_SESSIONS: usize = 10_000;

#[derive(Clone, Debug)]
pub struct Session {
    pub binder: Binder,
    pub state: SessionState,
    expires: Instant,
}

#[derive(Clone, Default)]
pub struct Sessions {
    live: Arc<DashMap<String, Session>>,
}

impl Sessions {
    /// A new session for `binder`; `None` when too many are open.
    pub fn open(&self, binder: Binder, now: Instant) -> Option<String> {
        self.live.retain(|_, s| s.expires > now);
        if self.live.len() >= MAX_SESSIONS {
            return None;
        }
        let id = random_id();
        self.live.insert(
            id.clone(),
            Session {
                binder,
                state: SessionState::default(),
                expires: now + LIFETIME,
            },
        );
        Some(id)
    }

    pub fn get(&self, id: &str, now: Instant) -> Option<Session> {
        self.live
            .get(id)
            .filter(|s| s.expires > now)
            .map(|s| s.clone())
    }

    /// Changes a live session's state; false when there is none.
    pub fn update(&self, id: &str, now: Instant, change: impl FnOnce(&mut SessionState)) -> bool {
        match self.live.get_mut(id) {
            Some(mut session) if session.expires > now => {
                change(&mut session.state);
                true
            }
            _ => false,
        }
    }
}

fn random_id() -> String {
    use ring::rand::{SecureRandom, SystemRandom};
    let mut bytes = [0u8; 24];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binder() -> Binder {
        Binder {
            name: "alice".into(),
            ..Default::default()
        }
    }

    #[test]
    fn sessions_expire_and_ids_differ() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let a = sessions.open(binder(), now).unwrap();
        let b = sessions.open(binder(), now).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
        assert!(sessions.get(&a, now).is_some());
        assert!(sessions.get(&a, now + LIFETIME).is_none());
        assert!(!sessions.update(&a, now + LIFETIME, |_| {}));
        assert!(sessions.update(&b, now, |s| s.template = Some("t".into())));
        assert_eq!(
            sessions.get(&b, now).unwrap().state.template.as_deref(),
            Some("t")
        );
        assert!(sessions.get("nope", now).is_none());
    }
}
