//! A cluster of real `sluice` processes on loopback: each node its own Kafka
//! port, controller port and data dir, all started with the same voter list,
//! killable with SIGKILL and started again on the same ports and data.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::{free_port, sluice_binary, CLIENT_WAIT_MS};

/// How long a node may take to join its cluster and start serving: a voter
/// waits for the quorum, a broker to be unfenced.
pub const NODE_START_WAIT_MS: u64 = 60_000;

/// Short sessions and lag, so that a killed or cut-off node is fenced and
/// dropped from the ISR within a test's patience; no timing is asserted.
pub const FAST_CLUSTER: &[&str] = &[
    "--broker-session-timeout-ms",
    "3000",
    "--broker-heartbeat-interval-ms",
    "500",
    "--replica-lag-time-max-ms",
    "4000",
    "--leader-imbalance-check-interval-seconds",
    "1",
];

/// The metadata raft leader the node whose metrics endpoint is at `address`
/// (`HOST:PORT`) knows, if it answers within a second or two and knows one.
pub fn controller_leader_at(address: &str) -> Option<i32> {
    use std::io::{Read as _, Write as _};
    let address: SocketAddr = address.parse().ok()?;
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(1_000)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(2_000)))
        .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: sluice\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer
        .lines()
        .find_map(|line| line.strip_prefix("sluice_controller_leader "))
        .and_then(|id| id.trim().parse().ok())
        .filter(|id: &i32| *id >= 0)
}

/// A node in a test network listens on Kafka's usual port, its address being its own.
pub const NETWORK_KAFKA_PORT: u16 = 9092;

/// And its controller on KRaft's usual one.
pub const NETWORK_CONTROLLER_PORT: u16 = 9093;

/// One node of a test cluster.
pub struct ClusterNode {
    /// The `sluice` binary to run: the one built beside the tests unless set.
    pub binary: PathBuf,
    pub node_id: i32,
    /// The address the node listens on: loopback, or its host's in a test network.
    pub host: String,
    /// The network namespace the process runs in, if not the test's own.
    pub namespace: Option<String>,
    pub kafka_port: u16,
    pub controller_port: u16,
    pub data_dir: PathBuf,
    /// Extra environment of the process (such as a fault shim's `LD_PRELOAD`).
    pub env: Vec<(String, OsString)>,
    /// A file the process's stdout and stderr are appended to, across restarts
    /// (none: stdout is dropped unless `SLUICE_TEST_NODE_LOG` is set, stderr
    /// is the test's).
    pub log: Option<PathBuf>,
    /// Listeners beside the PLAINTEXT one clients use (`NAME://HOST:PORT`),
    /// such as a secured inter-broker listener.
    pub extra_listeners: Vec<String>,
    /// What a client needs besides the bootstrap address to reach the node
    /// (TLS and SASL settings), for the checks made here.
    pub client_settings: Vec<(String, String)>,
    voters: String,
    extra_args: Vec<String>,
    child: Option<Child>,
}

impl ClusterNode {
    /// A node (not started) of a cluster whose voters are `voters`.
    pub fn new(node_id: i32, root: &Path, voters: &str, extra_args: &[&str]) -> ClusterNode {
        ClusterNode {
            binary: sluice_binary(),
            node_id,
            host: "127.0.0.1".to_string(),
            namespace: None,
            kafka_port: free_port(),
            controller_port: free_port(),
            data_dir: root.join(format!("node-{node_id}")),
            env: Vec::new(),
            log: None,
            extra_listeners: Vec::new(),
            client_settings: Vec::new(),
            voters: voters.to_string(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            child: None,
        }
    }

    /// A node (not started) on host `host` of `network`: its own namespace and
    /// address, Kafka's and the controller's usual ports.
    pub fn in_network(
        node_id: i32,
        root: &Path,
        network: &crate::netns::TestNetwork,
        host: usize,
        extra_args: &[&str],
    ) -> ClusterNode {
        let mut node = ClusterNode::new(node_id, root, "", extra_args);
        node.host = network.address(host).to_string();
        node.namespace = Some(network.namespace(host));
        node.kafka_port = NETWORK_KAFKA_PORT;
        node.controller_port = NETWORK_CONTROLLER_PORT;
        node
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The arguments given besides the node's own.
    pub fn extra_args(&self) -> &[String] {
        &self.extra_args
    }

    /// The voter entry of this node.
    pub fn voter(&self) -> String {
        format!("{}@{}:{}", self.node_id, self.host, self.controller_port)
    }

    pub fn set_voters(&mut self, voters: &str) {
        self.voters = voters.to_string();
    }

    pub fn bootstrap(&self) -> String {
        format!("{}:{}", self.host, self.kafka_port)
    }

    /// Starts the process without waiting for it to serve.
    pub fn spawn(&mut self) {
        assert!(self.child.is_none(), "node {} is running", self.node_id);
        // SLUICE_TEST_NODE_LOG=<filter> shows the nodes' logs, for a failing test.
        let node_log = std::env::var("SLUICE_TEST_NODE_LOG").ok();
        // `ip netns exec` execs the binary in place: the child is the node itself.
        let mut command = match &self.namespace {
            Some(namespace) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", namespace]).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
        let (stdout, stderr) = match &self.log {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap_or_else(|error| panic!("open {}: {error}", path.display()));
                let copy = file.try_clone().expect("clone the node's log file");
                (Stdio::from(file), Stdio::from(copy))
            }
            None if node_log.is_some() => (Stdio::inherit(), Stdio::inherit()),
            None => (Stdio::null(), Stdio::inherit()),
        };
        let listen = if self.extra_listeners.is_empty() {
            self.bootstrap()
        } else {
            format!(
                "PLAINTEXT://{},{}",
                self.bootstrap(),
                self.extra_listeners.join(",")
            )
        };
        let child = command
            .args(["serve", "--node-id", &self.node_id.to_string()])
            .args(["--listen", &listen, "--data-dir"])
            .arg(&self.data_dir)
            .args([
                "--controller-listen",
                &format!("{}:{}", self.host, self.controller_port),
                "--controller-voters",
                &self.voters,
            ])
            .args(&self.extra_args)
            .env("SLUICE_LOG_LEVEL", node_log.as_deref().unwrap_or("warn"))
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("spawn sluice");
        self.child = Some(child);
    }

    /// Waits until the node serves Kafka clients (it has registered and been
    /// unfenced).
    pub fn wait_serving(&mut self) {
        if let Err(error) = self.try_wait_serving() {
            panic!("{error}");
        }
    }

    /// Like `wait_serving`, but says what went wrong instead of panicking.
    pub fn try_wait_serving(&mut self) -> Result<(), String> {
        let addr: SocketAddr = self.bootstrap().parse().map_err(|e| format!("{e}"))?;
        let deadline = Instant::now() + Duration::from_millis(NODE_START_WAIT_MS);
        while TcpStream::connect(addr).is_err() {
            if let Some(status) = self.exited() {
                return Err(format!(
                    "node {} exited with {status} before serving",
                    self.node_id
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!("node {} did not start serving", self.node_id));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The exit status, if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let status = child.try_wait().expect("wait for sluice")?;
        self.child = None;
        Some(status)
    }

    /// Waits for the process to end by itself, for at most the client wait.
    pub fn wait_for_exit(&mut self) -> Option<ExitStatus> {
        let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM, then waits for the process to end; returns its exit status.
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success(), "kill -TERM failed");
        Some(child.wait().expect("wait for sluice"))
    }

    /// SIGSTOP (`stop`) or SIGCONT: the process is paused or resumes, keeping
    /// its sockets and its state.
    pub fn signal(&mut self, stop: bool) {
        let child = self.child.as_ref().expect("the node is running");
        let status = Command::new("kill")
            .args([
                if stop { "-STOP" } else { "-CONT" },
                &child.id().to_string(),
            ])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -STOP/-CONT failed");
    }

    /// SIGKILL: no flush, no shutdown.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A paused process dies of SIGKILL too; resuming it first is not needed.
            child.kill().expect("kill -9");
            child.wait().expect("reap");
        }
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Three voters, started together and serving.
pub fn start_voters(root: &Path, extra_args: &[&str]) -> Vec<ClusterNode> {
    let nodes: Vec<ClusterNode> = (1..=3)
        .map(|id| ClusterNode::new(id, root, "", extra_args))
        .collect();
    start_together(nodes)
}

/// Starts `nodes` (voters all) at once and waits until every one serves and
/// lists all of them: a topic whose replicas go on every node needs them all
/// in the image of the node that takes the request.
pub fn start_together(mut nodes: Vec<ClusterNode>) -> Vec<ClusterNode> {
    let voters = voter_list(&nodes);
    for node in &mut nodes {
        node.set_voters(&voters);
        node.spawn();
    }
    for node in &mut nodes {
        node.wait_serving();
    }
    wait_until_listed(&nodes, nodes.len());
    nodes
}

/// Waits until every node's metadata lists `count` brokers (a node serves
/// once it is registered, before the others' registrations reach it).
pub fn wait_until_listed(nodes: &[ClusterNode], count: usize) {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    for node in nodes {
        let mut config = rdkafka::config::ClientConfig::new();
        config.set("bootstrap.servers", node.bootstrap());
        for (key, value) in &node.client_settings {
            config.set(key, value);
        }
        let client: BaseConsumer = config.create().expect("metadata client");
        let deadline = Instant::now() + Duration::from_millis(NODE_START_WAIT_MS);
        while client
            .fetch_metadata(None, Duration::from_millis(CLIENT_WAIT_MS))
            .map_or(0, |metadata| metadata.brokers().len())
            < count
        {
            assert!(
                Instant::now() < deadline,
                "{} never listed {count} brokers",
                node.bootstrap()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The `--controller-voters` value naming `nodes`.
pub fn voter_list(nodes: &[ClusterNode]) -> String {
    nodes
        .iter()
        .map(ClusterNode::voter)
        .collect::<Vec<_>>()
        .join(",")
}
