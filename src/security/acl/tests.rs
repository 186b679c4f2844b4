use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

fn binding(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        resource_type,
        resource_name: name.to_string(),
        pattern_type,
        principal: principal.to_string(),
        host: WILDCARD.to_string(),
        operation,
        permission,
    }
}

fn acls(bindings: &[AclBinding]) -> Acls {
    let mut acls = Acls::default();
    for binding in bindings {
        assert!(acls.insert(uuid::Uuid::new_v4(), binding.clone()));
    }
    acls
}

fn standard(allow_everyone_if_no_acl_found: bool) -> Authorizer {
    Authorizer::Standard {
        super_users: ["User:admin".to_string()].into(),
        allow_everyone_if_no_acl_found,
    }
}

const HOST: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));

fn may(acls: &Acls, who: &str, operation: Operation, topic: &str) -> bool {
    standard(false).authorize(
        acls,
        &Principal::user(who),
        HOST,
        operation,
        ResourceType::Topic,
        topic,
    )
}

use Operation::*;
use PatternType::{Literal, Prefixed};
use Permission::{Allow, Deny};
use ResourceType::Topic;

#[test]
fn codes_are_kafkas() {
    assert_eq!(ResourceType::TransactionalId.code(), 5);
    assert_eq!(PatternType::Prefixed.code(), 4);
    assert_eq!(Operation::IdempotentWrite.code(), 12);
    assert_eq!(Permission::Allow.code(), 3);
    assert_eq!(Operation::from_wire(99), Operation::Unknown);
    for operation in Operation::ALL {
        assert_eq!(Operation::from_code(operation.code()), Some(*operation));
    }
}

#[test]
fn literal_wildcard_and_prefixed_patterns_match_their_names() {
    let acls = acls(&[
        binding(Topic, "orders", Literal, "User:alice", Read, Allow),
        binding(Topic, "*", Literal, "User:bob", Write, Allow),
        binding(Topic, "pay", Prefixed, "User:carol", Read, Allow),
    ]);
    assert!(may(&acls, "alice", Read, "orders"));
    assert!(!may(&acls, "alice", Read, "orders2"));
    assert!(may(&acls, "bob", Write, "anything"));
    assert!(may(&acls, "carol", Read, "payments"));
    assert!(may(&acls, "carol", Read, "pay"));
    assert!(!may(&acls, "carol", Read, "pa"));
    assert!(!may(&acls, "carol", Read, "repay"));
    assert!(!may(&acls, "dave", Read, "orders"));
}

#[test]
fn a_deny_wins_over_any_allow_even_a_wildcard_one() {
    let acls = acls(&[
        binding(Topic, "*", Literal, "User:*", All, Allow),
        binding(Topic, "secret", Prefixed, "User:mallory", Read, Deny),
    ]);
    assert!(may(&acls, "mallory", Write, "secret-plans"));
    assert!(!may(&acls, "mallory", Read, "secret-plans"));
    assert!(may(&acls, "alice", Read, "secret-plans"));
    // A DENY of Read does not deny Describe: denial implies nothing.
    assert!(may(&acls, "mallory", Describe, "secret-plans"));
}

#[test]
fn allows_imply_describe_and_describe_configs_but_denies_imply_nothing() {
    for (granted, implied) in [
        (Read, Describe),
        (Write, Describe),
        (Delete, Describe),
        (Alter, Describe),
        (AlterConfigs, DescribeConfigs),
        (All, ClusterAction),
    ] {
        let acls = acls(&[binding(Topic, "t", Literal, "User:alice", granted, Allow)]);
        assert!(
            may(&acls, "alice", implied, "t"),
            "{granted} implies {implied}"
        );
    }
    for (granted, not_implied) in [
        (Describe, Read),
        (Create, Describe),
        (DescribeConfigs, AlterConfigs),
        (Read, Write),
        (AlterConfigs, Describe),
    ] {
        let acls = acls(&[binding(Topic, "t", Literal, "User:alice", granted, Allow)]);
        assert!(
            !may(&acls, "alice", not_implied, "t"),
            "{granted} does not imply {not_implied}"
        );
    }
}

#[test]
fn hosts_match_exactly_or_by_wildcard_and_mapped_v4_reads_as_v4() {
    let mut from_host = binding(Topic, "t", Literal, "User:alice", Read, Allow);
    from_host.host = "10.0.0.7".to_string();
    let acls = acls(&[from_host]);
    let authorizer = standard(false);
    let alice = Principal::user("alice");
    let check = |host| authorizer.authorize(&acls, &alice, host, Read, Topic, "t");
    assert!(check(HOST));
    assert!(!check(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 8))));
    assert!(check(IpAddr::V6(
        Ipv4Addr::new(10, 0, 0, 7).to_ipv6_mapped()
    )));
    assert!(!check(IpAddr::V6(Ipv6Addr::LOCALHOST)));
}

#[test]
fn super_users_and_the_no_acl_default() {
    let acls = acls(&[binding(
        Topic,
        "guarded",
        Literal,
        "User:alice",
        Read,
        Allow,
    )]);
    let admin = Principal::user("admin");
    let bob = Principal::user("bob");
    for open in [false, true] {
        let authorizer = standard(open);
        assert!(authorizer.authorize(&acls, &admin, HOST, Alter, Topic, "guarded"));
        // A resource with a binding: only what it allows.
        assert!(!authorizer.authorize(&acls, &bob, HOST, Read, Topic, "guarded"));
        // A resource without any: the default.
        assert_eq!(
            authorizer.authorize(&acls, &bob, HOST, Read, Topic, "open"),
            open
        );
    }
    assert!(Authorizer::None.authorize(&acls, &bob, HOST, Read, Topic, "guarded"));
}

#[test]
fn identical_bindings_are_kept_once_and_removal_unindexes() {
    let allow = binding(Topic, "pre", Prefixed, "User:alice", Read, Allow);
    let mut acls = Acls::default();
    let id = uuid::Uuid::new_v4();
    assert!(acls.insert(id, allow.clone()));
    assert!(!acls.insert(uuid::Uuid::new_v4(), allow.clone()));
    assert_eq!(acls.len(), 1);
    assert!(may(&acls, "alice", Read, "prefix"));
    assert_eq!(acls.remove(&id), Some(allow));
    assert!(acls.is_empty());
    assert!(!may(&acls, "alice", Read, "prefix"));
    assert!(acls.index.is_empty() && acls.prefix_lengths.is_empty());
}

#[test]
fn filters_match_as_describe_and_delete_acls_do() {
    let bindings = [
        binding(Topic, "rdkafkatest_1", Prefixed, "User:test1", Read, Allow),
        binding(Topic, "rdkafkatest_2", Literal, "User:test2", Write, Allow),
        binding(Topic, "*", Literal, "User:test3", Describe, Deny),
        binding(
            ResourceType::Group,
            "rdkafkatest_2",
            Literal,
            "User:test2",
            Read,
            Allow,
        ),
    ];
    let acls = acls(&bindings);
    let filter = |resource_type, name: Option<&str>, pattern_type, operation| AclFilter {
        resource_type,
        resource_name: name.map(str::to_string),
        pattern_type,
        principal: None,
        host: None,
        operation,
        permission: Permission::Any,
    };
    let count = |f: AclFilter| acls.matching(&f).count();
    // MATCH: the literal, the wildcard and the prefixes that apply.
    assert_eq!(
        count(filter(
            Topic,
            Some("rdkafkatest_2"),
            PatternType::Match,
            Any
        )),
        2
    );
    assert_eq!(
        count(filter(
            Topic,
            Some("rdkafkatest_1x"),
            PatternType::Match,
            Any
        )),
        2
    );
    assert_eq!(count(filter(Topic, None, PatternType::Match, Any)), 3);
    // LITERAL and PREFIXED: that pattern type, the exact name.
    assert_eq!(
        count(filter(Topic, Some("rdkafkatest_2"), Literal, Write)),
        1
    );
    assert_eq!(
        count(filter(Topic, Some("rdkafkatest_2"), Literal, Read)),
        0
    );
    assert_eq!(
        count(filter(Topic, Some("rdkafkatest_1"), Prefixed, Any)),
        1
    );
    // ANY: every pattern type, the exact name.
    assert_eq!(
        count(filter(
            ResourceType::Any,
            Some("rdkafkatest_2"),
            PatternType::Any,
            Any
        )),
        2
    );
    assert_eq!(
        count(filter(ResourceType::Any, None, PatternType::Any, Any)),
        4
    );
    let unknown = filter(ResourceType::Unknown, None, PatternType::Any, Any);
    assert!(unknown.invalid().is_some());
}

#[test]
fn bindings_kafka_refuses_to_create_are_invalid() {
    let good = binding(Topic, "t", Literal, "User:alice", Read, Allow);
    assert_eq!(good.invalid(), None);
    let cases = [
        AclBinding {
            resource_type: ResourceType::Any,
            ..good.clone()
        },
        AclBinding {
            pattern_type: PatternType::Match,
            ..good.clone()
        },
        AclBinding {
            operation: Operation::Any,
            ..good.clone()
        },
        AclBinding {
            permission: Permission::Any,
            ..good.clone()
        },
        AclBinding {
            resource_name: String::new(),
            ..good.clone()
        },
        AclBinding {
            principal: "alice".to_string(),
            ..good.clone()
        },
        AclBinding {
            resource_type: ResourceType::Cluster,
            resource_name: "my-cluster".to_string(),
            ..good.clone()
        },
    ];
    for case in cases {
        assert!(case.invalid().is_some(), "{case:?}");
    }
}

#[test]
fn acls_serialize_as_their_bindings_and_rebuild_the_index() {
    let acls = acls(&[
        binding(Topic, "a", Prefixed, "User:alice", Read, Allow),
        binding(Topic, "b", Literal, "User:bob", Write, Deny),
    ]);
    let json = serde_json::to_string(&acls).expect("serialize");
    let back: Acls = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, acls);
    assert!(may(&back, "alice", Read, "apples"));
}

/// Decisions look up the name, the wildcard and the prefix lengths in use,
/// never every binding: with 10,000 bindings on other topics a decision
/// still finds the one that applies (a property, not a timing).
#[test]
fn decisions_find_the_binding_among_many() {
    let mut acls = Acls::default();
    for i in 0..10_000 {
        let pattern = if i % 2 == 0 { Literal } else { Prefixed };
        acls.insert(
            uuid::Uuid::new_v4(),
            binding(
                Topic,
                &format!("topic-{i:05}"),
                pattern,
                "User:other",
                Read,
                Allow,
            ),
        );
    }
    acls.insert(
        uuid::Uuid::new_v4(),
        binding(Topic, "orders", Literal, "User:alice", Read, Allow),
    );
    assert!(may(&acls, "alice", Read, "orders"));
    assert!(!may(&acls, "alice", Read, "topic-00001-x"));
    assert!(may(&acls, "other", Read, "topic-00001-x"));
    assert_eq!(acls.on_resource(Topic, "orders").count(), 1);
}

#[test]
fn write_on_some_topic_unless_a_deny_covers_every_allow() {
    let authorizer = standard(false);
    let alice = Principal::user("alice");
    let any = |acls: &Acls| authorizer.authorize_any(acls, &alice, HOST, Write, Topic);
    assert!(!any(&Acls::default()));
    assert!(standard(true).authorize_any(&Acls::default(), &alice, HOST, Write, Topic));
    let allowed = acls(&[binding(
        Topic,
        "orders",
        Literal,
        "User:alice",
        Write,
        Allow,
    )]);
    assert!(any(&allowed));
    let mut denied = allowed.clone();
    denied.insert(
        uuid::Uuid::new_v4(),
        binding(Topic, "ord", Prefixed, "User:alice", Write, Deny),
    );
    assert!(!any(&denied));
    let wildcard_denied = acls(&[
        binding(Topic, "orders", Literal, "User:alice", All, Allow),
        binding(Topic, "*", Literal, "User:*", Write, Deny),
    ]);
    assert!(!any(&wildcard_denied));
    let read_only = acls(&[binding(Topic, "orders", Literal, "User:alice", Read, Allow)]);
    assert!(!any(&read_only));
}
