//! Fixtures that tests of the replica and of what runs on it share.

use super::{BoxFuture, LeaderConnector, LeaderLink};

/// A connector for brokers that never follow: every link is refused.
pub struct NoLeaders;

impl LeaderConnector for NoLeaders {
    fn connect(
        &self,
        host: String,
        port: u16,
    ) -> BoxFuture<'static, std::io::Result<Box<dyn LeaderLink>>> {
        Box::pin(async move {
            Err(std::io::Error::other(format!(
                "no leader is reachable in this test ({host}:{port})"
            )))
        })
    }
}
