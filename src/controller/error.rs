//! Why a controller operation failed, as the broker sees it. A rejected command is not an
//! error here: it is `CommandOutcome::Rejected`, an answer to the client.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControllerError {
    /// This node is not (or no longer) the raft leader; the command was not applied.
    NotLeader,
    /// Reading or writing the controller's data directory failed.
    Storage(String),
    /// Raft itself failed or stopped unexpectedly.
    Raft(String),
    /// `shutdown` has been called.
    ShuttingDown,
    /// No leader took the proposal within the propose timeout; it may or may not
    /// have been applied.
    Timeout,
}

impl fmt::Display for ControllerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControllerError::NotLeader => f.write_str("this node is not the metadata leader"),
            ControllerError::Storage(e) => write!(f, "metadata storage failed: {e}"),
            ControllerError::Raft(e) => write!(f, "metadata raft failed: {e}"),
            ControllerError::ShuttingDown => f.write_str("the controller is shutting down"),
            ControllerError::Timeout => f.write_str("no metadata leader took the change in time"),
        }
    }
}

impl std::error::Error for ControllerError {}

impl From<std::io::Error> for ControllerError {
    fn from(e: std::io::Error) -> ControllerError {
        ControllerError::Storage(e.to_string())
    }
}
