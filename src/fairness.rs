//! A fair share of what bindery does on each consumer's behalf, as
//! kube-apiserver's priority and fairness shares its seats: bindery has
//! [`Limits::seats`] seats for requests it serves for consumers (reading and
//! translating them, the provider's part, the answer), a consumer holds at
//! most [`Limits::per_consumer`] of them, and when none is free it waits in
//! a line of its own, at most [`Limits::queued`] long and for at most
//! [`Limits::queue_wait`]. A seat given back goes to the next consumer in
//! turn that is waiting (round robin), not to whoever asked first, so one
//! consumer's flood waits behind itself and another's request waits for
//! one seat at most. Watches are counted apart: at most
//! [`Limits::watches`] open per consumer. Past a line or a count, the
//! request is turned away as kube-apiserver's priority and fairness turns
//! one away: 429, `Too many requests, please try again later.`,
//! `Retry-After: 1`. The provider's own priority and fairness tells
//! consumers apart too: what goes to it in a consumer's namespace is made as
//! that consumer's account (`proxy::access`), one flow each.

use crate::route::ConsumerId;
use crate::status::ApiError;
use dashmap::DashMap;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// The shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Requests served for consumers at once, all of them together.
    pub seats: usize,
    /// Of which one consumer holds at most.
    pub per_consumer: usize,
    /// Requests of one consumer waiting for a seat.
    pub queued: usize,
    /// How long one waits at most.
    pub queue_wait: Duration,
    /// Watches one consumer holds open at once.
    pub watches: usize,
}

impl Default for Limits {
    /// As kube-apiserver's `workload-low` level shares its seats among
    /// flows: a few dozen seats, a quarter of them for one consumer at
    /// most, lines as long as APF's; and as many watches as an app
    /// cluster's informers and kubectl ever open.
    fn default() -> Self {
        Self {
            seats: 16,
            per_consumer: 4,
            queued: 64,
            queue_wait: Duration::from_secs(10),
            watches: 5_000,
        }
    }
}

/// Every consumer's share.
pub struct Fairness {
    limits: Limits,
    state: Arc<Mutex<State>>,
    watches: DashMap<ConsumerId, Arc<Semaphore>>,
}

#[derive(Default)]
struct State {
    free: usize,
    /// The consumers that hold seats or wait for one.
    lines: HashMap<ConsumerId, Line>,
    /// Consumers with someone waiting, in the order they get a turn.
    turns: VecDeque<ConsumerId>,
    next_ticket: u64,
}

#[derive(Default)]
struct Line {
    seated: usize,
    waiting: VecDeque<(u64, oneshot::Sender<()>)>,
}

/// A seat, given back when dropped.
pub struct Seat {
    consumer: ConsumerId,
    state: Arc<Mutex<State>>,
    per_consumer: usize,
}

/// A watch's place in its consumer's count, given back when dropped.
#[derive(Debug)]
pub struct WatchSeat(#[allow(dead_code)] OwnedSemaphorePermit);

/// What a request holds while it is served: a seat, or (a watch) its place
/// in its consumer's count of watches.
#[derive(Debug)]
pub enum Held {
    Seat(Seat),
    Watch(WatchSeat),
}

impl Fairness {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: Arc::new(Mutex::new(State {
                free: limits.seats,
                ..State::default()
            })),
            watches: DashMap::new(),
        }
    }

    fn seat_for(&self, consumer: &ConsumerId) -> Seat {
        Seat {
            consumer: consumer.clone(),
            state: self.state.clone(),
            per_consumer: self.limits.per_consumer,
        }
    }

    /// A seat for one of `consumer`'s requests: at once when one is free to
    /// it, else in its turn; 429 when its line is full or the wait too long.
    pub async fn seat(&self, consumer: &ConsumerId) -> Result<Seat, ApiError> {
        let (ticket, granted) = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let free = state.free;
            let line = state.lines.entry(consumer.clone()).or_default();
            if free > 0 && line.seated < self.limits.per_consumer && line.waiting.is_empty() {
                line.seated += 1;
                state.free -= 1;
                return Ok(self.seat_for(consumer));
            }
            if line.waiting.len() >= self.limits.queued {
                return Err(ApiError::too_many_requests());
            }
            let (give, granted) = oneshot::channel();
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            let line = state.lines.entry(consumer.clone()).or_default();
            line.waiting.push_back((ticket, give));
            if line.waiting.len() == 1 {
                state.turns.push_back(consumer.clone());
            }
            (ticket, granted)
        };
        let mut waiter = Waiter {
            state: self.state.clone(),
            consumer: consumer.clone(),
            ticket,
            per_consumer: self.limits.per_consumer,
            settled: false,
        };
        let given = tokio::time::timeout(self.limits.queue_wait, granted).await;
        waiter.settled = true;
        if let Ok(Ok(())) = given {
            return Ok(self.seat_for(consumer));
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let line = state.lines.entry(consumer.clone()).or_default();
        match line.waiting.iter().position(|(t, _)| *t == ticket) {
            Some(at) => {
                line.waiting.remove(at);
                state.forget_if_idle(consumer);
                Err(ApiError::too_many_requests())
            }
            // Given a seat as the wait ran out: it is taken.
            None => Ok(self.seat_for(consumer)),
        }
    }

    /// One more watch of `consumer`'s, held as long as the watch is; 429
    /// when it has all it may.
    pub fn watch(&self, consumer: &ConsumerId) -> Result<WatchSeat, ApiError> {
        self.watches
            .entry(consumer.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.limits.watches)))
            .clone()
            .try_acquire_owned()
            .map(WatchSeat)
            .map_err(|_| ApiError::too_many_requests())
    }
}

impl State {
    /// Gives free seats to the waiting, a consumer at a time in turn.
    fn dispatch(&mut self, per_consumer: usize) {
        let mut passed = 0;
        while self.free > 0 && passed < self.turns.len() {
            let Some(consumer) = self.turns.pop_front() else {
                return;
            };
            let line = self.lines.entry(consumer.clone()).or_default();
            if line.seated >= per_consumer {
                self.turns.push_back(consumer);
                passed += 1;
                continue;
            }
            passed = 0;
            let mut given = false;
            while let Some((_, give)) = line.waiting.pop_front() {
                if give.send(()).is_ok() {
                    given = true;
                    break;
                }
            }
            if given {
                line.seated += 1;
                self.free -= 1;
            }
            if !line.waiting.is_empty() {
                self.turns.push_back(consumer);
            } else {
                self.forget_if_idle(&consumer);
            }
        }
    }

    /// Drops a consumer's line once it holds and waits for nothing.
    fn forget_if_idle(&mut self, consumer: &ConsumerId) {
        if let Some(line) = self.lines.get(consumer)
            && line.seated == 0
            && line.waiting.is_empty()
        {
            self.lines.remove(consumer);
            self.turns.retain(|c| c != consumer);
        }
    }
}

/// A request waiting in its consumer's line; one that goes away (its
/// caller gone) leaves the line, or gives back the seat it was given.
struct Waiter {
    state: Arc<Mutex<State>>,
    consumer: ConsumerId,
    ticket: u64,
    per_consumer: usize,
    settled: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let line = state.lines.entry(self.consumer.clone()).or_default();
        match line.waiting.iter().position(|(t, _)| *t == self.ticket) {
            Some(at) => {
                line.waiting.remove(at);
            }
            None => {
                line.seated = line.seated.saturating_sub(1);
                state.free += 1;
            }
        }
        state.forget_if_idle(&self.consumer);
        state.dispatch(self.per_consumer);
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.free += 1;
        if let Some(line) = state.lines.get_mut(&self.consumer) {
            line.seated = line.seated.saturating_sub(1);
        }
        state.forget_if_idle(&self.consumer);
        state.dispatch(self.per_consumer);
    }
}

impl std::fmt::Debug for Seat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Seat({})", self.consumer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumer(name: &str) -> ConsumerId {
        ConsumerId::parse(name).unwrap()
    }

    fn fairness(seats: usize, per_consumer: usize) -> Fairness {
        Fairness::new(Limits {
            seats,
            per_consumer,
            queued: 2,
            queue_wait: Duration::from_secs(5),
            watches: 3,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_consumer_past_its_share_waits_in_its_own_line_then_is_turned_away() {
        let fairness = fairness(4, 2);
        let a = consumer("a");
        let _one = fairness.seat(&a).await.unwrap();
        let two = fairness.seat(&a).await.unwrap();
        // Its share is held: a third waits though seats are free.
        let waiting = fairness.seat(&a);
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        {
            let second = fairness.seat(&a);
            tokio::pin!(second);
            assert!(futures::poll!(second.as_mut()).is_pending());
            // The line (2) is full.
            let full = fairness.seat(&a).await.unwrap_err();
            assert_eq!((full.code, full.retry_after), (429, Some(1)));
            assert!(full.plain_text);
            assert_eq!(full.message, "Too many requests, please try again later.");
        }
        // The one that went away left the line.
        assert_eq!(fairness.state.lock().unwrap().lines[&a].waiting.len(), 1);
        // Another consumer is not in that line.
        let _b = fairness
            .seat(&consumer("b"))
            .await
            .expect("b has its own share");
        drop(two);
        let _three = waiting
            .await
            .expect("a seat given back goes to the one waiting");
        let started = tokio::time::Instant::now();
        assert_eq!(fairness.seat(&a).await.unwrap_err().code, 429);
        assert!(
            started.elapsed() >= Duration::from_secs(5),
            "a wait too long is turned away"
        );
        assert!(fairness.state.lock().unwrap().lines[&a].waiting.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn seats_given_back_go_round_the_consumers_waiting() {
        let fairness = Arc::new(fairness(2, 2));
        let (a, b) = (consumer("a"), consumer("b"));
        let held = vec![
            fairness.seat(&a).await.unwrap(),
            fairness.seat(&a).await.unwrap(),
        ];
        // a floods: two more of a's wait, then b's one.
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for who in [&a, &a, &b] {
            let (fairness, order, who) = (fairness.clone(), order.clone(), who.clone());
            waiting.push(tokio::spawn(async move {
                let seat = fairness.seat(&who).await.unwrap();
                order.lock().unwrap().push(who.to_string());
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(seat);
            }));
            tokio::task::yield_now().await;
        }
        drop(held);
        for task in waiting {
            task.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(
            order[..2].iter().filter(|w| *w == "b").count(),
            1,
            "b is served among the first two: {order:?}"
        );
    }

    #[test]
    fn watches_are_counted_per_consumer() {
        let fairness = fairness(1, 1);
        let a = consumer("a");
        let held: Vec<WatchSeat> = (0..3).map(|_| fairness.watch(&a).unwrap()).collect();
        assert_eq!(fairness.watch(&a).unwrap_err().code, 429);
        assert!(fairness.watch(&consumer("b")).is_ok());
        drop(held);
        assert!(fairness.watch(&a).is_ok());
    }

    #[tokio::test]
    async fn idle_consumers_leave_nothing_behind() {
        let fairness = fairness(2, 1);
        for i in 0..100 {
            drop(fairness.seat(&consumer(&format!("c{i}"))).await.unwrap());
        }
        let state = fairness.state.lock().unwrap();
        assert!(state.lines.is_empty() && state.turns.is_empty());
        assert_eq!(state.free, 2);
    }
}
