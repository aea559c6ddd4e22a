//! kube-apiserver's `--goaway-chance`: each HTTP/2 request has this chance
//! of ending its connection gracefully (a GOAWAY; the requests in flight,
//! watches too, go on to their end), so that clients reconnect, through a
//! Service, to any replica, and a replica that starts or restarts gets its
//! share of the fleet's connections (`WithProbabilisticGoaway` in
//! k8s.io/apiserver). Off (0) by default, as there.

use std::sync::Arc;
use tokio::sync::Notify;

/// The largest chance kube-apiserver takes.
pub const MAX_CHANCE: f64 = 0.02;

/// The chance a request sends its connection a GOAWAY.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GoawayChance(f64);

impl GoawayChance {
    /// Reads the flag as kube-apiserver validates it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let chance: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not a number"))?;
        if !(0.0..=MAX_CHANCE).contains(&chance) {
            return Err(format!(
                "--goaway-chance can not be less than 0 or greater than {MAX_CHANCE}"
            ));
        }
        Ok(Self(chance))
    }

    /// Whether this request is the one that sends the GOAWAY.
    fn draws(self) -> bool {
        self.0 > 0.0 && fastrand::f64() < self.0
    }
}

/// One HTTP/2 connection's GOAWAY: asked by a request that drew it, waited
/// for by the connection, which then drains.
#[derive(Clone, Debug, Default)]
pub struct Goaway {
    asked: Arc<Notify>,
}

impl Goaway {
    /// A request on the connection: with `chance`, it asks for the GOAWAY.
    pub fn request(&self, chance: GoawayChance) {
        if chance.draws() {
            self.asked.notify_one();
        }
    }

    /// Completes once a request has asked for the GOAWAY.
    pub async fn asked(&self) {
        self.asked.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_validated_as_kube_apiserver_validates_it() {
        assert_eq!(GoawayChance::parse("0"), Ok(GoawayChance(0.0)));
        assert_eq!(GoawayChance::parse("0.02"), Ok(GoawayChance(0.02)));
        assert_eq!(GoawayChance::parse("0.001"), Ok(GoawayChance(0.001)));
        for refused in ["0.021", "-0.01", "1", "NaN", "x", ""] {
            assert!(GoawayChance::parse(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn off_never_draws_and_the_largest_chance_draws_about_as_often() {
        assert!((0..100_000).all(|_| !GoawayChance(0.0).draws()));
        let drawn = (0..100_000)
            .filter(|_| GoawayChance(MAX_CHANCE).draws())
            .count();
        // 2,000 expected; five standard deviations (about 221) either way.
        assert!((1_779..=2_221).contains(&drawn), "{drawn}");
    }

    #[tokio::test]
    async fn a_request_that_draws_it_is_heard_by_the_connection() {
        let goaway = Goaway::default();
        for _ in 0..10_000 {
            goaway.request(GoawayChance(MAX_CHANCE));
        }
        tokio::time::timeout(std::time::Duration::from_secs(1), goaway.asked())
            .await
            .expect("one of 10,000 requests drew the GOAWAY");
        let quiet = Goaway::default();
        for _ in 0..10_000 {
            quiet.request(GoawayChance(0.0));
        }
        let heard =
            tokio::time::timeout(std::time::Duration::from_millis(100), quiet.asked()).await;
        assert!(heard.is_err(), "no GOAWAY when it is off");
    }
}
