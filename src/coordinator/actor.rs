//! The request half of a task that owns its state (the group and transaction
//! coordinators): a bounded command channel, and [`Mailbox::call`], which sends
//! one command carrying a oneshot for its answer and waits for that answer.
//!
//! The owning task is the only place its state changes, so it needs no lock;
//! callers hold a cheap clone of the [`Mailbox`]. A full channel makes callers
//! wait, which is the backpressure a busy task should cause. Invariant: a call
//! either gets the answer the task sent or [`Stopped`], never hangs on a task
//! that has ended: the oneshot is dropped with the command if the task drops it
//! unanswered, and `send` fails once the receiver is gone.

use std::fmt;

use tokio::sync::{mpsc, oneshot};

/// Where the task sends one command's answer.
pub type Answer<T> = oneshot::Sender<T>;

/// The task has stopped (or dropped the command unanswered); handlers answer
/// COORDINATOR_NOT_AVAILABLE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("coordinator task stopped")
    }
}

impl std::error::Error for Stopped {}

/// The sending side of a task's command channel; cheap to clone. The task sees
/// its channel close once the last mailbox is dropped.
pub struct Mailbox<C> {
    commands: mpsc::Sender<C>,
}

impl<C> Clone for Mailbox<C> {
    fn clone(&self) -> Mailbox<C> {
        Mailbox {
            commands: self.commands.clone(),
        }
    }
}

/// A bounded channel of `capacity` commands: the mailbox for callers and the
/// receiver for the task that owns the state.
pub fn mailbox<C>(capacity: usize) -> (Mailbox<C>, mpsc::Receiver<C>) {
    let (commands, receiver) = mpsc::channel(capacity);
    (Mailbox { commands }, receiver)
}

impl<C> Mailbox<C> {
    /// Sends the command `make` builds around a fresh oneshot and waits for the
    /// task to answer on it.
    pub async fn call<T>(&self, make: impl FnOnce(Answer<T>) -> C) -> Result<T, Stopped> {
        let (answer, wait) = oneshot::channel();
        self.commands
            .send(make(answer))
            .await
            .map_err(|_| Stopped)?;
        wait.await.map_err(|_| Stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    enum Command {
        Double(u32, Answer<u32>),
        Ignore(Answer<u32>),
    }

    #[tokio::test]
    async fn a_call_gets_its_answer_or_stopped() {
        let (mailbox, mut receiver) = super::mailbox(1);
        let task = tokio::spawn(async move {
            while let Some(command) = receiver.recv().await {
                match command {
                    Command::Double(n, answer) => drop(answer.send(2 * n)),
                    // Dropping the oneshot unanswered is what a task does when it
                    // gives up on a command.
                    Command::Ignore(answer) => drop(answer),
                }
            }
        });
        assert_eq!(
            mailbox.call(|answer| Command::Double(21, answer)).await,
            Ok(42)
        );
        assert_eq!(mailbox.call(Command::Ignore).await, Err(Stopped));
        let other = mailbox.clone();
        drop(mailbox);
        drop(other);
        task.await.expect("task ends once every mailbox is gone");

        let (mailbox, receiver) = super::mailbox::<Command>(1);
        drop(receiver);
        assert_eq!(
            mailbox.call(|answer| Command::Double(1, answer)).await,
            Err(Stopped)
        );
    }
}
