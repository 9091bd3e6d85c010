//! Ranks as threads of one process: connections are heap FIFOs created on first use and shared
//! by both ends through one map per communicator group.

use super::{Bell, Consumer, PortResult, RecvPort, SendPort, Transport};
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
    /// Rung on every post and consume, so that idle ranks sleep instead of polling.
    bell: Bell,
}

impl LocalHub {
    pub fn new(nslots: u32, slot_bytes: usize) -> Arc<Self> {
        Arc::new(LocalHub {
            nslots,
            slot_bytes,
            fifos: Mutex::new(HashMap::new()),
            bell: Bell::default(),
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
        Ok(Arc::new(Rung {
            fifo: self.hub.fifo((channel, self.rank, to)),
            hub: self.hub.clone(),
        }))
    }
    fn recv_port(&mut self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError> {
        Ok(Arc::new(Rung {
            fifo: self.hub.fifo((channel, from, self.rank)),
            hub: self.hub.clone(),
        }))
    }
    fn epoch(&self) -> u64 {
        self.hub.bell.epoch()
    }
    fn idle_wait(&self, epoch: u64, _idle: u32) {
        // The bell wakes us on any post or consume in the group; the timeout only bounds how
        // late an abort or a timeout is noticed.
        self.hub
            .bell
            .wait(epoch, std::time::Duration::from_millis(5));
    }
}

/// A connection end that rings the group's bell after each post or consume.
struct Rung {
    fifo: Arc<Fifo<HeapMem>>,
    hub: Arc<LocalHub>,
}

impl SendPort for Rung {
    fn ready(&self) -> PortResult<bool> {
        Ok(self.fifo.send_ready())
    }
    fn post(&self, tag: u64, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> PortResult<()> {
        SendPort::post(&*self.fifo, tag, len, fill)?;
        self.hub.bell.ring();
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.fifo.capacity()
    }
    fn delivered(&self) -> PortResult<bool> {
        Ok(self.fifo.all_taken())
    }
}

impl RecvPort for Rung {
    fn ready(&self) -> PortResult<bool> {
        Ok(self.fifo.recv_ready())
    }
    fn consume(&self, f: &mut Consumer<'_>) -> Result<(), CommError> {
        RecvPort::consume(&*self.fifo, f)?;
        self.hub.bell.ring();
        Ok(())
    }
}
