//! OAUTHBEARER's signing keys: the JWKS file of
//! `--sasl-oauthbearer-jwks-endpoint-url`, read at start (a start whose file
//! cannot be read or parsed fails, naming it) and again every
//! `--sasl-oauthbearer-jwks-endpoint-refresh-ms`, so that an identity
//! provider's rotated keys are taken without a restart; a read that fails
//! keeps the keys already known, logged.

use std::time::Duration;

use jsonwebtoken::jwk::JwkSet;
use tokio::sync::watch;

use crate::config::JwksSource;

/// Reads the JWKS into its cache now; an error names the file.
pub fn load(source: &JwksSource) -> Result<(), String> {
    let bytes =
        std::fs::read(&source.path).map_err(|e| format!("JWKS {}: {e}", source.path.display()))?;
    let keys: JwkSet = serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "JWKS {}: not a JSON Web Key Set: {e}",
            source.path.display()
        )
    })?;
    source.cache.set(keys);
    Ok(())
}

/// Reads the JWKS again every refresh interval, until `stopped`.
pub async fn keep_current(source: JwksSource, mut stopped: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval(Duration::from_millis(source.refresh_ms));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.reset();
    loop {
        tokio::select! {
            _ = stopped.changed() => return,
            _ = ticks.tick() => {}
        }
        let reading = source.clone();
        match tokio::task::spawn_blocking(move || load(&reading)).await {
            Ok(Ok(())) => tracing::debug!(path = %source.path.display(), "JWKS read again"),
            Ok(Err(error)) => {
                tracing::error!(%error, "the JWKS cannot be read; the keys already known stay in use");
            }
            Err(_) => {}
        }
    }
}
