//! The users `--add-scram` names, created at start (Kafka's `kafka-storage
//! format --add-scram`): each credential a user lacks is derived here (the
//! password never leaves this process) and written to the metadata log,
//! which keeps a credential the user already has, so that a restart never
//! undoes a password changed since.

use std::time::Duration;

use tokio::sync::watch;

use crate::config::ScramUser;
use crate::controller::command::ScramUpsertion;
use crate::controller::features::{metadata_version_name, METADATA_VERSION_SCRAM};
use crate::controller::{CommandOutcome, Controller, MetadataCommand, MetadataImage};
use crate::limits::ADD_USERS_RETRY_MS;
use crate::security::scram::ScramCredential;

/// Writes every credential of `users` the image lacks; retries until the
/// metadata log takes them or the broker stops. Gives up, logged, when the
/// cluster's `metadata.version` is below the level credentials need.
pub async fn add_at_start(
    controller: Controller,
    users: Vec<ScramUser>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut images = controller.subscribe();
    loop {
        let image = controller.image();
        if image.cluster_id.is_empty() {
            tokio::select! {
                _ = stopped.changed() => return,
                changed = images.changed() => if changed.is_err() { return },
            }
            continue;
        }
        let missing: Vec<ScramUser> = users
            .iter()
            .filter(|user| !has(&image, user))
            .cloned()
            .collect();
        if missing.is_empty() {
            return;
        }
        if image.metadata_version() < METADATA_VERSION_SCRAM {
            tracing::error!(
                needs = %metadata_version_name(METADATA_VERSION_SCRAM),
                cluster = %metadata_version_name(image.metadata_version()),
                "--add-scram users not created: SCRAM credentials need a newer metadata.version; \
                 raise it with kafka-features.sh upgrade and restart"
            );
            return;
        }
        let upsertions = tokio::task::spawn_blocking(move || {
            missing
                .into_iter()
                .map(|user| ScramUpsertion {
                    credential: ScramCredential::from_password(
                        user.mechanism,
                        &user.password,
                        user.iterations,
                    ),
                    name: user.name,
                    mechanism: user.mechanism.kafka_type(),
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let command = MetadataCommand::AlterUserScramCredentials {
            metadata_version: METADATA_VERSION_SCRAM,
            upsertions,
            deletions: Vec::new(),
            only_if_absent: true,
        };
        match controller.propose(command).await {
            Ok(CommandOutcome::UsersAltered(results)) => {
                let names: Vec<&str> = results.iter().map(|(name, _, _)| name.as_str()).collect();
                tracing::info!(users = ?names, "--add-scram users created");
                return;
            }
            Ok(other) => tracing::warn!(?other, "--add-scram users not created; retrying"),
            Err(error) => tracing::warn!(%error, "--add-scram users not created yet; retrying"),
        }
        tokio::select! {
            _ = stopped.changed() => return,
            _ = tokio::time::sleep(Duration::from_millis(ADD_USERS_RETRY_MS)) => {}
        }
    }
}

fn has(image: &MetadataImage, user: &ScramUser) -> bool {
    image
        .scram_credentials
        .get(&user.name)
        .is_some_and(|by_mechanism| by_mechanism.contains_key(&user.mechanism.kafka_type()))
}
