//! The driver clients kept between reconcile passes, each dropped once no pass
//! has used it for a while.
//!
//! A `mongodb::Client` monitors every host of its seed list in the background
//! for as long as it lives. Seed lists change with membership, credentials
//! change with the Secret, and instances are deleted; a client nobody asks for
//! any more must go, or its monitors would heartbeat forever.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Values by key, each with the time it was last handed out.
#[derive(Debug)]
pub struct ClientCache<K, V> {
    idle_limit: Duration,
    entries: BTreeMap<K, (V, Instant)>,
}

impl<K: Ord, V: Clone> ClientCache<K, V> {
    /// A cache that drops what has not been asked for during `idle_limit`.
    pub fn new(idle_limit: Duration) -> Self {
        ClientCache {
            idle_limit,
            entries: BTreeMap::new(),
        }
    }

    /// The value for `key`, made with `make` when there is none; entries idle
    /// for longer than the limit at `now` are dropped first.
    pub fn get_or_try_insert<E>(
        &mut self,
        key: K,
        now: Instant,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        let idle_limit = self.idle_limit;
        self.entries
            .retain(|_, (_, last_used)| now.saturating_duration_since(*last_used) <= idle_limit);
        if let Some((value, last_used)) = self.entries.get_mut(&key) {
            *last_used = now;
            return Ok(value.clone());
        }
        let value = make()?;
        self.entries.insert(key, (value.clone(), now));
        Ok(value)
    }
}

#[cfg(test)]
impl<K, V> ClientCache<K, V> {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(300);

    fn made(value: u32) -> impl FnOnce() -> Result<u32, ()> {
        move || Ok(value)
    }

    #[test]
    fn a_value_in_use_is_made_once_and_kept() {
        let start = Instant::now();
        let mut cache = ClientCache::new(LIMIT);
        assert_eq!(cache.get_or_try_insert("seeds-a", start, made(1)), Ok(1));
        for minute in 1..=30 {
            let now = start + Duration::from_secs(60 * minute);
            assert_eq!(
                cache.get_or_try_insert("seeds-a", now, made(2)),
                Ok(1),
                "minute {minute}"
            );
        }
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn values_the_last_passes_did_not_use_are_dropped() {
        let start = Instant::now();
        let mut cache = ClientCache::new(LIMIT);
        cache
            .get_or_try_insert("old-seeds", start, made(1))
            .unwrap();
        cache
            .get_or_try_insert("old-password", start, made(2))
            .unwrap();
        let later = start + LIMIT / 2;
        cache
            .get_or_try_insert("new-seeds", later, made(3))
            .unwrap();
        assert_eq!(cache.len(), 3);
        let much_later = start + LIMIT + Duration::from_secs(1);
        assert_eq!(
            cache.get_or_try_insert("new-seeds", much_later, made(4)),
            Ok(3)
        );
        assert_eq!(cache.len(), 1, "the clients idle past the limit are gone");
        assert_eq!(
            cache.get_or_try_insert("old-seeds", much_later, made(5)),
            Ok(5),
            "made again when asked again"
        );
    }

    #[test]
    fn a_failed_make_keeps_nothing() {
        let mut cache: ClientCache<&str, u32> = ClientCache::new(LIMIT);
        assert_eq!(
            cache.get_or_try_insert("bad", Instant::now(), || Err("refused")),
            Err("refused")
        );
        assert!(cache.is_empty());
    }
}
