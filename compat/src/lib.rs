//! Helpers for the compatibility tests and the load generator: brokers (in-process
//! or the real binary, killable with SIGKILL, optionally with injected storage
//! faults), and librdkafka clients configured as an unchanged application would
//! configure them. The fault harness behind `sluice-faults` is `faults`;
//! compat/README.md maps the crate.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Message, OwnedMessage};
use rdkafka::producer::FutureProducer;
use rdkafka::{Offset, TopicPartitionList};

pub mod cluster;
pub mod faults;
pub mod netns;
pub mod proxy;

/// How long a test waits for clients to see what it expects before failing.
pub const CLIENT_WAIT_MS: u64 = 30_000;

/// A producer with librdkafka's defaults plus `extra`.
pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> FutureProducer {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().expect("producer")
}

/// A consumer reading assigned partitions from the beginning. librdkafka needs a
/// group id to `assign()`; the consumer never joins the group.
pub fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "sluice-compat")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().expect("consumer")
}

/// Assigns every listed partition of `topic` from its beginning.
pub fn assign_from_start(consumer: &BaseConsumer, topic: &str, partitions: i32) {
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("partition offset");
    }
    consumer.assign(&assignment).expect("assign");
}

/// Polls until `count` messages arrived (or fails after CLIENT_WAIT_MS).
pub fn consume(consumer: &BaseConsumer, count: usize) -> Vec<OwnedMessage> {
    let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
    let mut messages = Vec::with_capacity(count);
    while messages.len() < count {
        assert!(
            Instant::now() < deadline,
            "consumed {} of {count} messages before the deadline",
            messages.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => messages.push(message.detach()),
            Some(Err(error)) => panic!("consumer error: {error}"),
            None => {}
        }
    }
    messages
}

/// The payload as UTF-8, for assertions.
pub fn payload_text(message: &OwnedMessage) -> String {
    String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned()
}

/// A free loopback port.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let span = u64::from(TEST_PORTS.end - TEST_PORTS.start);
    loop {
        // A fresh RandomState is randomly keyed: a random port per call.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let port = TEST_PORTS.start + (hasher.finish() % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Where `free_port` picks: below Linux's ephemeral range (32768 and up),
/// which no `bind(0)` and no outgoing connection takes. A port handed out by
/// `bind(0)` is free again the moment it is returned, and a busy test run
/// (clients connecting all the time) may take it as a connection's local
/// port before the node that was given it binds it; a node then fails to
/// start while the test talks to whatever took its port.
const TEST_PORTS: std::ops::Range<u16> = 20_000..32_768;

/// The `sluice` binary built alongside the tests.
pub fn sluice_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("deps dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let binary = dir.join("sluice");
    if !binary.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--bin", "sluice"])
            .status()
            .expect("cargo build");
        assert!(status.success(), "building the sluice binary failed");
    }
    assert!(
        binary.exists(),
        "sluice binary not found at {}",
        binary.display()
    );
    binary
}

/// The real broker process on a fixed port and data dir, so it can be killed
/// with SIGKILL and started again on the same data.
pub struct BrokerProcess {
    child: Option<Child>,
    pub port: u16,
    pub data_dir: PathBuf,
    extra_args: Vec<String>,
    /// Extra environment of the process (such as a fault shim's `LD_PRELOAD`).
    env: Vec<(String, OsString)>,
    /// The open file limit (soft and hard) the process starts with, set by
    /// util-linux's `prlimit`; None: this process's own.
    open_file_limit: Option<u64>,
}

impl BrokerProcess {
    pub fn start(data_dir: &Path, extra_args: &[&str]) -> BrokerProcess {
        BrokerProcess::start_with_env(data_dir, extra_args, Vec::new())
    }

    /// Starts with `env` added to the process's environment.
    pub fn start_with_env(
        data_dir: &Path,
        extra_args: &[&str],
        env: Vec<(String, OsString)>,
    ) -> BrokerProcess {
        BrokerProcess::launch(data_dir, extra_args, env, None)
    }

    /// Starts with its open file limit, soft and hard, at `limit` (as a shell
    /// under `ulimit -Hn` would start it), at every start.
    pub fn start_with_open_file_limit(
        data_dir: &Path,
        extra_args: &[&str],
        limit: u64,
    ) -> BrokerProcess {
        BrokerProcess::launch(data_dir, extra_args, Vec::new(), Some(limit))
    }

    fn launch(
        data_dir: &Path,
        extra_args: &[&str],
        env: Vec<(String, OsString)>,
        open_file_limit: Option<u64>,
    ) -> BrokerProcess {
        let mut process = BrokerProcess {
            child: None,
            port: free_port(),
            data_dir: data_dir.to_path_buf(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            env,
            open_file_limit,
        };
        process.spawn();
        process
    }

    /// The environment the next `restart` adds (none: the broker's own).
    pub fn set_env(&mut self, env: Vec<(String, OsString)>) {
        self.env = env;
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        // prlimit sets the limit and execs the broker: the child is the broker.
        let mut command = match self.open_file_limit {
            Some(limit) => {
                let mut command = Command::new("prlimit");
                command
                    .arg(format!("--nofile={limit}:{limit}"))
                    .arg(sluice_binary());
                command
            }
            None => Command::new(sluice_binary()),
        };
        let child = command
            .args(["serve", "--listen", &self.bootstrap(), "--data-dir"])
            .arg(&self.data_dir)
            .args(&self.extra_args)
            // SLUICE_TEST_NODE_LOG=<filter> shows the broker's log, for a failing test.
            .env(
                "SLUICE_LOG_LEVEL",
                std::env::var("SLUICE_TEST_NODE_LOG").unwrap_or_else(|_| "warn".to_string()),
            )
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdout(if std::env::var("SLUICE_TEST_NODE_LOG").is_ok() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn sluice");
        self.child = Some(child);
        let addr: SocketAddr = self.bootstrap().parse().expect("addr");
        let deadline = Instant::now() + Duration::from_millis(CLIENT_WAIT_MS);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "sluice did not start listening");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL: no flush, no shutdown marker.
    /// The broker's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("reap");
        }
    }

    /// SIGTERM and wait: a graceful shutdown.
    pub fn terminate(&mut self) {
        self.ask_to_stop();
        if let Some(mut child) = self.child.take() {
            let exit = child.wait().expect("wait");
            assert!(exit.success(), "sluice exited with {exit}");
        }
    }

    /// SIGTERM without waiting: `wait_for_exit` tells how the broker stopped.
    pub fn ask_to_stop(&self) {
        if let Some(child) = &self.child {
            let status = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status()
                .expect("kill -TERM");
            assert!(status.success());
        }
    }

    /// Waits for the broker to exit by itself, for at most `limit`: its status, or
    /// None if it is still running (then it is left running, for `kill9`).
    pub fn wait_for_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().expect("the broker is running");
        loop {
            if let Some(status) = child.try_wait().expect("wait for sluice") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts again on the same port and data dir.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        self.spawn();
    }

    /// Starts again on the same data dir but a new port, so that clients of the
    /// previous run, still retrying in the background, cannot reach it.
    pub fn restart_on_new_port(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        self.port = free_port();
        self.spawn();
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Reads every message of `topic` (all partitions) until `count` arrived.
pub fn read_back(bootstrap: &str, topic: &str, partitions: i32, count: usize) -> Vec<OwnedMessage> {
    let consumer = consumer(bootstrap, &[]);
    assign_from_start(&consumer, topic, partitions);
    consume(&consumer, count)
}

/// Watermarks of one partition.
pub fn watermarks(bootstrap: &str, topic: &str, partition: i32) -> (i64, i64) {
    consumer(bootstrap, &[])
        .fetch_watermarks(topic, partition, Duration::from_millis(CLIENT_WAIT_MS))
        .expect("watermarks")
}

pub use rdkafka;

/// An in-process broker on its own runtime, with a temporary data dir, for
/// synchronous tests driving blocking librdkafka calls.
pub struct EmbeddedBroker {
    runtime: tokio::runtime::Runtime,
    broker: Option<sluice::Broker>,
    _data_dir: tempfile::TempDir,
}

impl EmbeddedBroker {
    pub fn start() -> EmbeddedBroker {
        EmbeddedBroker::start_with(|_| {})
    }

    /// A broker whose config `adjust` changes first (port and data dir are set).
    pub fn start_with(adjust: impl FnOnce(&mut sluice::Config)) -> EmbeddedBroker {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let mut config = sluice::Config::ephemeral(data_dir.path());
        adjust(&mut config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let broker = runtime
            .block_on(sluice::Broker::start(config))
            .expect("broker starts");
        EmbeddedBroker {
            runtime,
            broker: Some(broker),
            _data_dir: data_dir,
        }
    }

    pub fn bootstrap(&self) -> String {
        self.broker.as_ref().expect("running").bootstrap_servers()
    }

    /// Where each listener listens, in the order they were configured.
    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.broker
            .as_ref()
            .expect("running")
            .local_addrs()
            .to_vec()
    }

    /// Runs a future (a delivery report, an admin call) to completion.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.take() {
            let _ = self.runtime.block_on(broker.shutdown());
        }
    }
}

/// Creates a topic through the admin API and waits for the result.
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    create_replicated_topic(bootstrap, topic, partitions, 1, configs);
}

/// Creates `topic` with `replication` replicas of each partition.
pub fn create_replicated_topic(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    replication: i32,
    configs: &[(&str, &str)],
) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
    for (key, value) in configs {
        new_topic = new_topic.set(key, value);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let results = runtime
        .block_on(admin.create_topics([&new_topic], &AdminOptions::new()))
        .expect("create topics");
    for result in results {
        result.expect("topic created");
    }
}
