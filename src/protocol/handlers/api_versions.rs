//! ApiVersions: what this broker implements, read from the dispatch table,
//! which dispatch hands in (the table is built from every handler's `VERSIONS`,
//! so this handler does not import it back).
//! Answered with response header v0 at every version (clients parse it before
//! they know our versions) and, for a too-new request, in v0 with
//! UNSUPPORTED_VERSION and our ApiVersions range (KIP-511), as Kafka does.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::controller::{features, MetadataImage};
use crate::error_code;
use crate::protocol::codec::{self, FrameError};

pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// The response header version of ApiVersions at any version.
const RESPONSE_HEADER_VERSION: i16 = 0;

fn api_version(api_key: ApiKey, range: VersionRange) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(api_key as i16)
        .with_min_version(range.min)
        .with_max_version(range.max)
}

/// Our full list, `supported`, which is the dispatch table, and from v3 (in
/// tagged fields) the feature levels this node supports and those `image`
/// has finalized, with their epoch, as Kafka's brokers send them
/// (`kafka-features.sh describe` reads them).
pub fn handle(
    supported: &[(ApiKey, VersionRange)],
    image: &MetadataImage,
    _request: &ApiVersionsRequest,
    version: i16,
) -> ApiVersionsResponse {
    let api_keys = supported
        .iter()
        .map(|(api_key, range)| api_version(*api_key, *range))
        .collect();
    let response = ApiVersionsResponse::default()
        .with_error_code(error_code::NONE)
        .with_api_keys(api_keys);
    if version < FEATURES_VERSION_MIN {
        return response;
    }
    let supported_features = features::supported()
        .into_iter()
        .map(|(name, (min, max))| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_string(name))
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let finalized = image
        .finalized_features()
        .into_iter()
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name))
                .with_max_version_level(level)
                .with_min_version_level(level)
        })
        .collect();
    response
        .with_supported_features(supported_features)
        .with_finalized_features_epoch(i64::try_from(image.features_epoch).unwrap_or(i64::MAX))
        .with_finalized_features(finalized)
}

/// ApiVersions carries feature levels from v3 (KIP-584).
const FEATURES_VERSION_MIN: i16 = 3;

/// A v3+ request whose body does not parse (Kafka: INVALID_REQUEST).
pub fn invalid_request() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_error_code(error_code::INVALID_REQUEST)
}

/// The KIP-511 answer to a version newer than ours, already framed in v0.
pub fn unsupported_version(correlation_id: i32) -> Result<Bytes, FrameError> {
    let response = ApiVersionsResponse::default()
        .with_error_code(error_code::UNSUPPORTED_VERSION)
        .with_api_keys(vec![api_version(ApiKey::ApiVersions, VERSIONS)]);
    codec::encode_with_header_version(RESPONSE_HEADER_VERSION, 0, correlation_id, &response)
}
