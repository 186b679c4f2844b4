//! Unit tests of `apply`: each states what a client sees for one command at one point in
//! the log.

use super::*;

const BROKER: i32 = 1;

fn image_with_broker() -> MetadataImage {
    let mut image = MetadataImage::default();
    let outcome = image.apply(&MetadataCommand::RegisterBroker(BrokerRegistration::new(
        BROKER,
        "localhost",
        9092,
        None,
    )));
    assert_eq!(outcome, CommandOutcome::Done);
    image
}

fn create(name: &str, partitions: i32) -> (uuid::Uuid, MetadataCommand) {
    let topic_id = uuid::Uuid::new_v4();
    let cmd = MetadataCommand::CreateTopic {
        name: name.to_string(),
        topic_id,
        partitions,
        replication_factor: 1,
        configs: BTreeMap::new(),
        assignments: Vec::new(),
    };
    (topic_id, cmd)
}

fn set(key: &str, value: &str) -> ConfigOp {
    ConfigOp::Set {
        key: key.to_string(),
        value: value.to_string(),
    }
}

fn rejected(outcome: CommandOutcome) -> MetadataError {
    match outcome {
        CommandOutcome::Rejected(e) => e,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn create_topic_places_every_partition_on_the_broker() {
    let mut image = image_with_broker();
    let (topic_id, cmd) = create("orders", 3);
    assert_eq!(image.apply(&cmd), CommandOutcome::TopicCreated { topic_id });
    let topic = &image.topics["orders"];
    assert_eq!(topic.topic_id, topic_id);
    assert_eq!(image.topic_names_by_id[&topic_id], "orders");
    assert_eq!(topic.partitions.len(), 3);
    for (i, p) in topic.partitions.iter().enumerate() {
        assert_eq!(p.partition_index, i as i32);
        assert_eq!(
            (p.leader_id, p.leader_epoch, p.partition_epoch),
            (BROKER, LeaderEpoch::new(0), 0)
        );
        assert_eq!(p.replicas, vec![BROKER]);
        assert_eq!(p.isr, vec![BROKER]);
    }
}

#[test]
fn duplicate_create_is_rejected_and_changes_nothing() {
    let mut image = image_with_broker();
    let (first_id, first) = create("orders", 1);
    image.apply(&first);
    let before = image.clone();
    let (_, second) = create("orders", 5);
    assert_eq!(
        rejected(image.apply(&second)),
        MetadataError::TopicAlreadyExists("orders".to_string())
    );
    assert_eq!(image, before);
    assert_eq!(image.topics["orders"].topic_id, first_id);
}

#[test]
fn create_rejects_bad_partitions_and_replication_factor() {
    let mut image = image_with_broker();
    for partitions in [0, -1, PARTITIONS_PER_TOPIC_MAX + 1] {
        let (_, cmd) = create("t", partitions);
        assert!(matches!(
            rejected(image.apply(&cmd)),
            MetadataError::InvalidPartitions(_)
        ));
    }
    for replication_factor in [0, -1, 2] {
        let cmd = MetadataCommand::CreateTopic {
            name: "t".to_string(),
            topic_id: uuid::Uuid::new_v4(),
            partitions: 1,
            replication_factor,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
        };
        assert!(matches!(
            rejected(image.apply(&cmd)),
            MetadataError::InvalidReplicationFactor(_)
        ));
    }
    assert!(image.topics.is_empty());
}

#[test]
fn delete_by_id_and_unknown_id() {
    let mut image = image_with_broker();
    let (topic_id, cmd) = create("orders", 2);
    image.apply(&cmd);
    let delete = MetadataCommand::DeleteTopic { topic_id };
    assert_eq!(image.apply(&delete), CommandOutcome::Done);
    assert!(image.topics.is_empty());
    assert!(image.topic_names_by_id.is_empty());
    assert_eq!(
        rejected(image.apply(&delete)),
        MetadataError::UnknownTopicId(topic_id)
    );
    // The name is free again, under a new id.
    let (new_id, again) = create("orders", 1);
    assert_eq!(
        image.apply(&again),
        CommandOutcome::TopicCreated { topic_id: new_id }
    );
}

#[test]
fn delete_leaves_a_tombstone_and_the_id_is_never_used_again() {
    let mut image = image_with_broker();
    let (topic_id, cmd) = create("orders", 1);
    image.apply(&cmd);
    assert!(image.deleted_topic_ids.is_empty());
    assert_eq!(
        image.apply(&MetadataCommand::DeleteTopic { topic_id }),
        CommandOutcome::Done
    );
    assert!(image.deleted_topic_ids.contains(&topic_id));

    let before = image.clone();
    let reuse = MetadataCommand::CreateTopic {
        name: "payments".to_string(),
        topic_id,
        partitions: 1,
        replication_factor: 1,
        configs: BTreeMap::new(),
        assignments: Vec::new(),
    };
    assert!(matches!(
        rejected(image.apply(&reuse)),
        MetadataError::InvalidRequest(_)
    ));
    assert_eq!(image, before);
}

#[test]
fn create_partitions_only_increases() {
    let mut image = image_with_broker();
    let (_, cmd) = create("orders", 2);
    image.apply(&cmd);
    let grow = |total_count| MetadataCommand::CreatePartitions {
        name: "orders".to_string(),
        total_count,
    };
    assert_eq!(image.apply(&grow(4)), CommandOutcome::Done);
    let partitions = &image.topics["orders"].partitions;
    assert_eq!(partitions.len(), 4);
    assert_eq!(partitions[3].partition_index, 3);
    assert_eq!(partitions[3].replicas, vec![BROKER]);
    for total in [4, 3] {
        assert!(matches!(
            rejected(image.apply(&grow(total))),
            MetadataError::InvalidPartitions(_)
        ));
    }
    assert_eq!(image.topics["orders"].partitions.len(), 4);
    let unknown = MetadataCommand::CreatePartitions {
        name: "nope".to_string(),
        total_count: 9,
    };
    assert_eq!(
        rejected(image.apply(&unknown)),
        MetadataError::UnknownTopic("nope".to_string())
    );
}

#[test]
fn incremental_config_ops_set_delete_append_subtract() {
    let mut image = image_with_broker();
    let (_, cmd) = create("orders", 1);
    image.apply(&cmd);
    let alter = |ops| MetadataCommand::AlterTopicConfigs {
        name: "orders".to_string(),
        ops,
        replace: false,
    };
    let ops = vec![
        set("retention.ms", "1000"),
        set("segment.bytes", "1024"),
        ConfigOp::Delete {
            key: "segment.bytes".to_string(),
        },
        // No override yet: starts from Kafka's default "delete".
        ConfigOp::Append {
            key: "cleanup.policy".to_string(),
            value: "compact, delete".to_string(),
        },
        ConfigOp::Append {
            key: "leader.replication.throttled.replicas".to_string(),
            value: "0:1,1:1".to_string(),
        },
    ];
    assert_eq!(image.apply(&alter(ops)), CommandOutcome::Done);
    let configs = &image.topics["orders"].configs;
    assert_eq!(
        configs.get("retention.ms").map(String::as_str),
        Some("1000")
    );
    assert_eq!(configs.get("segment.bytes"), None);
    assert_eq!(
        configs.get("cleanup.policy").map(String::as_str),
        Some("delete,compact")
    );
    let subtract = vec![
        ConfigOp::Subtract {
            key: "cleanup.policy".to_string(),
            value: "delete".to_string(),
        },
        ConfigOp::Subtract {
            key: "leader.replication.throttled.replicas".to_string(),
            value: "0:1,1:1".to_string(),
        },
        // Deleting what is not there is fine, as in Kafka.
        ConfigOp::Delete {
            key: "never.set".to_string(),
        },
    ];
    assert_eq!(image.apply(&alter(subtract)), CommandOutcome::Done);
    let configs = &image.topics["orders"].configs;
    assert_eq!(
        configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    assert_eq!(
        configs
            .get("leader.replication.throttled.replicas")
            .map(String::as_str),
        Some("")
    );
}

#[test]
fn replace_keeps_exactly_the_sets_and_rejects_other_ops() {
    let mut image = image_with_broker();
    let (_, cmd) = create("orders", 1);
    image.apply(&cmd);
    let alter = |ops, replace| MetadataCommand::AlterTopicConfigs {
        name: "orders".to_string(),
        ops,
        replace,
    };
    image.apply(&alter(vec![set("a", "1"), set("b", "2")], false));
    assert_eq!(
        image.apply(&alter(vec![set("c", "3")], true)),
        CommandOutcome::Done
    );
    let expected: BTreeMap<String, String> = [("c".to_string(), "3".to_string())].into();
    assert_eq!(image.topics["orders"].configs, expected);

    let bad = vec![
        set("d", "4"),
        ConfigOp::Append {
            key: "cleanup.policy".to_string(),
            value: "compact".to_string(),
        },
    ];
    assert!(matches!(
        rejected(image.apply(&alter(bad, true))),
        MetadataError::InvalidConfig(_)
    ));
    assert_eq!(image.topics["orders"].configs, expected);

    let unknown = MetadataCommand::AlterTopicConfigs {
        name: "nope".to_string(),
        ops: vec![],
        replace: true,
    };
    assert_eq!(
        rejected(image.apply(&unknown)),
        MetadataError::UnknownTopic("nope".to_string())
    );
}

#[test]
fn broker_configs_follow_the_same_semantics() {
    let mut image = image_with_broker();
    let alter = |ops, replace| MetadataCommand::AlterBrokerConfigs { ops, replace };
    image.apply(&alter(vec![set("log.retention.ms", "5")], false));
    image.apply(&alter(
        vec![ConfigOp::Append {
            key: "log.cleanup.policy".to_string(),
            value: "compact".to_string(),
        }],
        false,
    ));
    assert_eq!(
        image
            .broker_configs
            .get("log.cleanup.policy")
            .map(String::as_str),
        Some("delete,compact")
    );
    assert_eq!(image.broker_configs.len(), 2);
    image.apply(&alter(vec![set("x", "y")], true));
    assert_eq!(image.broker_configs.len(), 1);
    assert!(matches!(
        rejected(image.apply(&alter(vec![set("", "y")], false))),
        MetadataError::InvalidConfig(_)
    ));
}

#[test]
fn producer_id_blocks_never_overlap() {
    let mut image = image_with_broker();
    let mut next = 0;
    for count in [1, 1000, 7] {
        let outcome = image.apply(&MetadataCommand::AllocateProducerIds { count });
        assert_eq!(outcome, CommandOutcome::ProducerIds { first: next, count });
        next += count;
    }
    for count in [0, -5, PRODUCER_ID_BLOCK_COUNT_MAX + 1] {
        assert!(matches!(
            rejected(image.apply(&MetadataCommand::AllocateProducerIds { count })),
            MetadataError::InvalidRequest(_)
        ));
    }
    assert_eq!(image.next_producer_id, next);
}

#[test]
fn first_init_cluster_wins() {
    let mut image = MetadataImage::default();
    let init = |id: &str| MetadataCommand::InitCluster {
        cluster_id: id.to_string(),
        features: crate::controller::features::bootstrap(),
    };
    image.apply(&init("first"));
    image.apply(&init("second"));
    assert_eq!(image.cluster_id, "first");
}

/// A log written before feature levels (an InitCluster without them) is at
/// the base `metadata.version`; a new cluster starts at the latest; the
/// records that need the latest are refused below it, the same on every node.
#[test]
fn feature_levels_start_at_the_base_or_the_latest_and_gate_new_records() {
    use crate::controller::features::{
        METADATA_VERSION, METADATA_VERSION_BASE, METADATA_VERSION_LATEST,
    };
    let old: MetadataCommand =
        serde_json::from_str(r#"{"InitCluster":{"cluster_id":"before"}}"#).expect("old entry");
    let mut image = image_with_broker();
    image.apply(&old);
    assert_eq!(image.metadata_version(), METADATA_VERSION_BASE);
    let fence = MetadataCommand::FenceBrokers {
        metadata_version: METADATA_VERSION_LATEST,
        brokers: vec![(BROKER, image.brokers[&BROKER].epoch)],
    };
    assert!(matches!(image.apply(&fence), CommandOutcome::Rejected(_)));
    assert!(!image.brokers[&BROKER].fenced);

    image.note_applied(image.last_applied_index + 1, BROKER);
    let raise = MetadataCommand::UpdateFeatures {
        levels: [(METADATA_VERSION.to_string(), METADATA_VERSION_LATEST)].into(),
    };
    assert_eq!(image.apply(&raise), CommandOutcome::Done);
    assert_eq!(image.metadata_version(), METADATA_VERSION_LATEST);
    assert_eq!(image.features_epoch, image.last_applied_index);
    assert_eq!(image.apply(&fence), CommandOutcome::Done);
    assert!(image.brokers[&BROKER].fenced);
}

/// Two brokers whose sessions expired together are fenced in one step,
/// and no leadership moves onto the second while the first is fenced.
#[test]
fn brokers_fenced_together_never_take_each_others_leaderships() {
    use crate::controller::features::METADATA_VERSION_LATEST;
    let mut image = MetadataImage::default();
    image.apply(&MetadataCommand::InitCluster {
        cluster_id: "c".to_string(),
        features: crate::controller::features::bootstrap(),
    });
    for id in 1..=3 {
        image.note_applied(image.last_applied_index + 1, 1);
        image.apply(&MetadataCommand::RegisterBroker(BrokerRegistration::new(
            id, "h", 9092, None,
        )));
    }
    image.note_applied(image.last_applied_index + 1, 1);
    image.apply(&MetadataCommand::CreateTopic {
        name: "t".to_string(),
        topic_id: uuid::Uuid::from_u128(9),
        partitions: 1,
        replication_factor: 3,
        configs: BTreeMap::new(),
        assignments: vec![vec![1, 2, 3]],
    });
    let epochs = |image: &MetadataImage, id: i32| image.brokers[&id].epoch;
    let fence = MetadataCommand::FenceBrokers {
        metadata_version: METADATA_VERSION_LATEST,
        brokers: vec![(1, epochs(&image, 1)), (2, epochs(&image, 2))],
    };
    let before = image.topics["t"].partitions[0].leader_epoch;
    assert_eq!(image.apply(&fence), CommandOutcome::Done);
    let partition = &image.topics["t"].partitions[0];
    assert_eq!(partition.leader_id, 3);
    assert_eq!(partition.isr, vec![3]);
    assert_eq!(
        partition.leader_epoch,
        before.next(),
        "one leader change, straight to the live broker"
    );
}

/// A proposal retried after its answer was lost is applied once and
/// answered with the first outcome (a CreateTopics answered
/// TOPIC_ALREADY_EXISTS for a topic it had created).
#[test]
fn a_request_retried_is_applied_once_and_answered_alike() {
    use crate::controller::features::METADATA_VERSION_LATEST;
    let mut image = MetadataImage::default();
    image.apply(&MetadataCommand::InitCluster {
        cluster_id: "c".to_string(),
        features: crate::controller::features::bootstrap(),
    });
    image.note_applied(image.last_applied_index + 1, 1);
    image.apply(&MetadataCommand::RegisterBroker(BrokerRegistration::new(
        1, "h", 9092, None,
    )));
    let create = MetadataCommand::Request {
        metadata_version: METADATA_VERSION_LATEST,
        request_id: uuid::Uuid::from_u128(77),
        command: Box::new(MetadataCommand::CreateTopic {
            name: "once".to_string(),
            topic_id: uuid::Uuid::from_u128(5),
            partitions: 1,
            replication_factor: 1,
            configs: BTreeMap::new(),
            assignments: Vec::new(),
        }),
    };
    let first = image.apply(&create);
    assert_eq!(
        first,
        CommandOutcome::TopicCreated {
            topic_id: uuid::Uuid::from_u128(5)
        }
    );
    assert_eq!(image.apply(&create), first, "the retry");
    let allocate = |id: u128| MetadataCommand::Request {
        metadata_version: METADATA_VERSION_LATEST,
        request_id: uuid::Uuid::from_u128(id),
        command: Box::new(MetadataCommand::AllocateProducerIds { count: 10 }),
    };
    let block = image.apply(&allocate(78));
    assert_eq!(image.apply(&allocate(78)), block, "no second block");
    assert_ne!(image.apply(&allocate(79)), block, "another request");
}

#[test]
fn register_broker_replaces_and_validates() {
    let mut image = image_with_broker();
    let moved = BrokerRegistration::new(BROKER, "elsewhere", 19092, Some("r1".to_string()));
    image.apply(&MetadataCommand::RegisterBroker(moved.clone()));
    assert_eq!(image.brokers[&BROKER], moved);
    let bad = BrokerRegistration {
        node_id: -1,
        ..moved
    };
    assert!(matches!(
        rejected(image.apply(&MetadataCommand::RegisterBroker(bad))),
        MetadataError::InvalidRequest(_)
    ));
}

/// An explicit replica assignment is placed as given, never dropped for the placer's.
#[test]
fn create_topic_honours_an_explicit_assignment_and_rejects_a_bad_one() {
    let mut image = image_with_broker();
    let with = |assignments: Vec<Vec<i32>>| {
        let (topic_id, mut cmd) = create("t", assignments.len() as i32);
        if let MetadataCommand::CreateTopic {
            assignments: slot, ..
        } = &mut cmd
        {
            *slot = assignments;
        }
        (topic_id, cmd)
    };
    let (topic_id, cmd) = with(vec![vec![BROKER], vec![BROKER]]);
    assert_eq!(image.apply(&cmd), CommandOutcome::TopicCreated { topic_id });
    let replicas: Vec<Vec<i32>> = image.topics["t"]
        .partitions
        .iter()
        .map(|p| p.replicas.clone())
        .collect();
    assert_eq!(replicas, vec![vec![BROKER], vec![BROKER]]);

    let mut image = image_with_broker();
    for bad in [vec![vec![BROKER + 1]], vec![vec![BROKER, BROKER]]] {
        let (_, cmd) = with(bad.clone());
        assert!(
            matches!(
                rejected(image.apply(&cmd)),
                MetadataError::InvalidReplicaAssignment(_)
            ),
            "{bad:?}"
        );
    }
    assert!(image.topics.is_empty());
}

/// Three unfenced brokers, each registered at its own log index.
fn image_with_three_brokers() -> MetadataImage {
    let mut image = MetadataImage::default();
    for id in 1..=3 {
        image.note_applied(u64::try_from(id).expect("positive"), id);
        let outcome = image.apply(&MetadataCommand::RegisterBroker(BrokerRegistration::new(
            id,
            "localhost",
            9090 + id,
            None,
        )));
        assert_eq!(outcome, CommandOutcome::Done);
    }
    image
}

fn partition(image: &MetadataImage, topic: &str, index: usize) -> PartitionImage {
    image.topics[topic].partitions[index].clone()
}

#[test]
fn broker_epoch_is_the_registration_index_and_fences_check_it() {
    let mut image = image_with_three_brokers();
    assert_eq!(image.brokers[&2].epoch, BrokerEpoch::new(2));
    image.note_applied(10, 1);
    // A fence for an earlier registration changes nothing.
    assert!(matches!(
        rejected(image.apply(&MetadataCommand::FenceBroker {
            node_id: 2,
            epoch: BrokerEpoch::new(1)
        })),
        MetadataError::StaleBrokerEpoch(_)
    ));
    assert!(!image.brokers[&2].fenced);
    image.apply(&MetadataCommand::FenceBroker {
        node_id: 2,
        epoch: BrokerEpoch::new(2),
    });
    assert!(image.brokers[&2].fenced);
    // A re-registration is a new epoch, fenced as a cluster broker registers.
    image.note_applied(11, 1);
    let again = BrokerRegistration {
        fenced: true,
        incarnation_id: uuid::Uuid::new_v4(),
        ..BrokerRegistration::new(2, "localhost", 9092, None)
    };
    image.apply(&MetadataCommand::RegisterBroker(again));
    assert_eq!(image.brokers[&2].epoch, BrokerEpoch::new(11));
    assert!(matches!(
        rejected(image.apply(&MetadataCommand::UnfenceBroker {
            node_id: 2,
            epoch: BrokerEpoch::new(2)
        })),
        MetadataError::StaleBrokerEpoch(_)
    ));
    image.apply(&MetadataCommand::UnfenceBroker {
        node_id: 2,
        epoch: BrokerEpoch::new(11),
    });
    assert!(!image.brokers[&2].fenced);
}

#[test]
fn a_retried_registration_of_the_same_process_keeps_its_epoch() {
    let mut image = image_with_three_brokers();
    image.note_applied(10, 1);
    let registration = BrokerRegistration {
        fenced: true,
        incarnation_id: uuid::Uuid::new_v4(),
        ..BrokerRegistration::new(2, "localhost", 9092, None)
    };
    image.apply(&MetadataCommand::RegisterBroker(registration.clone()));
    assert_eq!(image.brokers[&2].epoch, BrokerEpoch::new(10));
    image.apply(&MetadataCommand::UnfenceBroker {
        node_id: 2,
        epoch: BrokerEpoch::new(10),
    });
    // The retry is applied after the first: it changes nothing, so the
    // epoch the broker learnt from the first still names its registration.
    image.note_applied(12, 1);
    assert!(matches!(
        image.apply(&MetadataCommand::RegisterBroker(registration)),
        CommandOutcome::Done
    ));
    assert_eq!(image.brokers[&2].epoch, BrokerEpoch::new(10));
    assert!(!image.brokers[&2].fenced);
    // A single node registers with the nil incarnation at every start: anew.
    image.note_applied(13, 1);
    image.apply(&MetadataCommand::RegisterBroker(BrokerRegistration::new(
        2,
        "localhost",
        9093,
        None,
    )));
    image.note_applied(14, 1);
    image.apply(&MetadataCommand::RegisterBroker(BrokerRegistration::new(
        2,
        "localhost",
        9094,
        None,
    )));
    assert_eq!(
        (image.brokers[&2].epoch, image.brokers[&2].port),
        (BrokerEpoch::new(14), 9094)
    );
}

#[test]
fn new_partitions_spread_leaders_with_every_live_replica_in_the_isr() {
    let mut image = image_with_three_brokers();
    let (_, mut cmd) = create("t", 3);
    if let MetadataCommand::CreateTopic {
        replication_factor, ..
    } = &mut cmd
    {
        *replication_factor = 3;
    }
    assert!(matches!(
        image.apply(&cmd),
        CommandOutcome::TopicCreated { .. }
    ));
    let mut leaders = std::collections::BTreeSet::new();
    for index in 0..3 {
        let p = partition(&image, "t", index);
        assert_eq!(p.replicas.len(), 3);
        assert_eq!(p.isr, p.replicas);
        assert_eq!(p.leader_id, p.replicas[0]);
        assert_eq!(
            (p.leader_epoch, p.partition_epoch),
            (LeaderEpoch::new(0), 0)
        );
        leaders.insert(p.leader_id);
    }
    assert_eq!(leaders.len(), 3);
}

#[test]
fn fencing_the_only_isr_member_leaves_no_leader_until_it_is_back() {
    let mut image = image_with_three_brokers();
    let (_, cmd) = create("t", 3);
    image.apply(&cmd);
    let led_by_2: Vec<usize> = (0..3)
        .filter(|i| partition(&image, "t", *i).leader_id == 2)
        .collect();
    assert_eq!(led_by_2.len(), 1);
    let before = partition(&image, "t", led_by_2[0]);
    image.apply(&MetadataCommand::FenceBroker {
        node_id: 2,
        epoch: BrokerEpoch::new(2),
    });
    let fenced = partition(&image, "t", led_by_2[0]);
    // Kafka's arithmetic: a leader change bumps both epochs; the last ISR
    // member, which alone holds the data, goes to the ELR (KIP-966).
    assert_eq!(fenced.leader_id, -1);
    assert!(fenced.isr.is_empty());
    assert_eq!(fenced.elr, vec![2]);
    assert_eq!(fenced.leader_epoch, before.leader_epoch.next());
    assert_eq!(fenced.partition_epoch, before.partition_epoch + 1);
    // Partitions led elsewhere are untouched.
    for i in (0..3).filter(|i| *i != led_by_2[0]) {
        assert_eq!(partition(&image, "t", i).partition_epoch, 0);
    }
    // New topics go to live brokers only, and RF above them is refused.
    let (_, mut wide) = create("wide", 1);
    if let MetadataCommand::CreateTopic {
        replication_factor, ..
    } = &mut wide
    {
        *replication_factor = 3;
    }
    assert!(matches!(
        rejected(image.apply(&wide)),
        MetadataError::InvalidReplicationFactor(_)
    ));
    image.apply(&MetadataCommand::UnfenceBroker {
        node_id: 2,
        epoch: BrokerEpoch::new(2),
    });
    let back = partition(&image, "t", led_by_2[0]);
    assert_eq!(back.leader_id, 2);
    assert_eq!(back.leader_epoch, fenced.leader_epoch.next());
    assert_eq!(back.partition_epoch, fenced.partition_epoch + 1);
}

#[test]
fn fencing_a_leader_moves_leadership_to_the_next_live_isr_member() {
    let mut image = image_with_three_brokers();
    // Two replicas in the ISR, as data replication will make them.
    let (_, cmd) = create("t", 1);
    image.apply(&cmd);
    let topic = image
        .topics
        .get_mut("t")
        .map(Arc::make_mut)
        .expect("created");
    topic.partitions[0] = PartitionImage {
        leader_id: 1,
        replicas: vec![1, 2, 3],
        isr: vec![1, 2, 3],
        ..topic.partitions[0].clone()
    };
    let before = partition(&image, "t", 0);
    assert_eq!(before.leader_id, 1);
    image.apply(&MetadataCommand::FenceBroker {
        node_id: 1,
        epoch: BrokerEpoch::new(1),
    });
    let after = partition(&image, "t", 0);
    assert_eq!(after.leader_id, 2);
    assert_eq!(after.isr, vec![2, 3]);
    assert_eq!(after.leader_epoch, before.leader_epoch.next());
    // A follower fenced: it leaves the ISR, the leader stays, no leader epoch bump.
    image.apply(&MetadataCommand::FenceBroker {
        node_id: 3,
        epoch: BrokerEpoch::new(3),
    });
    let shrunk = partition(&image, "t", 0);
    assert_eq!((shrunk.leader_id, shrunk.isr.clone()), (2, vec![2]));
    assert_eq!(shrunk.leader_epoch, after.leader_epoch);
    assert_eq!(shrunk.partition_epoch, after.partition_epoch + 1);
}

/// The topic id of `name`.
fn topic_id_of(image: &MetadataImage, name: &str) -> uuid::Uuid {
    image.topics[name].topic_id
}

fn alter(
    image: &MetadataImage,
    name: &str,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: &[(i32, i64)],
) -> MetadataCommand {
    let leader_id = partition(image, name, 0).leader_id;
    MetadataCommand::AlterPartition {
        topic_id: topic_id_of(image, name),
        partition: 0,
        leader_id,
        leader_epoch: LeaderEpoch::new(leader_epoch),
        partition_epoch,
        new_isr: isr
            .iter()
            .map(|&(id, epoch)| (id, BrokerEpoch::new(epoch)))
            .collect(),
    }
}

#[test]
fn alter_partition_shrinks_and_expands_the_isr_with_the_partition_epoch_as_compare_and_set() {
    let mut image = image_with_three_brokers();
    let (_, mut cmd) = create("t", 1);
    if let MetadataCommand::CreateTopic {
        replication_factor, ..
    } = &mut cmd
    {
        *replication_factor = 3;
    }
    image.apply(&cmd);
    let p = partition(&image, "t", 0);
    let epochs: std::collections::BTreeMap<i32, i64> = image
        .brokers
        .iter()
        .map(|(id, b)| (*id, b.epoch.get()))
        .collect();
    let epoch_of = |id: i32| epochs[&id];
    let leader = p.leader_id;
    let others: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|id| *id != leader)
        .collect();
    // Shrink to the leader and one follower: the partition epoch moves, the leader
    // epoch does not.
    let shrink = alter(
        &image,
        "t",
        0,
        0,
        &[(leader, epoch_of(leader)), (others[0], epoch_of(others[0]))],
    );
    let outcome = image.apply(&shrink);
    let CommandOutcome::PartitionChanged {
        leader_epoch,
        partition_epoch,
        isr,
    } = outcome
    else {
        panic!("shrink refused: {outcome:?}");
    };
    assert_eq!(
        (leader_epoch, partition_epoch, isr.len()),
        (LeaderEpoch::new(0), 1, 2)
    );
    // The same proposal again is stale.
    assert!(matches!(
        image.apply(&shrink),
        CommandOutcome::Rejected(MetadataError::InvalidUpdateVersion(_))
    ));
    // A member with a stale broker epoch may not join (KIP-903).
    let stale = alter(
        &image,
        "t",
        0,
        1,
        &[
            (leader, -1),
            (others[0], -1),
            (others[1], epoch_of(others[1]) - 1),
        ],
    );
    assert!(matches!(
        image.apply(&stale),
        CommandOutcome::Rejected(MetadataError::IneligibleReplica(_))
    ));
    // Without the leader, refused.
    let headless = alter(&image, "t", 0, 1, &[(others[0], -1)]);
    assert!(matches!(
        image.apply(&headless),
        CommandOutcome::Rejected(MetadataError::InvalidRequest(_))
    ));
    // An older leader epoch is fenced.
    let fenced = alter(&image, "t", -1, 1, &[(leader, -1)]);
    assert!(matches!(
        image.apply(&fenced),
        CommandOutcome::Rejected(MetadataError::FencedLeaderEpoch(_))
    ));
    // Back to all three, in replica order.
    let expand = alter(
        &image,
        "t",
        0,
        1,
        &[
            (others[1], epoch_of(others[1])),
            (leader, -1),
            (others[0], -1),
        ],
    );
    assert!(matches!(
        image.apply(&expand),
        CommandOutcome::PartitionChanged { .. }
    ));
    let p = partition(&image, "t", 0);
    assert_eq!(p.isr, p.replicas);
    assert_eq!(
        (p.leader_epoch, p.partition_epoch),
        (LeaderEpoch::new(0), 2)
    );
}

/// A topic "t" of one partition on brokers [1, 2, 3], with `configs`.
fn replicated(image: &mut MetadataImage, configs: &[(&str, &str)]) {
    let cmd = MetadataCommand::CreateTopic {
        name: "t".to_string(),
        topic_id: uuid::Uuid::new_v4(),
        partitions: 1,
        replication_factor: 3,
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        assignments: vec![vec![1, 2, 3]],
    };
    assert!(matches!(
        image.apply(&cmd),
        CommandOutcome::TopicCreated { .. }
    ));
}

fn fence(image: &mut MetadataImage, id: i32, fenced: bool) {
    let epoch = image.brokers[&id].epoch;
    let cmd = if fenced {
        MetadataCommand::FenceBroker { node_id: id, epoch }
    } else {
        MetadataCommand::UnfenceBroker { node_id: id, epoch }
    };
    assert_eq!(image.apply(&cmd), CommandOutcome::Done);
}

#[test]
fn unclean_election_lets_a_live_replica_out_of_the_isr_lead_only_when_enabled() {
    for unclean in [false, true] {
        let mut image = image_with_three_brokers();
        let value = if unclean { "true" } else { "false" };
        replicated(&mut image, &[("unclean.leader.election.enable", value)]);
        fence(&mut image, 2, true);
        fence(&mut image, 3, true);
        fence(&mut image, 1, true);
        let p = partition(&image, "t", 0);
        assert_eq!(
            (p.leader_id, p.isr.clone(), p.elr.clone()),
            (-1, vec![], vec![1]),
            "the last ISR member is the ELR"
        );
        // Broker 3 comes back, out of the ISR and ELR.
        fence(&mut image, 3, false);
        let p = partition(&image, "t", 0);
        if unclean {
            assert_eq!((p.leader_id, p.isr), (3, vec![3]), "unclean: 3 leads alone");
        } else {
            assert_eq!((p.leader_id, p.elr), (-1, vec![1]), "clean: waits for 1");
        }
    }
}

#[test]
fn unclean_election_follows_the_dynamic_broker_default_unless_the_topic_says_otherwise() {
    let mut image = image_with_three_brokers();
    image.apply(&MetadataCommand::AlterBrokerConfigs {
        ops: vec![set("unclean.leader.election.enable", "true")],
        replace: false,
    });
    replicated(&mut image, &[]);
    fence(&mut image, 1, true);
    fence(&mut image, 2, true);
    fence(&mut image, 3, true);
    // Fenced in the order 1, 2, 3: each time another live replica took over
    // (2, then 3 from the ISR), and with none left the last member waits.
    assert_eq!(partition(&image, "t", 0).leader_id, -1);
    fence(&mut image, 1, false);
    assert_eq!(
        partition(&image, "t", 0).leader_id,
        1,
        "the broker default allows it"
    );
}

#[test]
fn preferred_leader_election_gives_each_partition_back_to_its_first_replica() {
    let mut image = image_with_three_brokers();
    replicated(&mut image, &[]);
    fence(&mut image, 1, true);
    assert_eq!(partition(&image, "t", 0).leader_id, 2);
    // 1 is back but out of the ISR: the election is refused, and nothing is
    // imbalanced enough to move.
    fence(&mut image, 1, false);
    let elect = MetadataCommand::ElectLeaders {
        unclean: false,
        partitions: Some(vec![("t".to_string(), 0), ("missing".to_string(), 0)]),
    };
    assert_eq!(
        image.apply(&elect),
        CommandOutcome::Elected(vec![
            (
                "t".to_string(),
                0,
                error_code::PREFERRED_LEADER_NOT_AVAILABLE
            ),
            (
                "missing".to_string(),
                0,
                error_code::UNKNOWN_TOPIC_OR_PARTITION
            ),
        ])
    );
    assert!(image.imbalanced_preferred_leaders(10).is_empty());
    // 1 rejoins the ISR: it is the imbalance, and the election moves the leadership.
    let p = partition(&image, "t", 0);
    let expand = MetadataCommand::AlterPartition {
        topic_id: image.topics["t"].topic_id,
        partition: 0,
        leader_id: 2,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![
            (1, BrokerEpoch::NONE),
            (2, BrokerEpoch::NONE),
            (3, BrokerEpoch::NONE),
        ],
    };
    assert!(matches!(
        image.apply(&expand),
        CommandOutcome::PartitionChanged { .. }
    ));
    assert_eq!(
        image.imbalanced_preferred_leaders(10),
        vec![("t".to_string(), 0)]
    );
    let before = partition(&image, "t", 0).leader_epoch;
    let all = MetadataCommand::ElectLeaders {
        unclean: false,
        partitions: None,
    };
    assert_eq!(
        image.apply(&all),
        CommandOutcome::Elected(vec![("t".to_string(), 0, error_code::NONE)])
    );
    let p = partition(&image, "t", 0);
    assert_eq!((p.leader_id, p.leader_epoch), (1, before.next()));
    assert_eq!(
        image.apply(&all),
        CommandOutcome::Elected(vec![("t".to_string(), 0, error_code::ELECTION_NOT_NEEDED)])
    );
}

/// Four brokers, and topic "t" with one partition on brokers 1, 2 and 3.
fn image_with_four_brokers_and_t() -> MetadataImage {
    let mut image = image_with_three_brokers();
    image.note_applied(4, 1);
    image.apply(&MetadataCommand::RegisterBroker(BrokerRegistration::new(
        4,
        "localhost",
        9094,
        None,
    )));
    replicated(&mut image, &[]);
    image
}

/// Moves partition 0 of "t" to `target` replicas; None cancels its move.
fn move_partition_0(
    target: Option<Vec<i32>>,
    allow_replication_factor_change: bool,
) -> MetadataCommand {
    MetadataCommand::AlterPartitionReassignments {
        reassignments: vec![("t".to_string(), 0, target)],
        allow_replication_factor_change,
    }
}

#[test]
fn a_reassignment_adds_catches_up_then_removes_and_moves_the_leadership() {
    let mut image = image_with_four_brokers_and_t();
    let move_to = |target| move_partition_0(target, false);
    assert_eq!(
        image.apply(&move_to(None)),
        CommandOutcome::Elected(vec![(
            "t".to_string(),
            0,
            error_code::NO_REASSIGNMENT_IN_PROGRESS
        )])
    );
    assert_eq!(
        image.apply(&move_to(Some(vec![2, 3]))),
        CommandOutcome::Elected(vec![(
            "t".to_string(),
            0,
            error_code::INVALID_REPLICATION_FACTOR
        )])
    );
    assert_eq!(
        image.apply(&move_to(Some(vec![2, 3, 9]))),
        CommandOutcome::Elected(vec![(
            "t".to_string(),
            0,
            error_code::INVALID_REPLICA_ASSIGNMENT
        )])
    );
    assert_eq!(
        image.apply(&move_to(Some(vec![2, 3, 4]))),
        CommandOutcome::Elected(vec![("t".to_string(), 0, error_code::NONE)])
    );
    let p = partition(&image, "t", 0);
    assert_eq!(p.replicas, vec![2, 3, 4, 1]);
    assert_eq!(
        (p.adding_replicas.clone(), p.removing_replicas.clone()),
        (vec![4], vec![1])
    );
    assert_eq!((p.leader_id, p.isr.clone()), (1, vec![1, 2, 3]));
    // Broker 4 caught up: the leader adds it to the ISR, which completes the move.
    let expand = MetadataCommand::AlterPartition {
        topic_id: image.topics["t"].topic_id,
        partition: 0,
        leader_id: 1,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: vec![
            (1, BrokerEpoch::NONE),
            (2, BrokerEpoch::NONE),
            (3, BrokerEpoch::NONE),
            (4, BrokerEpoch::NONE),
        ],
    };
    assert!(matches!(
        image.apply(&expand),
        CommandOutcome::PartitionChanged { .. }
    ));
    let done = partition(&image, "t", 0);
    assert_eq!(done.replicas, vec![2, 3, 4]);
    assert!(done.adding_replicas.is_empty() && done.removing_replicas.is_empty());
    assert_eq!((done.leader_id, done.isr.clone()), (2, vec![2, 3, 4]));
    assert!(done.leader_epoch > p.leader_epoch);
}

#[test]
fn a_cancelled_reassignment_returns_to_the_original_replicas() {
    let mut image = image_with_four_brokers_and_t();
    let move_to = |target| move_partition_0(target, true);
    image.apply(&move_to(Some(vec![4, 1, 2, 3])));
    let p = partition(&image, "t", 0);
    assert_eq!(
        (p.replicas.clone(), p.adding_replicas.clone()),
        (vec![4, 1, 2, 3], vec![4])
    );
    image.apply(&move_to(None));
    let p = partition(&image, "t", 0);
    assert_eq!(p.replicas, vec![1, 2, 3]);
    assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
    assert_eq!((p.leader_id, p.isr), (1, vec![1, 2, 3]));
}

/// Re-registers `id` as a restarted process: `clean` says its log dir vouched
/// for a clean shutdown at its last epoch.
fn restart(image: &mut MetadataImage, id: i32, clean: bool) {
    let previous = image.brokers[&id].epoch;
    let index = image.last_applied_index + 1;
    image.note_applied(index, 1);
    let registration = BrokerRegistration {
        fenced: true,
        incarnation_id: uuid::Uuid::new_v4(),
        previous_broker_epoch: if clean { previous } else { BrokerEpoch::NONE },
        ..BrokerRegistration::new(id, "localhost", 9090 + id, None)
    };
    assert_eq!(
        image.apply(&MetadataCommand::RegisterBroker(registration)),
        CommandOutcome::Done
    );
}

fn alter_isr(image: &mut MetadataImage, leader: i32, isr: &[i32]) -> CommandOutcome {
    let p = partition(image, "t", 0);
    image.apply(&MetadataCommand::AlterPartition {
        topic_id: image.topics["t"].topic_id,
        partition: 0,
        leader_id: leader,
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: isr.iter().map(|id| (*id, BrokerEpoch::NONE)).collect(),
    })
}

#[test]
fn replicas_leaving_the_isr_below_min_isr_are_eligible_leaders() {
    let mut image = image_with_three_brokers();
    replicated(&mut image, &[("min.insync.replicas", "2")]);
    // A shrink to min ISR keeps no ELR; one below it puts the leaver in.
    assert!(matches!(
        alter_isr(&mut image, 1, &[1, 2]),
        CommandOutcome::PartitionChanged { .. }
    ));
    assert!(partition(&image, "t", 0).elr.is_empty());
    fence(&mut image, 2, true);
    let p = partition(&image, "t", 0);
    assert_eq!((p.leader_id, p.isr, p.elr), (1, vec![1], vec![2]));
    // The leader goes too: no ISR, both in the ELR, no leader.
    fence(&mut image, 1, true);
    let p = partition(&image, "t", 0);
    assert_eq!((p.leader_id, p.isr, p.elr), (-1, vec![], vec![1, 2]));
    // 3 was out before the high watermark froze: it may not lead.
    fence(&mut image, 3, true);
    fence(&mut image, 3, false);
    assert_eq!(partition(&image, "t", 0).leader_id, -1);
    // 2 comes back: an ELR member leads, alone in the ISR, 1 still eligible.
    let before = partition(&image, "t", 0);
    fence(&mut image, 2, false);
    let p = partition(&image, "t", 0);
    assert_eq!((p.leader_id, p.isr, p.elr), (2, vec![2], vec![1]));
    assert_eq!(p.leader_epoch, before.leader_epoch.next());
    // Back to min ISR: the ELR is cleared.
    assert!(matches!(
        alter_isr(&mut image, 2, &[2, 3]),
        CommandOutcome::PartitionChanged { .. }
    ));
    let p = partition(&image, "t", 0);
    assert_eq!((p.isr, p.elr), (vec![2, 3], vec![]));
}

#[test]
fn an_unclean_restart_leaves_the_elr_and_a_clean_one_stays() {
    let mut image = image_with_three_brokers();
    replicated(&mut image, &[("min.insync.replicas", "2")]);
    fence(&mut image, 3, true);
    fence(&mut image, 2, true);
    fence(&mut image, 1, true);
    assert_eq!(partition(&image, "t", 0).elr, vec![1, 2]);
    // 2 shut down cleanly: its restart keeps it eligible.
    restart(&mut image, 2, true);
    assert_eq!(partition(&image, "t", 0).elr, vec![1, 2]);
    // 1 was killed: its restart may have lost unflushed records.
    restart(&mut image, 1, false);
    assert_eq!(partition(&image, "t", 0).elr, vec![2]);
    // 1 is back first but only 2 may lead.
    fence(&mut image, 1, false);
    assert_eq!(partition(&image, "t", 0).leader_id, -1);
    fence(&mut image, 2, false);
    let p = partition(&image, "t", 0);
    assert_eq!((p.leader_id, p.isr, p.elr), (2, vec![2], vec![]));
}

#[test]
fn when_every_eligible_replica_restarted_uncleanly_the_last_known_one_leads() {
    let mut image = image_with_three_brokers();
    replicated(&mut image, &[]);
    fence(&mut image, 1, true);
    fence(&mut image, 2, true);
    fence(&mut image, 3, true);
    // With min ISR 1 the ELR is the last ISR member alone.
    let p = partition(&image, "t", 0);
    assert_eq!((p.isr, p.elr), (vec![], vec![3]));
    restart(&mut image, 3, false);
    let p = partition(&image, "t", 0);
    assert_eq!((p.elr, p.last_known_elr), (vec![], vec![3]));
    // Another replica may not lead (unclean election is off); the last known
    // ELR member may (Kafka's balanced recovery), and the record is cleared.
    restart(&mut image, 1, false);
    fence(&mut image, 1, false);
    assert_eq!(partition(&image, "t", 0).leader_id, -1);
    fence(&mut image, 3, false);
    let p = partition(&image, "t", 0);
    assert_eq!((p.leader_id, p.isr), (3, vec![3]));
    assert!(p.elr.is_empty() && p.last_known_elr.is_empty());
}

#[test]
fn a_changed_min_isr_clears_the_elr() {
    let mut image = image_with_three_brokers();
    replicated(&mut image, &[("min.insync.replicas", "3")]);
    fence(&mut image, 3, true);
    assert_eq!(partition(&image, "t", 0).elr, vec![3]);
    let epoch = partition(&image, "t", 0).partition_epoch;
    image.apply(&MetadataCommand::AlterTopicConfigs {
        name: "t".to_string(),
        ops: vec![set("min.insync.replicas", "2")],
        replace: false,
    });
    let p = partition(&image, "t", 0);
    assert!(p.elr.is_empty());
    assert_eq!(p.partition_epoch, epoch + 1);
    // A broker default that the topic overrides changes nothing.
    image.apply(&MetadataCommand::AlterBrokerConfigs {
        ops: vec![set("min.insync.replicas", "1")],
        replace: false,
    });
    assert_eq!(partition(&image, "t", 0).partition_epoch, epoch + 1);
}

/// A broker registers the partition replicas its open file limit has room
/// for; a CreateTopics or CreatePartitions that would take it past them is
/// refused with POLICY_VIOLATION, naming the limit, and changes nothing.
#[test]
fn partitions_past_a_brokers_budget_are_refused() {
    let mut image = MetadataImage::default();
    let mut registration = BrokerRegistration::new(1, "h", 9092, None);
    registration.partition_budget = Some(10);
    image.note_applied(1, 1);
    image.apply(&MetadataCommand::RegisterBroker(registration));
    let create = |name: &str, partitions: i32, id: u128| MetadataCommand::CreateTopic {
        name: name.to_string(),
        topic_id: uuid::Uuid::from_u128(id),
        partitions,
        replication_factor: 1,
        configs: BTreeMap::new(),
        assignments: Vec::new(),
    };
    assert!(matches!(
        image.apply(&create("fits", 8, 1)),
        CommandOutcome::TopicCreated { .. }
    ));
    let refused = image.apply(&create("too-many", 3, 2));
    let CommandOutcome::Rejected(MetadataError::PolicyViolation(message)) = refused else {
        panic!("{refused:?}");
    };
    assert!(message.contains("open file limit"), "{message}");
    assert!(!image.topics.contains_key("too-many"));
    let grow = |total_count| MetadataCommand::CreatePartitions {
        name: "fits".to_string(),
        total_count,
    };
    assert!(matches!(
        image.apply(&grow(11)),
        CommandOutcome::Rejected(MetadataError::PolicyViolation(_))
    ));
    assert_eq!(image.apply(&grow(10)), CommandOutcome::Done);
    assert_eq!(image.topics["fits"].partitions.len(), 10);

    // A reassignment onto a broker is checked against its budget too.
    let mut second = BrokerRegistration::new(2, "h", 9093, None);
    second.partition_budget = Some(1);
    image.note_applied(image.last_applied_index + 1, 1);
    image.apply(&MetadataCommand::RegisterBroker(second));
    let reassign = |index: i32| MetadataCommand::AlterPartitionReassignments {
        reassignments: vec![("fits".to_string(), index, Some(vec![2]))],
        allow_replication_factor_change: true,
    };
    assert_eq!(
        image.apply(&reassign(0)),
        CommandOutcome::Elected(vec![("fits".to_string(), 0, error_code::NONE)])
    );
    assert_eq!(
        image.apply(&reassign(1)),
        CommandOutcome::Elected(vec![("fits".to_string(), 1, error_code::POLICY_VIOLATION)])
    );
}

/// SCRAM credentials need their `metadata.version`; each user's changes
/// apply together or not at all; `only_if_absent` keeps a credential a user
/// already has.
#[test]
fn scram_credentials_are_gated_and_each_users_changes_apply_whole() {
    use crate::controller::command::{ScramDeletion, ScramUpsertion};
    use crate::controller::features::{METADATA_VERSION, METADATA_VERSION_SCRAM};
    use crate::security::scram::{ScramCredential, ScramMechanism};
    let credential =
        |password: &str| ScramCredential::from_password(ScramMechanism::Sha256, password, 4096);
    let upsert = |name: &str, password: &str| ScramUpsertion {
        name: name.to_string(),
        mechanism: 1,
        credential: credential(password),
    };
    let alter =
        |upsertions, deletions, only_if_absent| MetadataCommand::AlterUserScramCredentials {
            metadata_version: METADATA_VERSION_SCRAM,
            upsertions,
            deletions,
            only_if_absent,
        };
    let mut image = image_with_broker();
    image.set_features(&[(METADATA_VERSION.to_string(), METADATA_VERSION_SCRAM - 1)].into());
    let first = alter(vec![upsert("alice", "a")], vec![], false);
    assert!(matches!(image.apply(&first), CommandOutcome::Rejected(_)));
    assert!(image.scram_credentials.is_empty());

    image.set_features(&[(METADATA_VERSION.to_string(), METADATA_VERSION_SCRAM)].into());
    assert_eq!(
        image.apply(&first),
        CommandOutcome::UsersAltered(vec![("alice".to_string(), 0, None)])
    );
    let alice = image.scram_credentials["alice"][&1].clone();

    // bob's deletion of a credential he lacks fails bob whole; alice's
    // change applies.
    let mixed = alter(
        vec![upsert("bob", "b"), upsert("alice", "a2")],
        vec![ScramDeletion {
            name: "bob".to_string(),
            mechanism: 2,
        }],
        false,
    );
    let CommandOutcome::UsersAltered(results) = image.apply(&mixed) else {
        panic!("not applied");
    };
    assert_eq!(results[0].0, "bob");
    assert_eq!(results[0].1, crate::error_code::RESOURCE_NOT_FOUND);
    assert_eq!(results[1], ("alice".to_string(), 0, None));
    assert!(!image.scram_credentials.contains_key("bob"));
    assert_ne!(image.scram_credentials["alice"][&1], alice);

    // Users created at start keep what they have.
    let changed = image.scram_credentials["alice"][&1].clone();
    let at_start = alter(
        vec![upsert("alice", "a"), upsert("carol", "c")],
        vec![],
        true,
    );
    image.apply(&at_start);
    assert_eq!(image.scram_credentials["alice"][&1], changed);
    assert!(image.scram_credentials.contains_key("carol"));

    // Deleting a user's last credential removes the user.
    let delete = alter(
        vec![],
        vec![ScramDeletion {
            name: "carol".to_string(),
            mechanism: 1,
        }],
        false,
    );
    image.apply(&delete);
    assert!(!image.scram_credentials.contains_key("carol"));
}

/// A partition for the invariant checks to be shown wrong: led by 1, ISR [1, 2]
/// of replicas [1, 2, 3].
fn led_by_1() -> PartitionImage {
    PartitionImage::new(0, vec![1, 2, 3], 1, vec![1, 2])
}

#[test]
#[should_panic(expected = "the leader is in the ISR")]
fn a_change_leaving_the_leader_out_of_the_isr_is_caught() {
    led_by_1().update(|p| {
        p.isr = vec![2];
        p.partition_epoch += 1;
    });
}

#[test]
#[should_panic(expected = "the ISR is a subset of the replicas")]
fn an_isr_member_that_is_no_replica_is_caught() {
    led_by_1().update(|p| p.isr.push(4));
}

#[test]
#[should_panic(expected = "the ELR and the ISR are disjoint")]
fn an_elr_member_in_the_isr_is_caught() {
    led_by_1().update(|p| p.elr = vec![2]);
}

#[test]
#[should_panic(expected = "the partition epoch only grows")]
fn a_partition_epoch_going_back_is_caught() {
    let mut partition = led_by_1();
    partition.partition_epoch = 5;
    partition.update(|p| p.partition_epoch = 4);
}

#[test]
#[should_panic(expected = "a new leader has a new leader epoch")]
fn a_new_leader_in_the_old_leader_epoch_is_caught() {
    led_by_1().update(|p| {
        p.leader_id = 2;
        p.partition_epoch += 1;
    });
}

#[test]
#[should_panic(expected = "the broker epoch only grows")]
fn a_broker_epoch_going_back_is_caught() {
    let mut previous = BrokerRegistration::new(1, "localhost", 9092, None);
    previous.epoch = BrokerEpoch::new(7);
    let mut next = previous.clone();
    next.epoch = BrokerEpoch::new(6);
    next.check_invariants(Some(&previous));
}
