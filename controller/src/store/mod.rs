//! Stores of the control plane: the embedded [`EmbeddedStore`] on redb, used by standalone
//! `rouse up`, behind the [`rouse_shared::store::Store`] port.

mod embedded;

pub use embedded::{
    EmbeddedStore, EmbeddedStoreConfig, OpenError, STORE_FILE_NAME, SequenceError, StoreHealth,
    WriteSequence,
};

#[cfg(test)]
mod tests;
