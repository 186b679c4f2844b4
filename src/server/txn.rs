//! Starting the transaction coordinator: its store, the controller as the
//! source of producer-id blocks, the partition side that writes markers, and
//! the group coordinator that completes pending offsets.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::controller::{CommandOutcome, Controller, MetadataCommand};
use crate::group::GroupService;
use crate::limits::TXN_ID_EXPIRATION_CHECK_INTERVAL_MS;
use crate::store::SledTxnStore;
use crate::txn::{
    ProducerIdBlock, ProducerIdBlockError, ProducerIdBlockSource, TxnConfig, TxnDeps,
    TxnMarkerWriter, TxnOffsetCompletion, TxnService, TxnServiceConfig,
};

/// Producer-id blocks reserved through the controller's raft log, so no two
/// blocks ever overlap, across restarts too.
pub struct ControllerProducerIds(pub Controller);

impl ProducerIdBlockSource for ControllerProducerIds {
    fn allocate(
        &self,
        count: i64,
    ) -> Pin<Box<dyn Future<Output = Result<ProducerIdBlock, ProducerIdBlockError>> + Send + 'static>>
    {
        let controller = self.0.clone();
        Box::pin(async move {
            match controller
                .propose(MetadataCommand::AllocateProducerIds { count })
                .await
            {
                Ok(CommandOutcome::ProducerIds { first, count }) => {
                    Ok(ProducerIdBlock { first, count })
                }
                Ok(CommandOutcome::Rejected(error)) => Err(error.into()),
                Ok(other) => Err(format!("unexpected controller outcome {other:?}").into()),
                Err(error) => Err(error.into()),
            }
        })
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
    groups: &GroupService,
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
        offsets: Arc::new(groups.clone()),
        markers,
        blocks: Arc::new(ControllerProducerIds(controller.clone())),
        clock,
    };
    let service = TxnService::start(service_config(config), deps).await?;
    Ok((service, store))
}
/// On a broker, the group coordinator that owns the groups completes them.
impl TxnOffsetCompletion for GroupService {
    fn complete(
        &self,
        producer_id: i64,
        offsets_partitions: Vec<i32>,
        commit: bool,
    ) -> Pin<Box<dyn Future<Output = io::Result<()>> + Send + 'static>> {
        let groups = self.clone();
        Box::pin(async move {
            groups
                .complete_txn_offsets(producer_id, offsets_partitions, commit)
                .await
        })
    }
}
