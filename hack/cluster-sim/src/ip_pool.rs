//! Pod IP addresses: the loopback prefix a cluster's pods draw their addresses
//! from, and next-fit allocation within it (a freed address is reused only
//! after the rest of the range, as CNI IPAM plugins tend to do).

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use anyhow::{bail, Context};

/// An IPv4 prefix inside 127.0.0.0/8, e.g. `127.10.1.0/24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Prefix {
    network: Ipv4Addr,
    length: u8,
}

impl Ipv4Prefix {
    /// The prefix `address/length`; host bits of `address` are ignored. Refuses
    /// prefixes outside 127.0.0.0/8 (only loopback addresses can be bound without
    /// setup) and lengths outside 8–30.
    pub fn new(address: Ipv4Addr, length: u8) -> anyhow::Result<Self> {
        if !(8..=30).contains(&length) {
            bail!("pod IP prefix length must be between 8 and 30, got /{length}");
        }
        let mask = u32::MAX << (32 - u32::from(length));
        let network = Ipv4Addr::from(u32::from(address) & mask);
        if network.octets()[0] != 127 {
            bail!("pod IP prefix {network}/{length} is outside 127.0.0.0/8");
        }
        Ok(Ipv4Prefix { network, length })
    }

    /// The first address of the prefix.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn length(&self) -> u8 {
        self.length
    }

    /// Whether `address` lies in the prefix.
    pub fn contains(&self, address: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - u32::from(self.length));
        u32::from(address) & mask == u32::from(self.network)
    }

    /// Usable host addresses: all but the network and broadcast addresses.
    fn hosts(&self) -> (u32, u32) {
        let first = u32::from(self.network) + 1;
        let size = 1u32 << (32 - u32::from(self.length));
        (first, u32::from(self.network) + size - 2)
    }
}

impl fmt::Display for Ipv4Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.length)
    }
}

impl FromStr for Ipv4Prefix {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (address, length) = s
            .split_once('/')
            .with_context(|| format!("pod IP prefix {s:?} lacks /length"))?;
        let address: Ipv4Addr = address
            .parse()
            .with_context(|| format!("bad address in pod IP prefix {s:?}"))?;
        let length: u8 = length
            .parse()
            .with_context(|| format!("bad length in pod IP prefix {s:?}"))?;
        Ipv4Prefix::new(address, length)
    }
}

/// Next-fit allocator over a prefix.
#[derive(Debug)]
pub struct IpPool {
    prefix: Ipv4Prefix,
    reserved: Ipv4Addr,
    next: u32,
}

impl IpPool {
    /// A pool over `prefix` that never hands out `reserved` (the cluster's VIP).
    pub fn new(prefix: Ipv4Prefix, reserved: Ipv4Addr) -> Self {
        IpPool {
            prefix,
            reserved,
            next: prefix.hosts().0,
        }
    }

    /// The next free address after the last one handed out, skipping those in `in_use`.
    pub fn allocate(&mut self, in_use: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        let (first, last) = self.prefix.hosts();
        let count = last - first + 1;
        for step in 0..count {
            let candidate = first + (self.next - first + step) % count;
            let address = Ipv4Addr::from(candidate);
            if address != self.reserved && !in_use.contains(&address) {
                self.next = if candidate == last {
                    first
                } else {
                    candidate + 1
                };
                return Some(address);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_parses_and_refuses_non_loopback_or_odd_lengths() {
        let prefix: Ipv4Prefix = "127.10.1.7/24".parse().unwrap();
        assert_eq!(prefix.to_string(), "127.10.1.0/24");
        assert!(prefix.contains(Ipv4Addr::new(127, 10, 1, 200)));
        assert!(!prefix.contains(Ipv4Addr::new(127, 10, 2, 1)));
        assert!("10.0.0.0/24".parse::<Ipv4Prefix>().is_err());
        assert!("127.0.0.0/31".parse::<Ipv4Prefix>().is_err());
        assert!("127.0.0.0".parse::<Ipv4Prefix>().is_err());
        assert!("127.0.0.x/24".parse::<Ipv4Prefix>().is_err());
    }

    #[test]
    fn allocation_skips_the_vip_and_addresses_in_use_and_reuses_last() {
        let prefix: Ipv4Prefix = "127.20.0.0/30".parse().unwrap();
        let mut pool = IpPool::new(prefix, Ipv4Addr::new(127, 20, 0, 1));
        let none = BTreeSet::new();
        assert_eq!(pool.allocate(&none), Some(Ipv4Addr::new(127, 20, 0, 2)));
        let in_use = BTreeSet::from([Ipv4Addr::new(127, 20, 0, 2)]);
        assert_eq!(pool.allocate(&in_use), None);
        assert_eq!(pool.allocate(&none), Some(Ipv4Addr::new(127, 20, 0, 2)));
    }

    #[test]
    fn allocation_is_next_fit() {
        let prefix: Ipv4Prefix = "127.20.0.0/29".parse().unwrap();
        let mut pool = IpPool::new(prefix, Ipv4Addr::new(127, 0, 0, 1));
        let a = pool.allocate(&BTreeSet::new()).unwrap();
        let b = pool.allocate(&BTreeSet::new()).unwrap();
        assert_ne!(a, b, "a freed address is not handed out again at once");
    }
}
