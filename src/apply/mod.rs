//! Applying rendered objects as the installer ServiceAccount: impersonating client,
//! ordered server-side apply, the durable revision record, pruning and drift watches.
