//! Ranks as threads of one process: connections are heap FIFOs created on first use and shared
//! by both ends through one map per communicator group.

use super::{RecvPort, SendPort, Transport};
use crate::error::CommError;
use crate::protocol::{Fifo, HeapMem};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Key = (u32, u32, u32);

/// The connections of one in-process communicator group.
#[derive(Debug)]
pub struct LocalHub {
    nslots: u32,
    slot_bytes: usize,
    fifos: Mutex<HashMap<Key, Arc<Fifo<HeapMem>>>>,
}

impl LocalHub {
    pub fn new(nslots: u32, slot_bytes: usize) -> Arc<Self> {
        Arc::new(LocalHub {
            nslots,
            slot_bytes,
            fifos: Mutex::new(HashMap::new()),
        })
    }
    fn fifo(&self, key: Key) -> Arc<Fifo<HeapMem>> {
        let mut m = self.fifos.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(key)
            .or_insert_with(|| Arc::new(Fifo::new(HeapMem::new(self.nslots, self.slot_bytes))))
            .clone()
    }
}

/// One rank's view of a [`LocalHub`].
#[derive(Debug)]
pub struct LocalTransport {
    pub hub: Arc<LocalHub>,
    pub rank: u32,
}

impl Transport for LocalTransport {
    fn name(&self) -> &'static str {
        "threads"
    }
    fn send_port(&mut self, channel: u32, to: u32) -> Result<Arc<dyn SendPort>, CommError> {
        Ok(self.hub.fifo((channel, self.rank, to)))
    }
    fn recv_port(&mut self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError> {
        Ok(self.hub.fifo((channel, from, self.rank)))
    }
}
