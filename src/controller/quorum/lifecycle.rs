//! The broker lifecycle's background tasks: each node's heartbeats to the
//! voters, the metadata leader's fencing of brokers whose session ended or
//! whose death is evident (a listener that refuses), and an election called
//! on that evidence when the dead node led the metadata raft.

use super::*;

/// Heartbeats every interval to the leader, and to every other voter, for as
/// long as the controller runs: each voter keeps the broker's session, so a
/// voter elected leader later knows how long ago the broker was last heard.
pub(super) async fn heartbeat_loop(inner: Weak<Inner>, node_id: i32, broker_epoch: BrokerEpoch) {
    let Some(interval) = inner.upgrade().and_then(|inner| {
        inner
            .quorum
            .as_ref()
            .map(|q| Duration::from_millis(q.config.broker_heartbeat_interval_ms))
    }) else {
        return;
    };
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let controller = Controller { inner };
        let Some(quorum) = controller.quorum() else {
            return;
        };
        if quorum
            .shutting_down
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return;
        }
        let heartbeat = BrokerHeartbeat {
            node_id,
            broker_epoch,
            metadata_offset: controller.image().last_applied_index,
        };
        let Ok(body) = rpc::encode(&heartbeat) else {
            return;
        };
        let leader = controller.leader().map(|(leader, _)| leader);
        if leader.is_none() {
            tracing::debug!(node_id, "no metadata leader to heartbeat");
        }
        // This node's own voter, if it is one, hears the heartbeat in place.
        let _ = controller.heartbeat_here(&heartbeat);
        let mut calls = tokio::task::JoinSet::new();
        for voter in quorum.config.voters.iter().filter(|v| v.id != node_id) {
            let Some(voter_id) = node_id_of(voter.id) else {
                continue;
            };
            let peer = quorum.peers.get(voter_id, &voter.address);
            let body = body.clone();
            let to_leader = leader == Some(voter_id);
            calls.spawn(async move {
                // A lost heartbeat is retried by the next tick; the session
                // timeout is several ticks long.
                let sent = Instant::now();
                let answer = peer
                    .call(rpc::KIND_BROKER_HEARTBEAT, body, Some(interval))
                    .await;
                (voter_id, to_leader, sent.elapsed(), answer)
            });
        }
        while let Some(Ok((voter, to_leader, rtt, answer))) = calls.join_next().await {
            match answer {
                Ok(answer) if to_leader => {
                    quorum.note_heartbeat_rtt(rtt);
                    let answer: std::io::Result<Result<HeartbeatAnswer, ForwardError>> =
                        rpc::decode(&answer);
                    tracing::debug!(node_id, leader = voter, ?answer, ?rtt, "heartbeat answered");
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(node_id, voter, to_leader, %error, "heartbeat to a voter failed")
                }
            }
        }
    }
}

/// On the leader, fences every broker whose session has expired, in one command.
///
/// Besides sessions, hard evidence: when a node's connection to
/// this one closes, or it missed two heartbeats, its controller listener is
/// probed; refused twice,
/// `CONTROLLER_PROBE_RETRY_MS` apart, the process is gone (a kill -9, a
/// crash) and the broker is fenced in the next pass, without waiting out its
/// session. Every voter keeps the hint, so a leader elected after the old
/// one died probes it at once. A silent node (a pause, a partition) leaves
/// the probe unanswered, which proves nothing: its session decides. A fence
/// of a live broker costs availability only: it leaves the ISRs (never below
/// what min ISR and the ELR keep) and is unfenced by its next heartbeat.
pub(super) async fn fence_loop(inner: Weak<Inner>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(CONTROLLER_FENCE_CHECK_MS));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let Some(wake) = inner
        .upgrade()
        .and_then(|inner| inner.quorum.as_ref().map(|q| Arc::clone(&q.fence_wake)))
    else {
        return;
    };
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = wake.notified() => {}
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let controller = Controller { inner };
        let Some(quorum) = controller.quorum() else {
            return;
        };
        let term = controller.inner.raft.metrics().borrow().current_term;
        if !controller.is_leader() {
            quorum.lock_heartbeats().leading = None;
            continue;
        }
        let image = controller.image();
        let session = Duration::from_millis(quorum.config.broker_session_timeout_ms);
        // A broker this late (two heartbeats missed) is probed too: its
        // heartbeats may have gone to another node, whose connection closed
        // unseen here.
        let late = Duration::from_millis(
            quorum
                .config
                .broker_heartbeat_interval_ms
                .saturating_mul(BROKER_HEARTBEATS_MISSED_BEFORE_PROBE),
        );
        let now = Instant::now();
        let own_id = broker_id_of(controller.inner.node_id);
        let (expired, to_probe) = {
            let mut heartbeats = quorum.lock_heartbeats();
            let since = match heartbeats.leading {
                Some((leading_term, since)) if leading_term == term => since,
                _ => {
                    heartbeats.leading = Some((term, now));
                    now
                }
            };
            let mut expired = Vec::new();
            let mut to_probe = Vec::new();
            for broker in image.brokers.values().filter(|b| !b.fenced) {
                let id = broker.node_id;
                let seen = heartbeats.last_seen.get(&id).copied();
                // Heard since before this term (every voter keeps sessions):
                // the session runs from then; never heard, from the election.
                // A broker last heard long before the election (a new
                // leader back from a partition) still has `late` left, to
                // reach the new leader before it is fenced.
                let floor = since
                    .checked_sub(session.saturating_sub(late))
                    .unwrap_or(since);
                let last = seen.map_or(since, |seen| seen.max(floor));
                let newer_than_seen = |at: &Instant| seen.is_none_or(|seen| seen < *at);
                if now.duration_since(last) > session {
                    tracing::warn!(
                        node_id = id,
                        broker_epoch = broker.epoch.get(),
                        "fencing a broker whose session expired"
                    );
                    expired.push((id, broker.epoch));
                } else if heartbeats.gone.get(&id).is_some_and(newer_than_seen) {
                    tracing::warn!(node_id = id, broker_epoch = broker.epoch.get(), "fencing a broker whose process is gone (its controller listener refuses connections)");
                    expired.push((id, broker.epoch));
                } else if id != own_id
                    && (heartbeats.closed.get(&id).is_some_and(newer_than_seen)
                        || now.duration_since(last) > late)
                    && !heartbeats.probing.contains_key(&id)
                {
                    if let Some(address) = quorum.config.voter_address(id) {
                        heartbeats.probing.insert(id, now);
                        to_probe.push((id, address.to_string()));
                    }
                }
            }
            heartbeats.gone.clear();
            (expired, to_probe)
        };
        for (node_id, address) in to_probe {
            let transport = Arc::clone(&quorum.config.transport);
            let inner = Arc::downgrade(&controller.inner);
            tokio::spawn(probe_gone(inner, transport, node_id, address, now));
        }
        if expired.is_empty() {
            continue;
        }
        // Every expired broker at once, so that no leadership moves
        // onto a broker about to be fenced; one at a time, in this pass, below
        // the metadata.version that has the command.
        let commands = if image.metadata_version() >= features::METADATA_VERSION_FENCE_BROKERS {
            vec![MetadataCommand::FenceBrokers {
                metadata_version: features::METADATA_VERSION_FENCE_BROKERS,
                brokers: expired,
            }]
        } else {
            expired
                .into_iter()
                .map(|(node_id, epoch)| MetadataCommand::FenceBroker { node_id, epoch })
                .collect()
        };
        for command in commands {
            if let Err(error) = controller.propose_local(command).await {
                tracing::debug!(%error, "fencing brokers failed; the next pass retries");
                break;
            }
        }
    }
}

/// Probes the controller listener of `node_id` at `address`: refused twice,
/// `CONTROLLER_PROBE_RETRY_MS` apart, the node's process is gone, and the
/// fence loop is told (`gone`) and woken. Anything else (an answer, a timeout,
/// another error) proves nothing, and the hint that started the probe is
/// dropped.
pub(super) async fn probe_gone(
    inner: Weak<Inner>,
    transport: Arc<dyn crate::net::Transport>,
    node_id: i32,
    address: String,
    began: Instant,
) {
    let gone = refuses_connections(&*transport, &address).await;
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let Some(quorum) = inner.quorum.as_ref() else {
        return;
    };
    let mut heartbeats = quorum.lock_heartbeats();
    heartbeats.probing.remove(&node_id);
    if gone {
        heartbeats.gone.insert(node_id, began);
        drop(heartbeats);
        quorum.fence_wake.notify_one();
    } else {
        heartbeats.closed.remove(&node_id);
    }
}

/// Whether the listener at `address` refuses connections
/// `CONTROLLER_PROBE_REFUSALS` times in a row, `CONTROLLER_PROBE_RETRY_MS`
/// apart: hard evidence that no process serves there. An answer, a timeout
/// or another error proves nothing.
pub(super) async fn refuses_connections(
    transport: &dyn crate::net::Transport,
    address: &str,
) -> bool {
    let connect = Duration::from_millis(CONTROLLER_PROBE_CONNECT_MS);
    for attempt in 0..CONTROLLER_PROBE_REFUSALS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(CONTROLLER_PROBE_RETRY_MS)).await;
        }
        match tokio::time::timeout(connect, transport.connect(address)).await {
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => {}
            _ => return false,
        }
    }
    true
}

/// The metadata leader's connection to this voter closed at `closed_at`: if
/// this is the lowest-numbered other voter (one candidate, so no split vote)
/// and the leader's listener refuses connections, its process is gone, and
/// this voter stands for election as soon as the other voters may grant a
/// vote (their lease on the dead leader, the longest election timeout, has
/// run out since it last reached them, at the latest when its connections
/// closed), instead of waiting out its own random timeout after that. Too
/// early, the vote is refused and raft's own timer still runs: the evidence
/// only hastens an election, it never decides one.
pub(super) async fn elect_on_evidence(inner: Weak<Inner>, leader: NodeId, closed_at: Instant) {
    let Some((transport, address, lease)) = inner.upgrade().and_then(|inner| {
        let quorum = inner.quorum.as_ref()?;
        let leader_id = broker_id_of(leader);
        let own_id = broker_id_of(inner.node_id);
        let first_other = quorum
            .config
            .voters
            .iter()
            .map(|v| v.id)
            .filter(|id| *id != leader_id)
            .min();
        if first_other != Some(own_id) {
            return None;
        }
        let address = quorum.config.voter_address(leader_id)?.to_string();
        let lease = Duration::from_millis(inner.raft.config().election_timeout_max);
        Some((Arc::clone(&quorum.config.transport), address, lease))
    }) else {
        return;
    };
    let probed = Instant::now();
    if !refuses_connections(&*transport, &address).await {
        return;
    }
    // The proof stands for the fence too: elected, this voter fences the
    // dead leader's broker in its first pass, without probing it again.
    if let Some(quorum) = inner.upgrade().as_ref().and_then(|i| i.quorum.as_ref()) {
        quorum
            .lock_heartbeats()
            .gone
            .insert(broker_id_of(leader), probed);
    }
    let at = closed_at + lease + Duration::from_millis(CONTROLLER_ELECTION_AFTER_LEASE_MS);
    tokio::time::sleep_until(at).await;
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let still_led_by_it = {
        let metrics = inner.raft.metrics();
        let metrics = metrics.borrow();
        metrics.current_leader == Some(leader) && metrics.state == ServerState::Follower
    };
    if still_led_by_it {
        tracing::info!(
            leader,
            "the metadata leader's process is gone (its listener refuses connections): standing for election"
        );
        if let Err(error) = inner.raft.trigger().elect().await {
            tracing::debug!(%error, "an election on evidence failed to start");
        }
    }
}
