//! Kafka's ACLs and the decisions of its StandardAuthorizer.
//!
//! A binding (`AclBinding`) says that a principal (`User:alice`, or `User:*`
//! for everyone) from a host (an address, or `*`) is allowed or denied an
//! operation on the resources a pattern names: LITERAL (one name, or `*` for
//! every name) or PREFIXED (every name that starts with it). `Acls` holds
//! the bindings by id and indexes them, so that a decision looks up the
//! resource's name (and the wildcard, and each of its prefixes that some
//! binding uses) instead of scanning every binding.
//!
//! A decision (`Authorizer::authorize`), as Kafka's StandardAuthorizer takes
//! it: a super user is allowed; otherwise among the bindings on the
//! resource that match the principal and host, any DENY of the operation (or
//! of All) wins; an ALLOW of it (or of All) allows, and so do, for Describe,
//! an ALLOW of Read, Write, Delete or Alter, and for DescribeConfigs an ALLOW
//! of AlterConfigs (implication is for ALLOW only); with no match the answer
//! is no, unless no binding at all is on the resource and
//! `allow.everyone.if.no.acl.found` is set.
//!
//! Pure code: the metadata image holds the `Acls`, the server hands in the
//! principal and address. Invariant: the index holds exactly the bindings of
//! `by_id`, each once (checked in debug builds after every change).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use super::Principal;

/// The name of the one cluster resource (Kafka's `kafka-cluster`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// A pattern name or filter host that matches every name or host.
pub const WILDCARD: &str = "*";

/// The principal of a binding that applies to every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// One of Kafka's ACL enums: each begins with UNKNOWN (0) and ANY (1), then
/// its own values from 2; a value's text is its name.
macro_rules! kafka_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $code:literal,)* }) => {
        kafka_enum!(@each $(#[$meta])* $name { Unknown = 0, Any = 1, $($variant = $code,)* });
    };
    (@each $(#[$meta:meta])* $name:ident { $($variant:ident = $code:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($variant,)*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// Kafka's code on the wire; `None` for a code Kafka does not
            /// define (a client sends it as UNKNOWN).
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// A code read from the wire: an unknown one is UNKNOWN.
            pub fn from_wire(code: i8) -> $name {
                $name::from_code(code).unwrap_or($name::Unknown)
            }

            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $($name::$variant => stringify!($variant),)*
                })
            }
        }
    };
}

kafka_enum!(
    /// Kafka's ResourceType.
    ResourceType {
        Topic = 2,
        Group = 3,
        Cluster = 4,
        TransactionalId = 5,
        DelegationToken = 6,
        User = 7,
    }
);

kafka_enum!(
    /// Kafka's PatternType: LITERAL and PREFIXED for bindings; ANY and MATCH
    /// in filters only.
    PatternType {
        Match = 2,
        Literal = 3,
        Prefixed = 4,
    }
);

kafka_enum!(
    /// Kafka's AclOperation.
    Operation {
        All = 2,
        Read = 3,
        Write = 4,
        Create = 5,
        Delete = 6,
        Alter = 7,
        Describe = 8,
        ClusterAction = 9,
        DescribeConfigs = 10,
        AlterConfigs = 11,
        IdempotentWrite = 12,
        CreateTokens = 13,
        DescribeTokens = 14,
    }
);

kafka_enum!(
    /// Kafka's AclPermissionType.
    Permission {
        Deny = 2,
        Allow = 3,
    }
);

impl Operation {
    /// Whether an ALLOW of `self` allows `wanted`: the same operation, All,
    /// or one that implies it (Read, Write, Delete and Alter imply
    /// Describe; AlterConfigs implies DescribeConfigs).
    pub fn allows(self, wanted: Operation) -> bool {
        self == wanted
            || self == Operation::All
            || (wanted == Operation::Describe
                && matches!(
                    self,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ))
            || (wanted == Operation::DescribeConfigs && self == Operation::AlterConfigs)
    }

    /// Whether a DENY of `self` denies `wanted`: the same operation or All
    /// (a denial implies nothing else).
    pub fn denies(self, wanted: Operation) -> bool {
        self == wanted || self == Operation::All
    }
}

/// One ACL binding (Kafka's AccessControlEntryRecord, less its id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    /// An address, or `*`.
    pub host: String,
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

impl AclBinding {
    /// Why Kafka would refuse to create this binding (INVALID_REQUEST), if
    /// it would: its fields must name one resource type, LITERAL or
    /// PREFIXED, one operation, ALLOW or DENY, a non-empty name (the
    /// cluster's is `kafka-cluster`) and a `Type:name` principal.
    pub fn invalid(&self) -> Option<String> {
        if matches!(
            self.resource_type,
            ResourceType::Unknown | ResourceType::Any
        ) {
            return Some(format!("Invalid resourceType {}", self.resource_type));
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return Some(format!("Invalid patternType {}", self.pattern_type));
        }
        if matches!(self.operation, Operation::Unknown | Operation::Any) {
            return Some(format!("Invalid operation {}", self.operation));
        }
        if !matches!(self.permission, Permission::Allow | Permission::Deny) {
            return Some(format!("Invalid permissionType {}", self.permission));
        }
        if self.resource_name.is_empty() {
            return Some("Resource name should not be empty".to_string());
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return Some(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Some(format!(
                    "Invalid principal {}: expected the form Type:name, e.g. User:alice",
                    self.principal
                ))
            }
        }
        if self.host.is_empty() {
            return Some("Invalid empty host: give an address or *".to_string());
        }
        None
    }
}

/// A filter over bindings (DescribeAcls, DeleteAcls): ANY, and absent
/// strings, match everything; pattern type MATCH matches every binding that
/// applies to the name (its literal, the wildcard, its prefixes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclFilter {
    /// Why Kafka would refuse this filter (INVALID_REQUEST): a field it
    /// does not know.
    pub fn invalid(&self) -> Option<String> {
        if self.resource_type == ResourceType::Unknown
            || self.pattern_type == PatternType::Unknown
            || self.operation == Operation::Unknown
            || self.permission == Permission::Unknown
        {
            return Some("The filter has an unknown field".to_string());
        }
        None
    }

    pub fn matches(&self, binding: &AclBinding) -> bool {
        let type_matches =
            self.resource_type == ResourceType::Any || self.resource_type == binding.resource_type;
        let name_matches = match (self.pattern_type, &self.resource_name) {
            (PatternType::Match, Some(name)) => match binding.pattern_type {
                PatternType::Literal => {
                    binding.resource_name == *name || binding.resource_name == WILDCARD
                }
                PatternType::Prefixed => name.starts_with(&binding.resource_name),
                _ => false,
            },
            (PatternType::Any | PatternType::Match, None) => true,
            (PatternType::Any, Some(name)) => binding.resource_name == *name,
            (wanted, name) => {
                wanted == binding.pattern_type
                    && name.as_ref().is_none_or(|n| *n == binding.resource_name)
            }
        };
        type_matches
            && name_matches
            && self
                .principal
                .as_ref()
                .is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && (self.operation == Operation::Any || self.operation == binding.operation)
            && (self.permission == Permission::Any || self.permission == binding.permission)
    }
}

/// Every binding by id, and the index decisions read.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(
    from = "BTreeMap<uuid::Uuid, AclBinding>",
    into = "BTreeMap<uuid::Uuid, AclBinding>"
)]
pub struct Acls {
    by_id: BTreeMap<uuid::Uuid, AclBinding>,
    /// The ids of the bindings on each name, by (type, pattern type).
    index: HashMap<(ResourceType, PatternType), HashMap<String, BTreeSet<uuid::Uuid>>>,
    /// The lengths of the PREFIXED names in use, by resource type: a
    /// decision looks up only the prefixes of a name some binding has.
    prefix_lengths: BTreeMap<ResourceType, BTreeMap<usize, usize>>,
}

impl PartialEq for Acls {
    fn eq(&self, other: &Acls) -> bool {
        self.by_id == other.by_id
    }
}

impl Eq for Acls {}

impl From<BTreeMap<uuid::Uuid, AclBinding>> for Acls {
    fn from(by_id: BTreeMap<uuid::Uuid, AclBinding>) -> Acls {
        let mut acls = Acls::default();
        for (id, binding) in by_id {
            acls.insert(id, binding);
        }
        acls
    }
}

impl From<Acls> for BTreeMap<uuid::Uuid, AclBinding> {
    fn from(acls: Acls) -> BTreeMap<uuid::Uuid, AclBinding> {
        acls.by_id
    }
}

impl Acls {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every binding with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&uuid::Uuid, &AclBinding)> {
        self.by_id.iter()
    }

    /// Whether an identical binding exists (creating it again changes
    /// nothing, as in Kafka).
    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.ids_on(
            binding.resource_type,
            binding.pattern_type,
            &binding.resource_name,
        )
        .is_some_and(|ids| ids.iter().any(|id| self.by_id.get(id) == Some(binding)))
    }

    fn ids_on(
        &self,
        resource_type: ResourceType,
        pattern_type: PatternType,
        name: &str,
    ) -> Option<&BTreeSet<uuid::Uuid>> {
        self.index.get(&(resource_type, pattern_type))?.get(name)
    }

    /// Adds `binding` under `id`; false (and nothing changes) when the id is
    /// taken or an identical binding exists.
    pub fn insert(&mut self, id: uuid::Uuid, binding: AclBinding) -> bool {
        if self.by_id.contains_key(&id) || self.contains(&binding) {
            return false;
        }
        if binding.pattern_type == PatternType::Prefixed {
            *self
                .prefix_lengths
                .entry(binding.resource_type)
                .or_default()
                .entry(binding.resource_name.len())
                .or_default() += 1;
        }
        self.index
            .entry((binding.resource_type, binding.pattern_type))
            .or_default()
            .entry(binding.resource_name.clone())
            .or_default()
            .insert(id);
        self.by_id.insert(id, binding);
        self.debug_check();
        true
    }

    /// Removes the binding `id`, returning it.
    pub fn remove(&mut self, id: &uuid::Uuid) -> Option<AclBinding> {
        let binding = self.by_id.remove(id)?;
        let kind = (binding.resource_type, binding.pattern_type);
        if let Some(names) = self.index.get_mut(&kind) {
            if let Some(ids) = names.get_mut(&binding.resource_name) {
                ids.remove(id);
                if ids.is_empty() {
                    names.remove(&binding.resource_name);
                }
            }
            if names.is_empty() {
                self.index.remove(&kind);
            }
        }
        if binding.pattern_type == PatternType::Prefixed {
            if let Some(lengths) = self.prefix_lengths.get_mut(&binding.resource_type) {
                let length = binding.resource_name.len();
                if let Some(count) = lengths.get_mut(&length) {
                    *count -= 1;
                    if *count == 0 {
                        lengths.remove(&length);
                    }
                }
                if lengths.is_empty() {
                    self.prefix_lengths.remove(&binding.resource_type);
                }
            }
        }
        self.debug_check();
        Some(binding)
    }

    /// The bindings a filter matches, with their ids, in id order.
    pub fn matching<'a>(
        &'a self,
        filter: &'a AclFilter,
    ) -> impl Iterator<Item = (&'a uuid::Uuid, &'a AclBinding)> + 'a {
        self.by_id
            .iter()
            .filter(move |(_, binding)| filter.matches(binding))
    }

    /// Every binding on the resource `(resource_type, name)`: its literal
    /// name's, the wildcard's, and each prefix's.
    fn on_resource<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let literal = std::iter::once(name)
            .chain((name != WILDCARD).then_some(WILDCARD))
            .filter_map(move |n| self.ids_on(resource_type, PatternType::Literal, n));
        let prefixed = self
            .prefix_lengths
            .get(&resource_type)
            .into_iter()
            .flat_map(|lengths| lengths.keys())
            .filter_map(move |length| name.get(..*length))
            .filter_map(move |prefix| self.ids_on(resource_type, PatternType::Prefixed, prefix));
        literal
            .chain(prefixed)
            .flat_map(|ids| ids.iter())
            .filter_map(|id| self.by_id.get(id))
    }

    /// Every binding on resources of `resource_type`.
    fn of_type(&self, resource_type: ResourceType) -> impl Iterator<Item = &AclBinding> + '_ {
        [PatternType::Literal, PatternType::Prefixed]
            .into_iter()
            .filter_map(move |pattern| self.index.get(&(resource_type, pattern)))
            .flat_map(HashMap::values)
            .flat_map(BTreeSet::iter)
            .filter_map(|id| self.by_id.get(id))
    }

    /// The whole index against `by_id`, in a debug build with up to
    /// `DEBUG_CHECK_BINDINGS_MAX` bindings (so bulk loads stay linear).
    #[cfg(debug_assertions)]
    fn debug_check(&self) {
        /// Above this many bindings a debug build checks nothing more.
        const DEBUG_CHECK_BINDINGS_MAX: usize = 1024;
        if self.by_id.len() > DEBUG_CHECK_BINDINGS_MAX {
            return;
        }
        let indexed: usize = self
            .index
            .values()
            .flat_map(HashMap::values)
            .map(BTreeSet::len)
            .sum();
        assert_eq!(indexed, self.by_id.len(), "every binding indexed once");
        let prefixed: usize = self
            .prefix_lengths
            .values()
            .flat_map(BTreeMap::values)
            .sum();
        let expected = self
            .index
            .iter()
            .filter(|((_, pattern), _)| *pattern == PatternType::Prefixed)
            .flat_map(|(_, names)| names.values())
            .map(BTreeSet::len)
            .sum::<usize>();
        assert_eq!(
            prefixed, expected,
            "every prefixed binding's length counted"
        );
    }

    #[cfg(not(debug_assertions))]
    fn debug_check(&self) {}
}

/// Whether requests are authorized, and how (Kafka's `authorizer.class.name`,
/// `super.users`, `allow.everyone.if.no.acl.found`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Authorizer {
    /// No authorizer: every request is allowed, and the ACL APIs answer
    /// SECURITY_DISABLED.
    #[default]
    None,
    Standard {
        /// `Type:name` of each super user.
        super_users: BTreeSet<String>,
        allow_everyone_if_no_acl_found: bool,
    },
}

impl Authorizer {
    pub fn enabled(&self) -> bool {
        matches!(self, Authorizer::Standard { .. })
    }

    /// Whether `principal`, connected from `host`, may do `operation` on
    /// the resource `(resource_type, name)` under `acls`.
    pub fn authorize(
        &self,
        acls: &Acls,
        principal: &Principal,
        host: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let (requester, allow_everyone_if_no_acl_found) = match self.screen(principal, host) {
            ControlFlow::Break(verdict) => return verdict,
            ControlFlow::Continue(screened) => screened,
        };
        let mut any_on_resource = false;
        let mut allowed = false;
        for binding in acls.on_resource(resource_type, name) {
            any_on_resource = true;
            if !requester.named_by(binding) {
                continue;
            }
            match binding.permission {
                Permission::Deny if binding.operation.denies(operation) => return false,
                Permission::Allow if binding.operation.allows(operation) => allowed = true,
                _ => {}
            }
        }
        allowed || (!any_on_resource && allow_everyone_if_no_acl_found)
    }
}

impl Authorizer {
    /// Whether `principal` may do `operation` on some resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`: an idempotent
    /// producer needs Write on some topic): a super user may; a DENY on
    /// the wildcard name refuses; otherwise an ALLOW that no DENY covers
    /// (a literal name no DENY names or prefixes, a prefix no DENY prefix
    /// contains) allows; with no binding on the type at all, the default.
    /// Scans the type's bindings: for the rare request that needs it.
    pub fn authorize_any(
        &self,
        acls: &Acls,
        principal: &Principal,
        host: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let (requester, allow_everyone_if_no_acl_found) = match self.screen(principal, host) {
            ControlFlow::Break(verdict) => return verdict,
            ControlFlow::Continue(screened) => screened,
        };
        let mut any_on_type = false;
        let mut allows: Vec<&AclBinding> = Vec::new();
        let mut denies: Vec<&AclBinding> = Vec::new();
        for binding in acls.of_type(resource_type) {
            any_on_type = true;
            if !requester.named_by(binding) {
                continue;
            }
            match binding.permission {
                Permission::Deny if binding.operation.denies(operation) => {
                    if binding.pattern_type == PatternType::Literal
                        && binding.resource_name == WILDCARD
                    {
                        return false;
                    }
                    denies.push(binding);
                }
                Permission::Allow if binding.operation.allows(operation) => allows.push(binding),
                _ => {}
            }
        }
        let covered = |allow: &AclBinding| {
            denies.iter().any(|deny| match deny.pattern_type {
                PatternType::Prefixed => allow.resource_name.starts_with(&deny.resource_name),
                _ => {
                    allow.pattern_type == PatternType::Literal
                        && deny.resource_name == allow.resource_name
                }
            })
        };
        if allows.iter().any(|allow| !covered(allow)) {
            return true;
        }
        !any_on_type && allow_everyone_if_no_acl_found
    }
}

impl Authorizer {
    /// What is decided before any binding is read: everything without an
    /// authorizer, and for a super user (`Break` with the verdict); else
    /// who asks, and the no-ACL default.
    fn screen(&self, principal: &Principal, host: IpAddr) -> ControlFlow<bool, (Requester, bool)> {
        let Authorizer::Standard {
            super_users,
            allow_everyone_if_no_acl_found,
        } = self
        else {
            return ControlFlow::Break(true);
        };
        let principal = principal.to_string();
        if super_users.contains(&principal) {
            return ControlFlow::Break(true);
        }
        let host = canonical(host).to_string();
        ControlFlow::Continue((
            Requester { principal, host },
            *allow_everyone_if_no_acl_found,
        ))
    }
}

/// Who asks, as bindings name principals and hosts.
struct Requester {
    principal: String,
    host: String,
}

impl Requester {
    /// Whether `binding` is about this requester: its principal or
    /// `User:*`, from its host or `*`.
    fn named_by(&self, binding: &AclBinding) -> bool {
        (binding.principal == self.principal || binding.principal == WILDCARD_PRINCIPAL)
            && (binding.host == WILDCARD || binding.host == self.host)
    }
}

/// An IPv4 address a dual-stack socket reports as `::ffff:a.b.c.d` is
/// matched as `a.b.c.d`, as the client connected with it.
fn canonical(host: IpAddr) -> IpAddr {
    match host {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(host, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests;
