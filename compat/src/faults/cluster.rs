//! The cluster under test (Jepsen's db): three to five `sluice` nodes, each in
//! a network namespace of its own (`crate::netns`), on a small data disk of
//! its own and with the fsync and clock shims preloaded, so that the nemesis
//! can reach every node on its own. It answers what the nemesis and the
//! runner ask of it: which node leads a partition or the metadata raft, and
//! whether every node serves again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rdkafka::consumer::Consumer;

use super::nemesis::clock::{preload_too, ClockShim};
use super::nemesis::disk::{node_disk_bytes, StorageFaults};
use super::workload::{PARTITIONS, TOPIC};
use crate::cluster::{controller_leader_at, start_together, ClusterNode, FAST_CLUSTER};
use crate::consumer;
use crate::netns::TestNetwork;

/// Where each node serves its metrics (the raft leader is read there).
const METRICS_PORT: u16 = 9644;

/// The cluster under test, its network and its disks (the nodes are dropped,
/// so killed, before their disks are unmounted).
pub struct Cluster {
    pub nodes: Vec<ClusterNode>,
    pub storage: StorageFaults,
    pub clocks: ClockShim,
    pub network: TestNetwork,
    pub bootstrap: String,
    /// Whether this kernel slows links (tc's tbf).
    pub can_slow: bool,
}

impl Cluster {
    /// Starts `count` nodes, each on a data disk of its own (sized for a run
    /// of `seconds`) with the fsync and clock shims preloaded, their logs
    /// (stdout and stderr) going to `logs/node-<id>.log`.
    pub fn start(
        count: usize,
        root: &Path,
        binary: Option<&PathBuf>,
        logs: &Path,
        seconds: u64,
    ) -> Result<Cluster, String> {
        let network = TestNetwork::create(count);
        let mut nodes: Vec<ClusterNode> = (0..count)
            .map(|host| {
                let metrics = format!("{}:{METRICS_PORT}", network.address(host));
                let mut args = FAST_CLUSTER.to_vec();
                args.extend(["--metrics-listen", metrics.as_str()]);
                let mut node =
                    ClusterNode::in_network(host as i32 + 1, root, &network, host, &args);
                if let Some(binary) = binary {
                    node.binary = binary.clone();
                }
                node
            })
            .collect();
        let data_dirs: Vec<PathBuf> = nodes.iter().map(|n| n.data_dir.clone()).collect();
        let storage = StorageFaults::prepare(&data_dirs, node_disk_bytes(seconds))?;
        std::fs::create_dir_all(logs).map_err(|e| format!("{}: {e}", logs.display()))?;
        let clocks = ClockShim::build();
        for (host, node) in nodes.iter_mut().enumerate() {
            node.env = storage.node_env(host);
            node.env.extend(clocks.env_for(&host.to_string()));
            preload_too(&mut node.env, clocks.library());
            let log = logs.join(format!("node-{}.log", node.node_id));
            // A report folder is per seed: a log of an earlier run goes.
            let _ = std::fs::remove_file(&log);
            node.log = Some(log);
        }
        let nodes = start_together(nodes);
        let bootstrap = nodes
            .iter()
            .map(ClusterNode::bootstrap)
            .collect::<Vec<_>>()
            .join(",");
        let can_slow = network.can_slow();
        Ok(Cluster {
            nodes,
            storage,
            clocks,
            network,
            bootstrap,
            can_slow,
        })
    }

    /// (leader, in-sync replicas) of each partition of the topic, as the
    /// cluster reports it, or None while it cannot say.
    pub fn partitions(&self) -> Option<Vec<(i32, usize)>> {
        let client = consumer(&self.bootstrap, &[]);
        let metadata = client
            .fetch_metadata(Some(TOPIC), Duration::from_millis(2_000))
            .ok()?;
        let topic = metadata.topics().iter().find(|t| t.name() == TOPIC)?;
        let mut out: Vec<(i32, i32, usize)> = topic
            .partitions()
            .iter()
            .map(|p| (p.id(), p.leader(), p.isr().len()))
            .collect();
        out.sort_unstable();
        (out.len() == PARTITIONS as usize)
            .then(|| out.into_iter().map(|(_, l, i)| (l, i)).collect())
    }

    /// The host of the metadata raft leader, as the first node that answers
    /// its metrics endpoint knows it.
    pub fn controller_host(&self) -> Option<usize> {
        let leader = self
            .nodes
            .iter()
            .find_map(|node| controller_leader_at(&format!("{}:{METRICS_PORT}", node.host)))?;
        self.nodes.iter().position(|n| n.node_id == leader)
    }

    /// The host whose node leads `partition`, if known.
    pub fn leader_host(&self, partition: i32) -> Option<usize> {
        let leader = self.partitions()?.get(partition as usize)?.0;
        self.nodes.iter().position(|n| n.node_id == leader)
    }

    /// Waits until every node serves again (each fault heals itself before
    /// the next: links rejoined, paused nodes resumed, killed ones restarted).
    pub fn wait_whole(&mut self) {
        for node in &mut self.nodes {
            node.wait_serving();
        }
    }
}
