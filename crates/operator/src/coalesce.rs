//! Coalesces storms of reconcile requests per EC2NodeClass: a burst of NodeClaim or pending-Pod
//! changes (a scale-up creates thousands at once) asks for each class at most once per interval.
//! The first request of a quiet class goes out at once; the ones that follow within the interval
//! become a single request at its end. [`Throttle`] is the pure core (time passed in);
//! [`coalesce`] drives it with tokio timers.
//!
//! kube-runtime already merges requests for a class whose reconcile is queued or running, but a
//! reconcile of a few milliseconds then runs again and again for as long as the storm lasts; this
//! bounds it to one per interval per class, while the inputs that matter one by one (aws-auth,
//! the Karpenter Deployment, NodePools, the EC2NodeClass itself) keep their own direct triggers.

use futures::stream::{BoxStream, Stream, StreamExt};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::time::Instant;

/// Per-class leading-and-trailing-edge throttle.
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    /// When each class was last let through.
    last: HashMap<String, Instant>,
    /// Classes held back, with when they may go.
    held: HashMap<String, Instant>,
}

impl Throttle {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: HashMap::new(),
            held: HashMap::new(),
        }
    }

    /// A request for `class` at `now`: `true` when it goes out now; otherwise it is held (once,
    /// however many requests follow) until [`Self::take_due`] releases it.
    pub fn request(&mut self, class: &str, now: Instant) -> bool {
        if self.held.contains_key(class) {
            return false;
        }
        match self.last.get(class) {
            Some(last) if now < *last + self.interval => {
                self.held.insert(class.to_owned(), *last + self.interval);
                false
            }
            _ => {
                self.last.insert(class.to_owned(), now);
                true
            }
        }
    }

    /// The earliest time a held class may go.
    pub fn next_due(&self) -> Option<Instant> {
        self.held.values().min().copied()
    }

    /// The held classes whose time has come, let through at `now`.
    pub fn take_due(&mut self, now: Instant) -> Vec<String> {
        let mut due: Vec<String> = self
            .held
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(class, _)| class.clone())
            .collect();
        due.sort();
        for class in &due {
            self.held.remove(class);
            self.last.insert(class.clone(), now);
        }
        // Forget classes quiet for a while, so deleted classes do not accumulate.
        let forget_before = now.checked_sub(self.interval * 10);
        if let Some(before) = forget_before {
            self.last.retain(|_, last| *last >= before);
        }
        due
    }
}

/// The classes of `requests`, throttled per class to one per `interval`; ends when `requests`
/// ends and nothing is held.
pub fn coalesce(
    requests: impl Stream<Item = Vec<String>> + Send + 'static,
    interval: Duration,
) -> BoxStream<'static, String> {
    struct State {
        requests: BoxStream<'static, Vec<String>>,
        throttle: Throttle,
        ready: VecDeque<String>,
        ended: bool,
    }
    let state = State {
        requests: requests.boxed(),
        throttle: Throttle::new(interval),
        ready: VecDeque::new(),
        ended: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(class) = s.ready.pop_front() {
                return Some((class, s));
            }
            let next_due = s.throttle.next_due();
            if s.ended && next_due.is_none() {
                return None;
            }
            let sleep = async {
                match next_due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                request = s.requests.next(), if !s.ended => match request {
                    Some(classes) => {
                        let now = Instant::now();
                        for class in classes {
                            if s.throttle.request(&class, now) {
                                s.ready.push_back(class);
                            }
                        }
                    }
                    None => s.ended = true,
                },
                () = sleep => {
                    let due = s.throttle.take_due(Instant::now());
                    s.ready.extend(due);
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(500);

    #[test]
    fn the_first_request_goes_at_once_and_a_burst_becomes_one_more() {
        let mut throttle = Throttle::new(INTERVAL);
        let t0 = Instant::now();
        assert!(throttle.request("a", t0));
        for ms in 1..1000 {
            assert!(!throttle.request("a", t0 + Duration::from_micros(ms * 100)));
        }
        assert_eq!(throttle.next_due(), Some(t0 + INTERVAL));
        assert!(throttle.take_due(t0 + INTERVAL / 2).is_empty());
        assert_eq!(throttle.take_due(t0 + INTERVAL), ["a"]);
        assert_eq!(throttle.next_due(), None);
    }

    #[test]
    fn classes_are_throttled_independently() {
        let mut throttle = Throttle::new(INTERVAL);
        let t0 = Instant::now();
        assert!(throttle.request("a", t0));
        assert!(throttle.request("b", t0 + Duration::from_millis(1)));
        assert!(!throttle.request("a", t0 + Duration::from_millis(2)));
        assert!(throttle.request("c", t0 + Duration::from_millis(3)));
        assert_eq!(throttle.take_due(t0 + INTERVAL), ["a"]);
        // After the interval a quiet class goes at once again.
        assert!(throttle.request("b", t0 + INTERVAL * 2));
    }

    /// However long a storm lasts, a class goes at most once per interval (plus the first).
    #[tokio::test(start_paused = true)]
    async fn a_storm_yields_at_most_one_request_per_interval_per_class() {
        let storm = futures::stream::iter(0..2000u64)
            .then(|i| async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                vec![format!("class-{}", i % 3)]
            })
            .boxed();
        let started = Instant::now();
        let out: Vec<String> = coalesce(storm, INTERVAL).collect().await;
        let took = started.elapsed();
        let per_class = |c: &str| out.iter().filter(|x| x.as_str() == c).count();
        let bound = (took.as_millis() / INTERVAL.as_millis()) as usize + 1;
        for class in ["class-0", "class-1", "class-2"] {
            assert!(
                per_class(class) >= 2,
                "the burst's end is not lost: {out:?}"
            );
            assert!(
                per_class(class) <= bound,
                "{class}: {} requests in {took:?}",
                per_class(class)
            );
        }
        assert!(out.len() < 30, "2,000 requests became {}", out.len());
    }
}
