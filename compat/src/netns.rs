//! Test hosts in network namespaces: each node of a test cluster gets its own
//! namespace and IPv4 address on a private bridge, the tests (in the root
//! namespace, as a client would be) reach every host, and the link between two
//! hosts can be cut and healed (or made lossy) with iptables rules inside
//! their namespaces, and a host's link slowed with tc,, while both stay reachable from the root namespace. Everything a network
//! makes (namespaces, bridge, veth pairs, one FORWARD rule for the bridge) is
//! removed when it is dropped, and whatever a killed test process left behind
//! is removed by the next network made.
//!
//! Needs root (CAP_NET_ADMIN), `ip` (iproute2) and `iptables`, which the test
//! scripts install.

use std::net::Ipv4Addr;
use std::process::Command;

/// The prefix of every name a network makes; the creating process id follows.
const NAME_PREFIX: &str = "sln";

/// Host `i` has the address `.HOST_ADDRESS_BASE + i` of the network's /24.
const HOST_ADDRESS_BASE: u8 = 10;

/// The most hosts one network holds.
pub const MAX_HOSTS: usize = 16;

/// The smallest bucket a slowed link gets, in bytes: a few full-size frames,
/// so that a low rate still passes every packet, late.
const SLOW_BURST_MIN_BYTES: usize = 8 * 1514;

/// A bridge with hosts in namespaces, removed on drop.
pub struct TestNetwork {
    prefix: String,
    bridge: String,
    subnet: [u8; 3],
    hosts: usize,
}

impl TestNetwork {
    /// A network of `hosts` hosts, each in its own namespace. One per process
    /// at a time: names and the subnet are derived from the process id.
    pub fn create(hosts: usize) -> TestNetwork {
        assert!((1..=MAX_HOSTS).contains(&hosts), "1 to {MAX_HOSTS} hosts");
        remove_leftovers();
        let pid = std::process::id();
        let prefix = format!("{NAME_PREFIX}{pid}");
        // 10.x.y.0/24 from the low 16 bits of the pid, in 10.128.0.0/9 (clear of
        // Docker's 172.16/12 and most private LANs).
        let subnet = [10, 128 | ((pid >> 8) & 0x7f) as u8, (pid & 0xff) as u8];
        let network = TestNetwork {
            bridge: format!("{prefix}b"),
            prefix,
            subnet,
            hosts,
        };
        network.build();
        network
    }

    fn build(&self) {
        let bridge = self.bridge.as_str();
        let gateway = format!("{}/24", self.gateway());
        run("ip", &["link", "add", bridge, "type", "bridge"]);
        run("ip", &["addr", "add", &gateway, "dev", bridge]);
        run("ip", &["link", "set", bridge, "up"]);
        // Hosts talk to each other across the bridge; with br_netfilter loaded (as
        // Docker loads it) that traffic passes the root FORWARD chain, whose policy
        // may be DROP.
        run(
            "iptables",
            &["-I", "FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"],
        );
        for host in 0..self.hosts {
            let (namespace, inside, outside) = self.veth(host);
            let address = format!("{}/24", self.address(host));
            run("ip", &["netns", "add", &namespace]);
            run(
                "ip",
                &[
                    "link", "add", &outside, "type", "veth", "peer", "name", &inside,
                ],
            );
            run("ip", &["link", "set", &inside, "netns", &namespace]);
            run("ip", &["link", "set", &outside, "master", bridge]);
            run("ip", &["link", "set", &outside, "up"]);
            in_namespace(&namespace, "ip", &["link", "set", "lo", "up"]);
            in_namespace(&namespace, "ip", &["addr", "add", &address, "dev", &inside]);
            in_namespace(&namespace, "ip", &["link", "set", &inside, "up"]);
        }
    }

    /// The namespace of host `host`, for `ip netns exec`.
    pub fn namespace(&self, host: usize) -> String {
        assert!(host < self.hosts, "no host {host}");
        format!("{}-{host}", self.prefix)
    }

    /// The address of host `host`.
    pub fn address(&self, host: usize) -> Ipv4Addr {
        assert!(host < self.hosts, "no host {host}");
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, HOST_ADDRESS_BASE + host as u8)
    }

    /// The root namespace's address on the bridge.
    fn gateway(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 1)
    }

    /// Drops every packet between hosts `a` and `b`, both ways, established
    /// connections included; each stays reachable from the root namespace.
    pub fn cut(&self, a: usize, b: usize) {
        self.rules("-A", a, b);
    }

    /// Undoes `cut(a, b)`.
    pub fn heal(&self, a: usize, b: usize) {
        self.rules("-D", a, b);
    }

    fn rules(&self, action: &str, a: usize, b: usize) {
        self.drop_rules(action, a, b, &[]);
    }

    /// Adds (`-A`) or deletes (`-D`) the DROP rules between `a` and `b`, both
    /// ways, with `matching` added to each (none: every packet).
    fn drop_rules(&self, action: &str, a: usize, b: usize, matching: &[&str]) {
        assert_ne!(a, b, "a host is never cut from itself");
        for (here, there) in [(a, b), (b, a)] {
            let namespace = self.namespace(here);
            let peer = self.address(there).to_string();
            for (chain, direction) in [("INPUT", "-s"), ("OUTPUT", "-d")] {
                let mut args = vec![action, chain, direction, peer.as_str()];
                args.extend_from_slice(matching);
                args.extend_from_slice(&["-j", "DROP"]);
                in_namespace(&namespace, "iptables", &args);
            }
        }
    }

    /// Makes the links between `host` and every other host lossy: each packet
    /// is dropped with probability `percent`/100, both ways; `restore` with
    /// the same `percent` undoes it.
    pub fn degrade(&self, host: usize, percent: u32) {
        self.lossy_rules("-A", host, percent);
    }

    /// Undoes `degrade(host, percent)`.
    pub fn restore(&self, host: usize, percent: u32) {
        self.lossy_rules("-D", host, percent);
    }

    fn lossy_rules(&self, action: &str, host: usize, percent: u32) {
        assert!((1..=100).contains(&percent), "1 to 100 percent");
        let probability = format!("{:.2}", f64::from(percent) / 100.0);
        let matching = [
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            probability.as_str(),
        ];
        for other in (0..self.hosts).filter(|&o| o != host) {
            self.drop_rules(action, host, other, &matching);
        }
    }

    /// Slows `host`'s link to the bridge both ways (to the other hosts and
    /// to clients alike) to `rate_kbit` kbit/s, with a queue of up to
    /// `queue_ms` ms before packets drop: a token bucket (tc's `tbf`) on
    /// each end of its veth pair. `unslow` undoes it.
    pub fn slow(&self, host: usize, rate_kbit: u32, queue_ms: u32) {
        let rate = format!("{rate_kbit}kbit");
        let latency = format!("{queue_ms}ms");
        // The bucket holds at least one full-size frame, or nothing passes.
        let burst = format!(
            "{}",
            (rate_kbit as usize * 1000 / 8 / 100).max(SLOW_BURST_MIN_BYTES)
        );
        let shaping = [
            "root",
            "tbf",
            "rate",
            rate.as_str(),
            "burst",
            burst.as_str(),
            "latency",
            latency.as_str(),
        ];
        let (namespace, inside, outside) = self.veth(host);
        let mut args = vec!["qdisc", "add", "dev", outside.as_str()];
        args.extend_from_slice(&shaping);
        run("tc", &args);
        let mut args = vec!["qdisc", "add", "dev", inside.as_str()];
        args.extend_from_slice(&shaping);
        in_namespace(&namespace, "tc", &args);
    }

    /// Undoes `slow(host, ..)`.
    pub fn unslow(&self, host: usize) {
        let (namespace, inside, outside) = self.veth(host);
        run("tc", &["qdisc", "del", "dev", &outside, "root"]);
        in_namespace(&namespace, "tc", &["qdisc", "del", "dev", &inside, "root"]);
    }

    /// Whether this kernel shapes links with tc's `tbf` (some sandboxes lack
    /// the module); asked on the bridge, then undone.
    pub fn can_slow(&self) -> bool {
        let shaped = quiet(
            "tc",
            &[
                "qdisc",
                "add",
                "dev",
                &self.bridge,
                "root",
                "tbf",
                "rate",
                "1mbit",
                "burst",
                "32kbit",
                "latency",
                "100ms",
            ],
        )
        .is_some();
        if shaped {
            let _ = quiet("tc", &["qdisc", "del", "dev", &self.bridge, "root"]);
        }
        shaped
    }

    /// (namespace, the veth end inside it, the end on the bridge) of `host`.
    fn veth(&self, host: usize) -> (String, String, String) {
        (
            self.namespace(host),
            format!("{}p{host}", self.prefix),
            format!("{}h{host}", self.prefix),
        )
    }

    /// Cuts `host` from every other host.
    pub fn isolate(&self, host: usize) {
        for other in (0..self.hosts).filter(|&o| o != host) {
            self.cut(host, other);
        }
    }

    /// Undoes `isolate(host)`.
    pub fn rejoin(&self, host: usize) {
        for other in (0..self.hosts).filter(|&o| o != host) {
            self.heal(host, other);
        }
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        remove(&self.prefix);
    }
}

/// Removes the namespaces, links and FORWARD rule named after `prefix`; the veth
/// ends go with their namespaces and the bridge's ports.
fn remove(prefix: &str) {
    let bridge = format!("{prefix}b");
    let _ = quiet(
        "iptables",
        &[
            "-D", "FORWARD", "-i", &bridge, "-o", &bridge, "-j", "ACCEPT",
        ],
    );
    if let Some(names) = quiet("ip", &["netns", "list"]) {
        for line in names.lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('-'))
            {
                let _ = quiet("ip", &["netns", "del", name]);
            }
        }
    }
    if let Some(links) = quiet("ip", &["-o", "link", "show"]) {
        for line in links.lines() {
            // "7: sln123h0@if6: <...": the name, without the peer after '@'.
            let Some(name) = line.split(": ").nth(1) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or_default();
            if name
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(['h', 'b']))
            {
                let _ = quiet("ip", &["link", "del", name]);
            }
        }
    }
}

/// Removes what networks of processes that no longer run left behind.
fn remove_leftovers() {
    let Some(names) = quiet("ip", &["netns", "list"]) else {
        return;
    };
    let mut dead = std::collections::BTreeSet::new();
    for line in names.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(NAME_PREFIX) else {
            continue;
        };
        let Some((pid, _)) = rest.split_once('-') else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            dead.insert(pid.to_string());
        }
    }
    for pid in dead {
        remove(&format!("{NAME_PREFIX}{pid}"));
    }
}

fn in_namespace(namespace: &str, program: &str, args: &[&str]) {
    let mut all = vec!["netns", "exec", namespace, program];
    all.extend_from_slice(args);
    run("ip", &all);
}

/// Runs a command that must succeed.
fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("{program}: {error} (the test scripts install it)"));
    assert!(
        output.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs a command whose failure is fine; its stdout if it succeeded.
fn quiet(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}
