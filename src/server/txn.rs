//! Starting the transaction coordinator: its store, the controller as the
//! source of producer-id blocks, and the partition side that writes markers.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::controller::{CommandOutcome, Controller, MetadataCommand};
use crate::store::{SledOffsetStore, SledTxnStore};
use crate::txn::service::TXN_ID_EXPIRATION_CHECK_INTERVAL_MS;
use crate::txn::{
    errors, ProducerIdBlock, ProducerIdBlockSource, TxnConfig, TxnDeps, TxnMarkerWriter,
    TxnService, TxnServiceConfig,
};
use crate::types::TopicPartition;

/// Producer-id blocks reserved through the controller's raft log, so no two
/// blocks ever overlap, across restarts too.
pub struct ControllerProducerIds(pub Controller);

impl ProducerIdBlockSource for ControllerProducerIds {
    fn allocate(
        &self,
        count: i64,
    ) -> Pin<Box<dyn Future<Output = Result<ProducerIdBlock, String>> + Send + 'static>> {
        let controller = self.0.clone();
        Box::pin(async move {
            match controller
                .propose(MetadataCommand::AllocateProducerIds { count })
                .await
            {
                Ok(CommandOutcome::ProducerIds { first, count }) => {
                    Ok(ProducerIdBlock { first, count })
                }
                Ok(CommandOutcome::Rejected(error)) => Err(error.to_string()),
                Ok(other) => Err(format!("unexpected controller outcome {other:?}")),
                Err(error) => Err(error.to_string()),
            }
        })
    }
}

/// Stands in for the partition side until it is merged: every marker fails
/// with KAFKA_STORAGE_ERROR, so a transaction with data partitions stays in
/// PrepareCommit/PrepareAbort (retried) rather than being reported complete.
/// Replaced at merge by `txn_markers::PartitionMarkerWriter`.
pub struct UnavailableMarkerWriter;

impl TxnMarkerWriter for UnavailableMarkerWriter {
    fn write_marker(
        &self,
        _tp: &TopicPartition,
        _producer_id: i64,
        _producer_epoch: i16,
        _coordinator_epoch: i32,
        _commit: bool,
    ) -> Result<(), i16> {
        Err(errors::KAFKA_STORAGE_ERROR)
    }

    fn has_ongoing_txn(&self, _tp: &TopicPartition, _producer_id: i64) -> Result<bool, i16> {
        Err(errors::KAFKA_STORAGE_ERROR)
    }
}

pub fn service_config(config: &Config) -> TxnServiceConfig {
    TxnServiceConfig {
        coordinator: TxnConfig {
            max_timeout_ms: config.transactions.max_timeout_ms,
            id_expiration_ms: config.transactions.id_expiration_ms,
        },
        producer_id_block_size: config.transactions.producer_id_block_size,
        abort_check_interval_ms: config.transactions.abort_check_interval_ms,
        expiration_check_interval_ms: TXN_ID_EXPIRATION_CHECK_INTERVAL_MS,
    }
}

/// Opens the transaction store and starts the coordinator (which completes
/// the transactions that were ending when the broker stopped).
pub async fn start(
    config: &Config,
    clock: Arc<dyn Clock>,
    controller: &Controller,
    offsets: &Arc<SledOffsetStore>,
    markers: Arc<dyn TxnMarkerWriter>,
) -> io::Result<(TxnService, Arc<SledTxnStore>)> {
    let dir = config.data_dir.join("transactions");
    let store = Arc::new(
        tokio::task::spawn_blocking(move || SledTxnStore::open(&dir))
            .await
            .map_err(io::Error::other)??,
    );
    let deps = TxnDeps {
        store: Arc::clone(&store) as _,
        offsets: Arc::clone(offsets) as _,
        markers,
        blocks: Arc::new(ControllerProducerIds(controller.clone())),
        clock,
    };
    let service = TxnService::start(service_config(config), deps).await?;
    Ok((service, store))
}
