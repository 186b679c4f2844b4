//! DescribeUserScramCredentials (KIP-554): each user's SCRAM mechanisms and
//! iterations, never a salt or a key. No users named (null or empty) lists
//! every user; a user named twice, or one without credentials, gets Kafka's
//! error for that user. Needs Describe on the cluster, else the top-level
//! CLUSTER_AUTHORIZATION_FAILED and each named user's the same, nothing
//! described (Kafka's error response).

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::message;
use crate::controller::MetadataImage;
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let image = cluster.image();
    let named: Vec<String> = request
        .users
        .unwrap_or_default()
        .into_iter()
        .map(|user| user.name.to_string())
        .collect();
    if !ctx.authorize_cluster(Operation::Describe) {
        let text = super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED);
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED)
            .with_error_message(message(text))
            .with_results(
                named
                    .iter()
                    .map(|user| {
                        failed(
                            user,
                            error_code::CLUSTER_AUTHORIZATION_FAILED,
                            text.to_string(),
                        )
                    })
                    .collect(),
            );
    }
    let results = if named.is_empty() {
        image
            .scram_credentials
            .keys()
            .map(|user| described(&image, user))
            .collect()
    } else {
        let mut results = Vec::with_capacity(named.len());
        for (index, user) in named.iter().enumerate() {
            let repeated = named.iter().filter(|other| *other == user).count() > 1;
            if repeated {
                // One result per duplicated name, as Kafka gives.
                if named[..index].contains(user) {
                    continue;
                }
                results.push(failed(
                    user,
                    error_code::DUPLICATE_RESOURCE,
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                ));
            } else if image.scram_credentials.contains_key(user) {
                results.push(described(&image, user));
            } else {
                results.push(failed(
                    user,
                    error_code::RESOURCE_NOT_FOUND,
                    format!("Attempt to describe a user credential that does not exist: {user}"),
                ));
            }
        }
        results
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

fn described(image: &MetadataImage, user: &str) -> DescribeUserScramCredentialsResult {
    let infos = image
        .scram_credentials
        .get(user)
        .map(|by_mechanism| {
            by_mechanism
                .iter()
                .map(|(mechanism, credential)| {
                    CredentialInfo::default()
                        .with_mechanism(*mechanism)
                        .with_iterations(i32::try_from(credential.iterations).unwrap_or(i32::MAX))
                })
                .collect()
        })
        .unwrap_or_default();
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_credential_infos(infos)
}

fn failed(user: &str, code: i16, text: String) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default()
        .with_user(StrBytes::from_string(user.to_string()))
        .with_error_code(code)
        .with_error_message(message(text))
}
