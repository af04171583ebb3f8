//! An emulated IP network for datagrams (unicast and multicast UDP), in tokio time: what the
//! fleet benchmark runs P_MUL over to set the IP bearer (a satellite or line-of-sight network)
//! beside HF.
//!
//! Each host sends through its own uplink of `rate_bps` (datagrams leave one after another,
//! each taking its size at that rate, IP and UDP headers counted); every copy then arrives
//! `delay` later at each endpoint subscribed to the destination address and port, unless the
//! seeded loss draw (per copy, so receivers of one multicast lose different datagrams) drops
//! it. Multicast is delivery to every subscriber of the group's address: routers, IGMP and
//! queues inside the network are not modelled, nor is a shared medium's contention (a
//! satellite channel's access scheme, say): the model is delay, loss and each sender's rate.
//! Deterministic for a seed in paused time.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// IPv4 and UDP headers counted on the wire for each datagram.
pub const HEADER_BYTES: u64 = 28;

/// The network's behaviour.
#[derive(Debug, Clone, PartialEq)]
pub struct IpNetConfig {
    /// One-way delay of every datagram after it has left its sender (a geostationary
    /// satellite hop is about 270 ms, a line-of-sight radio link a few ms).
    pub delay: Duration,
    /// Probability that one copy of a datagram is lost, 0 to 1.
    pub loss: f64,
    /// Each host's uplink rate, bit/s.
    pub rate_bps: u64,
    /// Seed of the loss draws.
    pub seed: u64,
}

impl Default for IpNetConfig {
    fn default() -> Self {
        IpNetConfig {
            delay: Duration::from_millis(270),
            loss: 0.0,
            rate_bps: 64_000,
            seed: 1,
        }
    }
}

/// What the network carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpNetCounters {
    /// Datagrams sent (a multicast datagram counts once, as it leaves its sender).
    pub datagrams: u64,
    /// Bytes sent, IP and UDP headers included.
    pub bytes: u64,
    /// Copies delivered to endpoints.
    pub delivered: u64,
    /// Copies lost.
    pub lost: u64,
    /// Time senders' uplinks were busy, in all.
    pub busy: Duration,
}

/// A datagram as an endpoint receives it: source, destination and bytes.
pub type Delivery = (SocketAddr, SocketAddr, Bytes);

/// An endpoint's subscription, to give back with [`IpNet::unsubscribe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subscription(u64);

#[derive(Debug)]
struct State {
    endpoints: HashMap<SocketAddr, Vec<(Subscription, mpsc::UnboundedSender<Delivery>)>>,
    next: u64,
    busy_until: HashMap<IpAddr, Instant>,
    rng: ChaCha8Rng,
    counters: IpNetCounters,
}

/// The emulated network; clone the `Arc` for every host.
#[derive(Debug)]
pub struct IpNet {
    config: IpNetConfig,
    state: Mutex<State>,
}

impl IpNet {
    /// A network with `config`.
    pub fn new(config: IpNetConfig) -> Arc<IpNet> {
        Arc::new(IpNet {
            state: Mutex::new(State {
                endpoints: HashMap::new(),
                next: 0,
                busy_until: HashMap::new(),
                rng: ChaCha8Rng::seed_from_u64(config.seed),
                counters: IpNetCounters::default(),
            }),
            config,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Delivers datagrams for `addr` (a host's own address and port, or a multicast group's)
    /// to `sink`.
    pub fn subscribe(
        &self,
        addr: SocketAddr,
        sink: mpsc::UnboundedSender<Delivery>,
    ) -> Subscription {
        let mut st = self.state();
        let id = Subscription(st.next);
        st.next += 1;
        st.endpoints.entry(addr).or_default().push((id, sink));
        id
    }

    /// Ends a subscription.
    pub fn unsubscribe(&self, id: Subscription) {
        let mut st = self.state();
        for subs in st.endpoints.values_mut() {
            subs.retain(|(s, _)| *s != id);
        }
    }

    /// Sends `bytes` from `from` to `to` (unicast, or every subscriber of a group).
    pub fn send(self: &Arc<Self>, from: SocketAddr, to: SocketAddr, bytes: Bytes) {
        let now = Instant::now();
        let size = bytes.len() as u64 + HEADER_BYTES;
        let on_link = Duration::from_micros(size * 8 * 1_000_000 / self.config.rate_bps.max(1));
        let mut st = self.state();
        let start = st
            .busy_until
            .get(&from.ip())
            .copied()
            .filter(|t| *t > now)
            .unwrap_or(now);
        let left = start + on_link;
        st.busy_until.insert(from.ip(), left);
        st.counters.datagrams += 1;
        st.counters.bytes += size;
        st.counters.busy += on_link;
        let arrive = left + self.config.delay;
        let sinks: Vec<_> = st
            .endpoints
            .get(&to)
            .map(|v| v.iter().map(|(_, s)| s.clone()).collect())
            .unwrap_or_default();
        let mut copies = Vec::new();
        for sink in sinks {
            if st.rng.random::<f64>() < self.config.loss {
                st.counters.lost += 1;
            } else {
                st.counters.delivered += 1;
                copies.push(sink);
            }
        }
        drop(st);
        if copies.is_empty() {
            return;
        }
        tokio::spawn(async move {
            tokio::time::sleep_until(arrive).await;
            for sink in copies {
                let _ = sink.send((from, to, bytes.clone()));
            }
        });
    }

    /// What it carried so far.
    pub fn counters(&self) -> IpNetCounters {
        self.state().counters
    }

    /// Its configuration.
    pub fn config(&self) -> &IpNetConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test(start_paused = true)]
    async fn datagrams_take_their_size_at_the_rate_then_the_delay() {
        let net = IpNet::new(IpNetConfig {
            delay: Duration::from_millis(270),
            loss: 0.0,
            rate_bps: 8_000,
            seed: 1,
        });
        let (tx, mut rx) = mpsc::unbounded_channel();
        net.subscribe(addr("239.1.1.1:2753"), tx.clone());
        net.subscribe(addr("239.1.1.1:2753"), tx);
        let t0 = Instant::now();
        // 972 + 28 bytes: one second at 8 kbit/s each; the second waits for the first.
        net.send(
            addr("10.0.0.1:2753"),
            addr("239.1.1.1:2753"),
            Bytes::from(vec![0; 972]),
        );
        net.send(
            addr("10.0.0.1:2753"),
            addr("239.1.1.1:2753"),
            Bytes::from(vec![1; 972]),
        );
        let mut at = Vec::new();
        for _ in 0..4 {
            let (_, _, b) = rx.recv().await.unwrap_or_else(|| panic!("closed"));
            at.push((b[0], (Instant::now() - t0).as_millis()));
        }
        assert_eq!(at, [(0, 1270), (0, 1270), (1, 2270), (1, 2270)]);
        let c = net.counters();
        assert_eq!((c.datagrams, c.bytes, c.delivered, c.lost), (2, 2000, 4, 0));
        assert_eq!(c.busy, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn loss_is_drawn_per_copy_and_repeats_for_a_seed() {
        let run = |seed| async move {
            let net = IpNet::new(IpNetConfig {
                loss: 0.3,
                seed,
                ..IpNetConfig::default()
            });
            let (tx, mut rx) = mpsc::unbounded_channel();
            let sub = net.subscribe(addr("10.0.0.2:2753"), tx);
            for i in 0..1000u32 {
                net.send(
                    addr("10.0.0.1:2753"),
                    addr("10.0.0.2:2753"),
                    Bytes::from(i.to_be_bytes().to_vec()),
                );
            }
            tokio::time::sleep(Duration::from_secs(10)).await;
            let mut got = Vec::new();
            while let Ok((_, _, b)) = rx.try_recv() {
                got.push(b);
            }
            net.unsubscribe(sub);
            net.send(addr("10.0.0.1:2753"), addr("10.0.0.2:2753"), Bytes::new());
            (got, net.counters())
        };
        let (a, ca) = run(7).await;
        let (b, _) = run(7).await;
        assert_eq!(a, b, "same seed, same losses");
        assert!(
            (650..=750).contains(&a.len()),
            "{} of 1000 arrived",
            a.len()
        );
        assert_eq!(
            ca.delivered + ca.lost,
            1000,
            "the unsubscribed endpoint gets nothing"
        );
    }
}
