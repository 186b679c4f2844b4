//! UpdateFeatures: `kafka-features.sh upgrade|downgrade` and the admin
//! clients' `updateFeatures` finalize feature levels, checked as Kafka's
//! FeatureControlManager checks them against the upgrade type, the levels
//! this node supports, and every registered broker's supported levels. Any
//! failure fails the whole request with INVALID_UPDATE_VERSION and changes
//! nothing; validate-only checks and changes nothing. A `metadata.version`
//! downgrade is refused (it might drop metadata the older level cannot hold).
//! Needs Alter on the cluster: else, as Kafka's controller answers, the
//! top-level CLUSTER_AUTHORIZATION_FAILED, no per-feature results, nothing
//! changed.

use std::collections::BTreeMap;

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use super::common::{message, propose, Rejection};
use crate::controller::features::{
    self, metadata_version_name, METADATA_VERSION, METADATA_VERSION_BASE, METADATA_VERSION_LATEST,
};
use crate::controller::{MetadataCommand, MetadataImage};
use crate::error_code;
use crate::protocol::context::Cluster;
use crate::protocol::RequestContext;
use crate::security::acl::Operation;

/// v0 and v1 (v1: the upgrade type in place of allow-downgrade, and
/// validate-only); v2 drops the per-feature results and is not served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// Kafka's FeatureUpdate.UpgradeType.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

pub async fn handle(
    cluster: &Cluster,
    ctx: &RequestContext,
    request: UpdateFeaturesRequest,
) -> UpdateFeaturesResponse {
    if !ctx.authorize_cluster(Operation::Alter) {
        return answer(
            Vec::new(),
            Err((
                error_code::CLUSTER_AUTHORIZATION_FAILED,
                super::common::authorization_failed(error_code::CLUSTER_AUTHORIZATION_FAILED)
                    .to_string(),
            )),
        );
    }
    let image = cluster.image();
    let names: Vec<StrBytes> = request
        .feature_updates
        .iter()
        .map(|update| update.feature.clone())
        .collect();
    let mut levels = BTreeMap::new();
    let mut verdict = Ok(());
    for update in &request.feature_updates {
        // v0 says allow-downgrade; v1 names the upgrade type.
        let upgrade_type = if ctx.api_version == 0 {
            if update.allow_downgrade {
                SAFE_DOWNGRADE
            } else {
                UPGRADE
            }
        } else {
            update.upgrade_type
        };
        let feature = update.feature.as_str();
        let level = update.max_version_level;
        if let Err(reason) = check(&image, feature, level, upgrade_type) {
            verdict = Err((
                error_code::INVALID_UPDATE_VERSION,
                format!("Invalid update version {level} for feature {feature}. {reason}"),
            ));
            break;
        }
        // A level already finalized needs no record.
        if image.finalized_features().get(feature) != Some(&level) {
            levels.insert(feature.to_string(), level);
        }
    }
    if verdict.is_ok() && !request.validate_only && !levels.is_empty() {
        verdict = propose(cluster, MetadataCommand::UpdateFeatures { levels })
            .await
            .map(|_| ());
    }
    answer(names, verdict)
}

/// Why `feature` may not go to `level`, if it may not.
fn check(image: &MetadataImage, feature: &str, level: i16, upgrade_type: i8) -> Result<(), String> {
    if !(UPGRADE..=UNSAFE_DOWNGRADE).contains(&upgrade_type) {
        return Err("The controller does not support the given upgrade type.".to_string());
    }
    if level < 0 {
        return Err("A feature version cannot be less than 0.".to_string());
    }
    let finalized = image.finalized_features();
    let current = finalized.get(feature).copied().unwrap_or(0);
    if level < current && upgrade_type == UPGRADE {
        return Err(
            "Can't downgrade the version of this feature without setting the upgrade \
                    type to either safe or unsafe downgrade."
                .to_string(),
        );
    }
    if level > current && upgrade_type != UPGRADE {
        return Err("Can't downgrade to a newer version.".to_string());
    }
    if feature == METADATA_VERSION {
        if !(METADATA_VERSION_BASE..=METADATA_VERSION_LATEST).contains(&level) {
            return Err(format!(
                "Invalid metadata.version {level}. Valid versions are from \
                 {METADATA_VERSION_BASE} to {METADATA_VERSION_LATEST}."
            ));
        }
        if level < current {
            return Err(format!(
                "Unsupported metadata.version downgrade from {} to {}. Refusing to perform the \
                 requested downgrade because it might delete metadata information.",
                metadata_version_name(current),
                metadata_version_name(level)
            ));
        }
    }
    let supports = |range: Option<(i16, i16)>| {
        range.is_some_and(|(min, max)| (min..=max).contains(&level))
            || (level == 0 && feature != METADATA_VERSION)
    };
    let ours = features::supported().get(feature).copied();
    if !supports(ours) {
        return Err(match ours {
            Some((min, max)) => format!(
                "Local controller {} only supports versions {min}-{max}",
                image.controller_id
            ),
            None => format!(
                "Local controller {} does not support this feature.",
                image.controller_id
            ),
        });
    }
    for broker in image.brokers.values() {
        let range = broker.supports(feature);
        if !supports(range) {
            return Err(match range {
                Some((min, max)) => format!(
                    "Broker {} only supports versions {min}-{max}",
                    broker.node_id
                ),
                None => format!("Broker {} does not support this feature.", broker.node_id),
            });
        }
    }
    Ok(())
}

/// The response: the top-level outcome, and each feature's (the same).
fn answer(names: Vec<StrBytes>, verdict: Result<(), Rejection>) -> UpdateFeaturesResponse {
    let (code, text) = match verdict {
        Ok(()) => (error_code::NONE, None),
        Err((code, text)) => (code, Some(text)),
    };
    let results = names
        .into_iter()
        .map(|feature| {
            UpdatableFeatureResult::default()
                .with_feature(feature)
                .with_error_code(code)
                .with_error_message(text.clone().and_then(message))
        })
        .collect();
    UpdateFeaturesResponse::default()
        .with_error_code(code)
        .with_error_message(text.and_then(message))
        .with_results(results)
}
