//! What the offset handlers share: running a store call off the async runtime
//! (store reads are quick, but deletes end with an fsync).

use std::io;
use std::sync::Arc;

use crate::protocol::context::BrokerState;
use crate::store::OffsetStore;

/// Runs `f` on the offset store in a blocking thread.
pub async fn with_store<T: Send + 'static>(
    state: &Arc<BrokerState>,
    f: impl FnOnce(&dyn OffsetStore) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let store = Arc::clone(&state.offsets);
    tokio::task::spawn_blocking(move || f(store.as_ref()))
        .await
        .map_err(io::Error::other)?
}
