//! AlterUserScramCredentials (KIP-554), as `kafka-configs.sh --alter
//! --add-config 'SCRAM-SHA-512=[password=...]'` and the admin clients send
//! it: the client salts and hashes the password, so it never reaches the
//! broker; the credential's StoredKey and ServerKey are derived from the
//! salted password and written to the metadata log. Each user's changes
//! apply together or not at all, checked as Kafka's ScramControlManager
//! checks them; a user named twice for one mechanism fails whole. Needs
//! Alter on the cluster, else every user named (sorted, as Kafka's error
//! response lists them) gets CLUSTER_AUTHORIZATION_FAILED and nothing
//! changes.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::{message, propose};
use crate::controller::command::{ScramDeletion, ScramUpsertion};
use crate::controller::features::{metadata_version_name, METADATA_VERSION_SCRAM};
use crate::controller::{CommandOutcome, MetadataCommand};
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;
use crate::security::scram::{
    ScramCredential, ScramMechanism, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// The longest salt or salted password taken, in bytes (a SHA-512 key is
/// 64; salts are usually 16 to 64).
const SCRAM_FIELD_BYTES_MAX: usize = 1024;

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if !ctx.authorize_cluster(Operation::Alter) {
        let users: BTreeSet<&str> = request
            .deletions
            .iter()
            .map(|d| d.name.as_str())
            .chain(request.upsertions.iter().map(|u| u.name.as_str()))
            .collect();
        let results = users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user.to_string()))
                    .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED)
                    .with_error_message(message(super::common::authorization_failed(
                        error_code::CLUSTER_AUTHORIZATION_FAILED,
                    )))
            })
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
    // Each user's verdict, in the order users first appear.
    let mut users: Vec<String> = Vec::new();
    let mut refused: BTreeMap<String, (i16, String)> = BTreeMap::new();
    let mut seen: Vec<(String, i8)> = Vec::new();
    let mut deletions = Vec::new();
    let mut upsertions = Vec::new();
    let refuse = |refused: &mut BTreeMap<String, (i16, String)>, user: &str, code, text| {
        refused.entry(user.to_string()).or_insert((code, text));
    };
    for deletion in &request.deletions {
        let user = deletion.name.to_string();
        if !users.contains(&user) {
            users.push(user.clone());
        }
        if let Some(rejection) = check(&user, deletion.mechanism, None) {
            refuse(&mut refused, &user, rejection.0, rejection.1);
        } else if seen.contains(&(user.clone(), deletion.mechanism)) {
            refuse(
                &mut refused,
                &user,
                error_code::DUPLICATE_RESOURCE,
                duplicate(),
            );
        } else {
            seen.push((user.clone(), deletion.mechanism));
            deletions.push(ScramDeletion {
                name: user,
                mechanism: deletion.mechanism,
            });
        }
    }
    for upsertion in &request.upsertions {
        let user = upsertion.name.to_string();
        if !users.contains(&user) {
            users.push(user.clone());
        }
        let fields = (
            upsertion.iterations,
            upsertion.salt.len(),
            upsertion.salted_password.len(),
        );
        if let Some(rejection) = check(&user, upsertion.mechanism, Some(fields)) {
            refuse(&mut refused, &user, rejection.0, rejection.1);
        } else if seen.contains(&(user.clone(), upsertion.mechanism)) {
            refuse(
                &mut refused,
                &user,
                error_code::DUPLICATE_RESOURCE,
                duplicate(),
            );
        } else if let Some(mechanism) = ScramMechanism::from_kafka_type(upsertion.mechanism) {
            seen.push((user.clone(), upsertion.mechanism));
            upsertions.push(ScramUpsertion {
                name: user,
                mechanism: upsertion.mechanism,
                credential: ScramCredential::from_salted_password(
                    mechanism,
                    &upsertion.salted_password,
                    upsertion.salt.to_vec(),
                    u32::try_from(upsertion.iterations).unwrap_or(0),
                ),
            });
        }
    }
    deletions.retain(|d| !refused.contains_key(&d.name));
    upsertions.retain(|u| !refused.contains_key(&u.name));

    let mut outcomes: BTreeMap<String, (i16, Option<String>)> = BTreeMap::new();
    if !deletions.is_empty() || !upsertions.is_empty() {
        let image = cluster.image();
        let verdict = if image.metadata_version() < METADATA_VERSION_SCRAM {
            Err((
                error_code::UNSUPPORTED_VERSION,
                format!(
                    "SCRAM credentials need metadata.version {} (the cluster is at {}): \
                     raise it with kafka-features.sh upgrade",
                    metadata_version_name(METADATA_VERSION_SCRAM),
                    metadata_version_name(image.metadata_version())
                ),
            ))
        } else {
            propose(
                cluster,
                MetadataCommand::AlterUserScramCredentials {
                    metadata_version: METADATA_VERSION_SCRAM,
                    upsertions,
                    deletions,
                    only_if_absent: false,
                },
            )
            .await
        };
        match verdict {
            Ok(CommandOutcome::UsersAltered(results)) => {
                for (user, code, text) in results {
                    outcomes.insert(user, (code, text));
                }
            }
            Ok(other) => {
                tracing::error!(
                    ?other,
                    "AlterUserScramCredentials applied with an unexpected outcome"
                );
            }
            Err((code, text)) => {
                for user in &users {
                    if !refused.contains_key(user) {
                        outcomes.insert(user.clone(), (code, Some(text.clone())));
                    }
                }
            }
        }
    }
    let results = users
        .into_iter()
        .map(|user| {
            let (code, text) = match refused.remove(&user) {
                Some((code, text)) => (code, Some(text)),
                None => outcomes.remove(&user).unwrap_or((
                    error_code::UNKNOWN_SERVER_ERROR,
                    Some("the change was not applied".to_string()),
                )),
            };
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user))
                .with_error_code(code)
                .with_error_message(text.and_then(message))
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

fn duplicate() -> String {
    "A user credential cannot be altered twice in the same request".to_string()
}

/// Why a change for `user` and `mechanism` is refused (Kafka's checks, in
/// its order); `fields` are an upsertion's iterations, salt and salted
/// password lengths.
fn check(user: &str, mechanism: i8, fields: Option<(i32, usize, usize)>) -> Option<(i16, String)> {
    if user.is_empty() {
        return Some((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "Username must not be empty".to_string(),
        ));
    }
    if ScramMechanism::from_kafka_type(mechanism).is_none() {
        return Some((
            error_code::UNSUPPORTED_SASL_MECHANISM,
            "Unknown SCRAM mechanism".to_string(),
        ));
    }
    let (iterations, salt, salted_password) = fields?;
    if iterations < SCRAM_ITERATIONS_MIN as i32 {
        return Some((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "Too few iterations".to_string(),
        ));
    }
    if iterations > SCRAM_ITERATIONS_MAX as i32 {
        return Some((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "Too many iterations".to_string(),
        ));
    }
    if salt == 0
        || salted_password == 0
        || salt > SCRAM_FIELD_BYTES_MAX
        || salted_password > SCRAM_FIELD_BYTES_MAX
    {
        return Some((
            error_code::UNACCEPTABLE_CREDENTIAL,
            "The salt and the salted password must be given".to_string(),
        ));
    }
    None
}
