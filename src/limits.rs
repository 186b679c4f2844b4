//! Hard bounds. Every limit the broker enforces on input, queues and loops lives
//! here, named with its unit, with the reason for its value. Tunables a user may
//! change are in `config`; these are the ceilings behind them.

/// Default largest request frame accepted (Kafka's `socket.request.max.bytes`).
/// The frame length is checked against the configured limit before a byte of the
/// body is allocated.
pub const REQUEST_SIZE_BYTES_DEFAULT: u32 = 100 * 1024 * 1024;

/// Upper bound for the configurable request size: a frame length is an i32, and a
/// larger buffer would let one connection pin too much memory.
pub const REQUEST_SIZE_BYTES_MAX: u32 = 1024 * 1024 * 1024;

/// Default budget of request bytes held across all connections at once (Kafka's
/// `queued.max.request.bytes`, which Kafka leaves unbounded). Without it the
/// ceiling is `CONNECTIONS_MAX` frames of up to the request size each, about a
/// terabyte at the defaults. 256 MiB admits two frames of the default maximum
/// size together with many ordinary ones, and is a modest share of even a small
/// host; a connection whose frame does not fit stops being read until enough is
/// given back.
pub const QUEUED_REQUEST_BYTES_DEFAULT: u64 = 256 * 1024 * 1024;

/// Upper bound for the configurable budget: 1 TiB is more memory than any host
/// this broker runs on, so a larger value can only be a typo that would quietly
/// mean no bound at all. On a 64-bit target it also fits the permit count of the
/// tokio semaphore that keeps the budget, in bytes.
pub const QUEUED_REQUEST_BYTES_MAX: u64 = 1024 * 1024 * 1024 * 1024;

// A broker started with nothing configured must be able to admit a frame of the
// default maximum size, or such a frame would wait for the budget for ever.
const _: () = assert!(REQUEST_SIZE_BYTES_DEFAULT as u64 <= QUEUED_REQUEST_BYTES_DEFAULT);
// The largest frame allowed must fit under the largest budget allowed, so that
// every request size the config accepts has some budget that admits it.
const _: () = assert!(REQUEST_SIZE_BYTES_MAX as u64 <= QUEUED_REQUEST_BYTES_MAX);

const _: () = assert!(REQUEST_SIZE_BYTES_DEFAULT <= REQUEST_SIZE_BYTES_MAX);

/// Requests one connection may have in flight (decoded but not yet answered).
/// librdkafka pipelines up to 1,000,000 by default but rarely more than a few
/// dozen; beyond this the connection stops reading until responses drain, which
/// is the backpressure Kafka applies with its mute/unmute of channels.
pub const CONNECTION_IN_FLIGHT_REQUESTS_MAX: usize = 256;

/// Connections accepted at once; further accepts wait for a slot.
pub const CONNECTIONS_MAX: usize = 10_000;

/// Longest a Fetch may wait for data (`max_wait_ms` is clamped to this).
pub const FETCH_WAIT_MS_MAX: i64 = 30_000;

/// Longest a Produce with acks=-1 waits for its durability point before it is
/// answered with REQUEST_TIMED_OUT; also the ceiling on a client's `timeout_ms`.
pub const PRODUCE_TIMEOUT_MS_MAX: i64 = 300_000;

/// Largest number of partitions one CreateTopics or CreatePartitions may ask for
/// per topic. Each partition is a directory and open files; a client typo such as
/// 1e9 must not exhaust the disk.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 100_000;

/// Producer ids one AllocateProducerIds may reserve, and so the largest
/// `producer.id.block.size` the config accepts (Kafka hands out blocks of 1000).
/// The controller checks it when it applies a raft entry, so it must never
/// shrink: entries already in a log would replay differently.
pub const PRODUCER_ID_BLOCK_COUNT_MAX: i64 = 1_000_000;

/// Largest topic name (Kafka's `Topic.MAX_NAME_LENGTH`).
pub const TOPIC_NAME_LENGTH_MAX: usize = 249;

/// How long a client has to send the rest of a frame once it has started one.
/// A vanished client stops holding a buffer after this.
pub const FRAME_READ_TIMEOUT_MS: u64 = 60_000;

/// Idle connections are closed after this (Kafka's `connections.max.idle.ms`).
pub const CONNECTION_IDLE_MS_MAX: u64 = 600_000;

/// Allocations at or above this size are reserved lazily (see `alloc`): no
/// structure the broker builds legitimately needs this much in one piece, so such
/// a request can only come from a length read off the wire.
pub const ALLOCATION_LAZY_BYTES_MIN: usize = 1 << 30;

/// Group-commit requests (fsync waiters) queued for the partition logs before
/// producers wait; one queue for the whole broker.
pub const FLUSH_WAITERS_MAX: usize = 4096;

/// fsync rounds of different targets (partitions) that run at once on the blocking
/// pool. Enough that one slow partition does not hold up the others, few enough that
/// a burst of fsync-before-ack produces does not take every blocking thread.
pub const GROUP_COMMIT_SYNCS_CONCURRENT_MAX: usize = 16;

/// The longest a group-commit round (its writes and its fsync) may run before its
/// storage counts as failed, in ms. sled 0.34 can lose the wake-up of a flush
/// waiting on a log write that failed: the flush then never returns, and every
/// store call behind it waits for good. A round this late takes the storage
/// offline, which stops the broker as a failed fsync does; the restart recovers.
pub const STORAGE_ROUND_STALL_MS: u64 = 60_000;

/// Largest metadata string kept with a committed offset (Kafka's
/// `offset.metadata.max.bytes`); larger commits get OFFSET_METADATA_TOO_LARGE.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// How often the group coordinator stores the records of groups that changed
/// without a join or sync storing them first (a group that became Empty); they
/// are stored at shutdown too. A crash loses at most this much of them: the
/// group comes back with the members of its last completed generation, who
/// then time out.
pub const GROUP_PERSIST_INTERVAL_MS: u64 = 1_000;

/// How long the group coordinator waits before loading an offsets partition
/// again after a load failed (its requests are answered
/// COORDINATOR_LOAD_IN_PROGRESS meanwhile).
pub const GROUP_LOAD_RETRY_BACKOFF_MS: u64 = 500;

/// How long FindCoordinator, naming this broker, waits for the group's offsets
/// partition to be loaded first, so that a client's next request does not meet
/// COORDINATOR_LOAD_IN_PROGRESS (it answers when the time is up either way).
pub const FIND_COORDINATOR_LOAD_WAIT_MS: u64 = 2_000;

/// How long an OffsetCommit that finds its group's offsets partition loading
/// waits for the load before it is answered COORDINATOR_LOAD_IN_PROGRESS
/// (which librdkafka gives a synchronous commit as its error, not retrying).
pub const OFFSET_COMMIT_LOAD_WAIT_MS: u64 = 2_000;

/// How long one step of following the metadata (applying an image to the
/// logs, electing or resigning a coordinator) may take before the broker warns
/// that it is held up, in ms.
pub const FOLLOW_METADATA_STEP_WARN_MS: u64 = 5_000;

/// How long the transaction coordinator waits before loading a transaction
/// state partition again after a load failed.
pub const TXN_LOAD_RETRY_BACKOFF_MS: u64 = 500;

/// Kafka's `offsets.commit.timeout.ms` (and `transaction.state.log`'s write
/// timeout): how long a coordinator's write to an internal topic waits for the
/// partition's in-sync replicas before it is answered COORDINATOR_NOT_AVAILABLE.
pub const INTERNAL_LOG_WRITE_TIMEOUT_MS: u64 = 5_000;

/// Kafka's `offsets.load.buffer.size` (and `transaction.state.log.load.buffer.size`):
/// bytes read from an internal topic's partition at a time while a coordinator
/// loads it.
pub const INTERNAL_LOG_LOAD_READ_BYTES: usize = 5 * 1024 * 1024;

/// Bytes of keys and values that a coordinator's queued writes to one
/// partition of its internal topic may share in one batch, well below the
/// topic's `max.message.bytes` (1 MiB by default); a larger write is a batch
/// of its own.
pub const COORDINATOR_WRITE_BATCH_BYTES_MAX: usize = 256 * 1024;

/// Writes queued for one partition of a coordinator's internal topic while
/// its previous batch is appended; one that finds the queue full is appended
/// alone. (The coordinators bound their writes in flight themselves: one per
/// group or transactional id, `GROUP_STORE_OPERATIONS_IN_FLIGHT_MAX`.)
pub const COORDINATOR_WRITES_QUEUED_MAX: usize = 1_024;

/// Bytes of keys and values per batch when what a coordinator stored before
/// its internal topic existed is written into it, so that each batch stays
/// well below the topic's `max.message.bytes` (1 MiB by default).
pub const INTERNAL_LOG_MIGRATION_BATCH_BYTES: usize = 256 * 1024;

/// Store operations (an offset commit, fetch or delete, a group deletion) the
/// group coordinator has in flight at once; each group has at most one. Beyond
/// it the coordinator takes no new command until one is answered. Sized like
/// the offsets store's commit queue (`OFFSET_COMMIT_QUEUE_MAX`), behind which
/// more commits would only wait anyway.
pub const GROUP_STORE_OPERATIONS_IN_FLIGHT_MAX: usize = 1024;

/// Commands the group coordinator holds back because their group has a store
/// operation in flight (they run in arrival order once it is answered). Beyond
/// it the coordinator takes no new command until held ones have run, so that a
/// flood of requests for one group waiting on a slow disk cannot grow memory
/// without bound.
pub const GROUP_COMMANDS_HELD_MAX: usize = 4096;

// The controller (openraft).

/// How long `open` waits to become leader and catch up. A single voter needs no timer for
/// either (it elects itself at once and commits alone), so reaching this means raft is stuck.
pub const CONTROLLER_LEADER_WAIT_MS_MAX: u64 = 10_000;

/// How long `shutdown` waits for raft's tasks to let go of the database.
pub const CONTROLLER_CLOSE_WAIT_MS_MAX: u64 = 10_000;

/// Proposals waiting for commit at once. Raft's own request queue is unbounded, so the
/// bound is here; beyond it `propose` waits for a slot.
pub const CONTROLLER_PROPOSALS_IN_FLIGHT_MAX: usize = 1024;

/// How long the metadata leader waits for a connection to a node's controller
/// listener when probing whether its process is gone, in ms: a dead process's
/// port refuses at once, so a probe that waits longer proves nothing.
pub const CONTROLLER_PROBE_CONNECT_MS: u64 = 200;

/// Heartbeats a broker may miss before the metadata leader probes whether
/// its process is gone (the probe proves or proves nothing; its session
/// still decides a silent broker).
pub const BROKER_HEARTBEATS_MISSED_BEFORE_PROBE: u64 = 2;

/// Refused connections, in a row, that prove a node's process gone.
pub const CONTROLLER_PROBE_REFUSALS: u32 = 2;

/// The pause between two probes of one node, in ms: a process restarting on
/// its port in between is seen alive.
pub const CONTROLLER_PROBE_RETRY_MS: u64 = 100;

/// Request ids of proposals kept in the metadata image, with their outcomes, so
/// that a proposal retried after its answer was lost is applied once. A
/// proposal is retried for at most `CONTROLLER_PROPOSE_TIMEOUT_MS`; this many
/// ids cover a controller taking 30 proposals a second for all that time (32
/// bytes and an outcome each).
pub const CONTROLLER_REQUEST_IDS_KEPT: usize = 1024;

/// The most ACL bindings one CreateAcls creates or one DeleteAcls removes
/// (Kafka's `MAX_RECORDS_PER_USER_OP`); a request past it fails whole.
pub const ACL_CHANGES_PER_REQUEST_MAX: usize = 10_000;

/// How long a proposal waits for a leader to take it, forwarded or not, before
/// the request is answered REQUEST_TIMED_OUT (Kafka's default request timeout).
pub const CONTROLLER_PROPOSE_TIMEOUT_MS: u64 = 30_000;

/// The pause before a proposal is tried again while leadership moves.
pub const CONTROLLER_FORWARD_RETRY_MS: u64 = 50;

/// The pause between rounds of the bootstrap probe (and a non-voter's join).
pub const CONTROLLER_BOOTSTRAP_PROBE_MS: u64 = 500;

/// How often a waiting start says what it waits for.
pub const CONTROLLER_START_LOG_INTERVAL_MS: u64 = 5_000;

/// How long after the dead metadata leader's lease has run out a voter that
/// has proof of its death stands for election, in ms: slack for the other
/// voters' clocks and the lease they started a little later.
pub const CONTROLLER_ELECTION_AFTER_LEASE_MS: u64 = 50;

/// How often the leader looks for a broker whose session has expired; fencing
/// is at most this late after `broker.session.timeout.ms`.
pub const CONTROLLER_FENCE_CHECK_MS: u64 = 100;

/// A quorum's raft heartbeat is its election timeout over this: several
/// heartbeats fit in the shortest timeout, so a live leader is never deposed.
pub const RAFT_HEARTBEATS_PER_ELECTION_TIMEOUT: u64 = 5;

/// Bytes of a snapshot per install message, well inside a frame.
pub const RAFT_SNAPSHOT_CHUNK_BYTES: u64 = 4 * 1024 * 1024;

/// How long one snapshot chunk may take to install at a follower.
pub const RAFT_SNAPSHOT_CHUNK_TIMEOUT_MS: u64 = 10_000;

/// Leader heartbeat period. Free with a single voter (there is no one to send to); sized
/// for the multi-node cluster, where a few heartbeats fit in one election timeout.
pub const RAFT_HEARTBEAT_INTERVAL_MS: u64 = 50;

/// Election timeouts, the failover time of a multi-node cluster. They do not delay `open`:
/// a new cluster elects itself as part of initialisation, and a restart is either restored
/// as leader at once or triggers its election explicitly.
pub const RAFT_ELECTION_TIMEOUT_MS_MIN: u64 = 150;

/// The upper end of the election timeout range (each node draws its timeout from it).
pub const RAFT_ELECTION_TIMEOUT_MS_MAX: u64 = 300;

// A leader must heartbeat several times within the shortest election timeout, or its
// followers would call elections while it is alive.
const _: () = assert!(RAFT_HEARTBEAT_INTERVAL_MS * 2 < RAFT_ELECTION_TIMEOUT_MS_MIN);
const _: () = assert!(RAFT_ELECTION_TIMEOUT_MS_MIN < RAFT_ELECTION_TIMEOUT_MS_MAX);

/// A snapshot (the whole image, fsynced) is taken after this many applied entries. It bounds
/// the log a restart replays on top of the last snapshot (in a debug build, replaying 1000
/// entries costs tens of ms) against the cost of writing the whole image, which happens off
/// the apply path.
pub const RAFT_SNAPSHOT_INTERVAL_ENTRIES: u64 = 256;

/// Entries kept behind a snapshot, so a briefly lagging follower catches up from the log
/// rather than a whole snapshot.
pub const RAFT_LOG_KEPT_AFTER_SNAPSHOT_ENTRIES: u64 = 256;

/// Purge in batches of at least this many entries, so purging is not a write per commit.
pub const RAFT_PURGE_BATCH_ENTRIES: u64 = 64;

/// Entries per replication message.
pub const RAFT_REPLICATION_BATCH_ENTRIES_MAX: u64 = 256;

/// Appends whose fsync may be pending at once. Beyond this, `append` (and so the raft
/// core) waits for the flusher: backpressure instead of an unbounded queue.
pub const RAFT_FLUSH_QUEUE_APPENDS_MAX: usize = 1024;

/// Entries one `limited_get_log_entries` returns, bounding a replication message.
pub const RAFT_LOG_READ_ENTRIES_MAX: usize = 512;

// The offsets and transaction stores (sled).

/// Commits that may wait for the flusher at once. One fsync covers up to this many; beyond
/// it, `commit` futures wait for room in the queue (backpressure, not an unbounded queue).
/// Each queued commit holds its encoded offsets, typically well under a KiB per partition.
pub const OFFSET_COMMIT_QUEUE_MAX: usize = 1024;

/// sled's page cache for the offsets database. Offsets are small (tens of bytes per
/// partition); this bounds memory rather than sizing a hot set.
pub const OFFSETS_DB_CACHE_BYTES: u64 = 32 * 1024 * 1024;

/// Saves that may wait for the group commit at once; beyond it, `save` futures wait for
/// room. One record is a few dozen bytes plus its partition names.
pub const TXN_SAVE_QUEUE_MAX: usize = 1024;

/// sled's page cache for the transaction database: one small record per transactional id.
pub const TXN_DB_CACHE_BYTES: u64 = 16 * 1024 * 1024;

// Caches, metrics, fetch waiters, reads.

/// sled's page cache for the controller database. Metadata is small (a snapshot of ten
/// thousand topics is a few MiB), so this only bounds memory, it does not size a hot set.
pub const RAFT_DB_CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// Scrapes served at once; further connections wait to be accepted.
pub const METRICS_CONNECTIONS_MAX: usize = 8;

/// Largest request head read (request line and headers); a scraper sends a
/// few hundred bytes.
pub const METRICS_REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Partitions described per scrape at most (five series each); beyond it the
/// rest are left out and `sluice_metrics_truncated` says so. A client can create
/// many partitions; a scrape must stay small enough to answer.
pub const METRICS_PARTITIONS_MAX: usize = 10_000;

/// Committed offsets (group, topic, partition) described per scrape at most,
/// for the same reason.
pub const METRICS_GROUP_OFFSETS_MAX: usize = 10_000;

/// Fetch requests waiting on one partition at most; older waiters are dropped
/// (they time out and re-read, so nothing is lost but a wake-up).
pub const FETCH_WAITERS_PER_PARTITION_MAX: usize = 1024;

/// Bytes read from the socket per read call while assembling a frame, so memory
/// follows the bytes that actually arrived, not the length a client announced.
pub const FRAME_READ_CHUNK_BYTES: usize = 64 * 1024;

/// Size of the read buffer a scan walks the log with; batches larger than this have
/// their CRC computed chunk by chunk, so a scan never allocates more.
pub const LOG_SCAN_CHUNK_BYTES: usize = 256 * 1024;

// The group coordinator's task.

/// Commands queued for the coordinator task. A full queue makes handlers wait,
/// which is the backpressure a busy coordinator should cause.
pub const GROUP_COMMAND_QUEUE_MAX: usize = 1024;

/// How often session timeouts, join delays and rebalance timeouts are checked.
/// Kafka's timers fire to the millisecond; 100 ms late is well inside the
/// seconds-long timeouts clients use.
pub const GROUP_TICK_INTERVAL_MS: u64 = 100;

// The transaction coordinator's task.

/// Commands queued for the coordinator task. A full queue makes handlers wait,
/// which is the backpressure a busy coordinator should cause.
pub const TXN_COMMAND_QUEUE_MAX: usize = 1024;

/// Completions held for loads at once, counted in (completion, offsets
/// partition) pairs: one per transaction ending on an offsets partition that
/// is loading here. A completion past it is answered with an error, and its
/// coordinator retries it after `TXN_RETRY_BACKOFF_MS`, so a burst of
/// transactions ending during a load is paced rather than queued without end.
pub const TXN_COMPLETIONS_HELD_MAX: usize = 1024;

/// Pause before a marker, a completion or a block fetch that failed is tried
/// again, so a failing store is not retried in a busy loop (Kafka's markers are
/// retried until written, as here).
pub const TXN_RETRY_BACKOFF_MS: u64 = 100;

/// How often expired transactional ids are looked for: Kafka's
/// `transaction.remove.expired.transaction.cleanup.interval.ms` default, since
/// ids expire after days and an hourly sweep is soon enough.
pub const TXN_ID_EXPIRATION_CHECK_INTERVAL_MS: u64 = 3_600_000;

// The server's background tasks.

/// How often the logs' `flush.ms` policy is checked. A second is the
/// granularity the policy gets; shorter would wake the task for nothing.
pub const LOG_FLUSH_POLICY_CHECK_INTERVAL_MS: u64 = 1_000;

/// How often recovery points are checkpointed (Kafka's
/// `log.flush.offset.checkpoint.interval.ms` default). A later checkpoint only
/// means more of the log is scanned on recovery, never lost data.
pub const LOG_CHECKPOINT_INTERVAL_MS: u64 = 60_000;

// The inter-node transport (`net`).

/// Largest inter-node frame (kind, correlation id and body, after the length
/// prefix). The length is checked against it before a byte of the frame is
/// allocated, and the body is read in `FRAME_READ_CHUNK_BYTES` pieces, so memory
/// follows the bytes that arrived. The largest body is a whole metadata
/// snapshot, a few MiB for ten thousand topics; 64 MiB leaves a tenfold margin
/// while keeping what one peer can make a node hold small.
pub const INTER_NODE_FRAME_BYTES_MAX: u32 = 64 * 1024 * 1024;

/// Largest handshake frame. A handshake is a version, a cluster id and two node
/// ids, so a peer that has not proved who it is can make a node read at most
/// this much.
pub const INTER_NODE_HANDSHAKE_FRAME_BYTES_MAX: u32 = 4 * 1024;

const _: () = assert!(INTER_NODE_HANDSHAKE_FRAME_BYTES_MAX <= INTER_NODE_FRAME_BYTES_MAX);

/// How long a connection to another node may take to open (KRaft's
/// `controller.quorum.request.timeout.ms` is 2 s for a whole request; opening a
/// loopback or LAN connection takes far less). Past it the node is unreachable.
pub const INTER_NODE_CONNECT_TIMEOUT_MS: u64 = 1_000;

/// How long the handshake may take once the connection is open, on either side;
/// an accepted connection that has not completed it by then is closed, so a
/// peer that connects and says nothing holds no slot for long.
pub const INTER_NODE_HANDSHAKE_TIMEOUT_MS: u64 = 1_000;

/// Default deadline of an inter-node request when its caller gives none
/// (KRaft's `controller.quorum.request.timeout.ms`, 2 s).
pub const INTER_NODE_RPC_TIMEOUT_MS: u64 = 2_000;

/// Default deadline of a bulk request (a snapshot) when its caller gives none:
/// 64 MiB at a few MiB/s, with room.
pub const INTER_NODE_BULK_RPC_TIMEOUT_MS: u64 = 60_000;

/// Requests one inter-node connection may have in flight, on either side. A
/// caller beyond it waits (within its deadline) for an answer to come back; a
/// node whose peer sends more stops reading that connection. Raft sends a
/// handful at once (one replication stream and a vote or two per peer).
pub const INTER_NODE_IN_FLIGHT_REQUESTS_MAX: usize = 64;

/// How long the inter-node listener pauses after a failed accept (a connection
/// reset before it was taken, or no descriptor left), so that a lasting failure
/// is not a busy loop.
pub const INTER_NODE_ACCEPT_RETRY_MS: u64 = 10;

/// Inter-node connections a node accepts at once; further accepts wait for a
/// slot. Each peer opens two (requests and bulk), and a cluster has few nodes.
pub const INTER_NODE_CONNECTIONS_MAX: usize = 256;

/// How long the rest of a frame may take to arrive once its length was read,
/// and how long a frame may take to be written, so that a vanished peer stops
/// holding a buffer and its connection after this.
pub const INTER_NODE_FRAME_TRANSFER_TIMEOUT_MS: u64 = 60_000;

/// An accepted inter-node connection with no frame for this long is closed (as
/// Kafka's `connections.max.idle.ms`); its peer reconnects on its next request.
pub const INTER_NODE_CONNECTION_IDLE_MS_MAX: u64 = 600_000;

/// How long a follower's Fetch waits at its leader for new records (Kafka's
/// `replica.fetch.wait.max.ms`): the longest an acks=all produce waits on an
/// idle follower's next fetch, and the follower's lag in learning the high
/// watermark.
pub const REPLICA_FETCH_WAIT_MS: i32 = 500;

/// Bytes a follower asks for per partition and fetch (Kafka's
/// `replica.fetch.max.bytes`); the first batch comes whole even if larger.
pub const REPLICA_FETCH_PARTITION_BYTES_MAX: i32 = 1024 * 1024;

/// Bytes a follower asks for per fetch in all (Kafka's
/// `replica.fetch.response.max.bytes`).
pub const REPLICA_FETCH_RESPONSE_BYTES_MAX: i32 = 10 * 1024 * 1024;

/// Largest Fetch response frame a follower reads from its leader: the response's
/// record bytes, one oversized first batch (`MESSAGE_BYTES_MAX_LIMIT`'s worth is
/// never sent, a topic's max.message.bytes is) and the response's own fields.
pub const REPLICA_FETCH_FRAME_BYTES_MAX: usize = 128 * 1024 * 1024;

/// The largest response frame a broker accepts to its other inter-broker
/// requests (WriteTxnMarkers), in bytes: they answer a few codes per partition.
pub const BROKER_RESPONSE_FRAME_BYTES_MAX: usize = 1024 * 1024;

/// How long a transaction coordinator waits for a partition leader on another
/// broker to answer a WriteTxnMarkers, in ms, before it retries.
pub const TXN_MARKER_REMOTE_WAIT_MS: u64 = 30_000;

/// How long a leader waits for the transaction coordinator on another broker
/// to verify a transactional produce's partitions (KIP-890), in ms; past it the
/// produce is answered with a retriable error.
pub const TXN_VERIFY_WAIT_MS: u64 = 10_000;

/// How long a leader waits, after the controller refused (or lost) its ISR
/// change, before it proposes another at the same partition epoch, in ms. A
/// refusal means the leader's image is stale; the image with the news usually
/// comes within milliseconds and ends the wait, so this only bounds the raft
/// writes a leader stuck behind the image makes: one a second, not one per
/// follower fetch.
pub const ISR_CHANGE_REFUSED_BACKOFF_MS: i64 = 1_000;

/// The files a partition replica is counted to hold open: its active
/// segment's `.log`, and its transaction index or a segment rolled and not
/// yet fsynced (a roll asks for an fsync at once). The indexes are written
/// at flush time and closed, the directory is opened only to fsync it, and
/// idle segments' files are in the cache of `IDLE_SEGMENT_FILES_*`. The
/// partition budget of a broker is its open file limit, less what is
/// reserved and the idle segment files, over this.
pub const LOG_DESCRIPTORS_PER_PARTITION: u64 = 2;

/// The files of idle segments (neither active nor holding unsynced data) a
/// log dir keeps open at most, least recently used closed first: an eighth
/// of the open file limit, within these bounds. Kept out of the partition
/// budget, so a partition with many segments counts as one with one.
pub const IDLE_SEGMENT_FILES_MIN: usize = 64;
pub const IDLE_SEGMENT_FILES_MAX: usize = 4_096;
/// The share of the open file limit the idle segment files may take: one
/// in this many.
pub const IDLE_SEGMENT_FILES_LIMIT_DIVISOR: u64 = 8;

/// Rolled segments, not yet fsynced, a partition keeps open beside its
/// active segment (a roll asks for an fsync at once; older ones are
/// fsynced through their files opened again).
pub const UNSYNCED_SEGMENT_FILES_OPEN_MAX: usize = 1;

/// Open files kept out of the partition budget for connections, the stores
/// and the rest, at least (a quarter of the limit when that is more).
pub const DESCRIPTORS_RESERVED_MIN: u64 = 256;

/// How long a client has to finish the TLS handshake on an SSL listener, in
/// ms, before its connection is closed (it holds a connection slot meanwhile).
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;

/// The most authorization denials logged in one second (a client retrying
/// a refused request would flood the log); the rest are counted in the
/// request error metrics only.
pub const AUTHORIZATION_DENIALS_LOGGED_PER_SECOND: u64 = 10;

/// How often the TLS keystore and truststore are checked for a change, in ms.
pub const TLS_FILES_CHECK_MS: u64 = 1_000;

/// The longest read of an `https://` JWKS, in ms, connecting and the whole
/// body (Kafka's `sasl.oauthbearer.jwks.endpoint` reads time out at 10 s);
/// one that takes longer fails, and the keys already known stay in use.
pub const JWKS_FETCH_TIMEOUT_MS: u64 = 10_000;

/// The largest JWKS read, in bytes (an identity provider's holds a few keys
/// of about 2 KB each; a larger body is refused, not buffered).
pub const JWKS_BYTES_MAX: u64 = 1024 * 1024;

/// The first pause after a client listener's accept failed, in ms; it doubles
/// at each failure in a row up to `ACCEPT_RETRY_MS_MAX` (out of descriptors,
/// every accept fails until a connection closes: no busy loop, no log flood).
pub const ACCEPT_RETRY_MS: u64 = 10;

/// The longest pause between two accepts that failed, in ms.
pub const ACCEPT_RETRY_MS_MAX: u64 = 1_000;

/// The first pause before a follower fetches again a partition its leader
/// refused (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH: one of the two
/// images not caught up yet, usually for milliseconds), in ms; it doubles at
/// each refusal in a row up to `REPLICA_FETCH_BACKOFF_MS`.
pub const REPLICA_FETCH_RETRY_MIN_MS: u64 = 50;

/// How long a follower waits after a failed fetch, or before refetching a
/// partition whose leader refused it (Kafka's `replica.fetch.backoff.ms`).
pub const REPLICA_FETCH_BACKOFF_MS: u64 = 1_000;

/// A follower's fetch that has no answer this long after its wait ended is
/// given up and its connection closed (Kafka's `replica.socket.timeout.ms`).
pub const REPLICA_SOCKET_TIMEOUT_MS: u64 = 30_000;

/// How long a follower may take to connect to its leader (Kafka's
/// `socket.connection.setup.timeout.ms`).
pub const REPLICA_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// How often a leader looks for ISR members that fell behind (Kafka checks at
/// half of `replica.lag.time.max.ms`; this is the ceiling of that period).
pub const ISR_SHRINK_CHECK_INTERVAL_MS_MAX: u64 = 15_000;

/// Longest a controlled shutdown waits for its leaderships to be handed over
/// before the broker stops anyway (Kafka retries its controlled shutdown for
/// about as long).
pub const CONTROLLED_SHUTDOWN_WAIT_MS: u64 = 30_000;

/// Kafka's `leader.imbalance.per.broker.percentage`: above this share of the
/// partitions a broker prefers but does not lead, they are given back to it.
pub const LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: u32 = 10;

/// Longest the transaction coordinator waits for a marker to be committed (in
/// every in-sync replica) before it writes the marker again; a partition below
/// min.insync.replicas holds it here.
pub const TXN_MARKER_COMMIT_WAIT_MS: u64 = 30_000;

/// How long the users `--add-scram` names wait before their credentials are
/// proposed again after a failed proposal (no metadata leader yet), in ms.
pub const ADD_USERS_RETRY_MS: u64 = 1_000;
