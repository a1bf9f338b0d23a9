//! What the watcher compares between polls: the file's metadata, followed
//! through symlinks, and whether it is too recent to trust alone.

use std::fs::Metadata;
use std::time::{Duration, SystemTime};

/// A file modified less than this long ago may change again without its
/// metadata showing it (coarse timestamps, an edit of the same length
/// within one tick), so its content is compared too (git's "racy" check).
const RACY_WINDOW: Duration = Duration::from_secs(3);

/// The metadata of the file a path leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Fingerprint {
    modified: Option<SystemTime>,
    len: u64,
    /// Device, inode and change time (which no program can set back): a
    /// rename over the file or a swapped symlink gives another inode, any
    /// write a new change time.
    #[cfg(unix)]
    identity: (u64, u64, i64, i64),
}

impl Fingerprint {
    pub(super) fn of(meta: &Metadata) -> Self {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Fingerprint {
            modified: meta.modified().ok(),
            len: meta.len(),
            #[cfg(unix)]
            identity: (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the path still leads to the same file (device and inode;
    /// without them, on other systems, it is taken to).
    pub(super) fn same_file(&self, other: &Fingerprint) -> bool {
        #[cfg(unix)]
        return self.identity.0 == other.identity.0 && self.identity.1 == other.identity.1;
        #[cfg(not(unix))]
        {
            let _ = other;
            true
        }
    }

    /// Whether the file was modified so recently (or at a time in the
    /// future, or unknown) that unchanged metadata does not prove
    /// unchanged content.
    pub(super) fn racy(&self, now: SystemTime) -> bool {
        match self.modified {
            Some(modified) => now
                .duration_since(modified)
                .map_or(true, |age| age < RACY_WINDOW),
            None => true,
        }
    }
}
