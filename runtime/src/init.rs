//! Communicators for ranks in separate processes: bootstrap, then shared memory with the peers
//! on this host and TCP with the others.

use crate::bootstrap::{self, BootstrapError, PeerInfo, Rendezvous, RootListener, UniqueId};
use crate::comm::Communicator;
use crate::config::{Config, TransportChoice};
use crate::error::CommError;
use crate::protocol::SLOT_HEADER;
use crate::transport::shm::ShmLinks;
use crate::transport::tcp::TcpLinks;
use crate::transport::{PortResult, RecvPort, SendPort, Transport};
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Shared memory with same-host peers, TCP with the rest.
struct ProcTransport {
    shm: Option<ShmLinks>,
    tcp: TcpLinks,
    name: &'static str,
}

impl Transport for ProcTransport {
    fn name(&self) -> &'static str {
        self.name
    }
    fn send_port(&mut self, channel: u32, to: u32) -> Result<Arc<dyn SendPort>, CommError> {
        match &self.shm {
            Some(s) if s.has(to) => s.send_port(channel, to),
            _ => self.tcp.send_port(channel, to),
        }
    }
    fn recv_port(&mut self, channel: u32, from: u32) -> Result<Arc<dyn RecvPort>, CommError> {
        match &self.shm {
            Some(s) if s.has(from) => s.recv_port(channel, from),
            _ => self.tcp.recv_port(channel, from),
        }
    }
    fn check_peer(&self, peer: u32) -> PortResult<()> {
        match &self.shm {
            Some(s) if s.has(peer) => s.check(peer),
            _ => self.tcp.check(peer),
        }
    }
    fn epoch(&self) -> u64 {
        self.tcp.bell.epoch()
    }
    fn idle_wait(&self, epoch: u64, idle: u32) {
        if self.shm.is_some() {
            // Shared-memory peers ring no bell: wake up often enough to see them.
            let us = if idle < 4096 { 20 } else { 200 };
            self.tcp
                .bell
                .wait(epoch, std::time::Duration::from_micros(us));
        } else {
            self.tcp
                .bell
                .wait(epoch, std::time::Duration::from_millis(5));
        }
    }
}

/// The torchrun environment, read once.
#[derive(Clone, Debug)]
pub struct EnvRank {
    pub rank: u32,
    pub world_size: u32,
    pub local_rank: Option<u32>,
    pub id: UniqueId,
    /// Rank 0 only: where to write the id it listens at, for its launcher.
    pub id_file: Option<PathBuf>,
}

impl EnvRank {
    /// Reads `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT` (or
    /// `TOPOPLAN_MASTER_PORT`, to keep clear of torch's own store on `MASTER_PORT`), and
    /// `TOPOPLAN_UNIQUE_ID` (an id from [`UniqueId`]'s text form, which then wins), and
    /// `TOPOPLAN_UNIQUE_ID_FILE` ([`bootstrap::ID_FILE_VAR`]).
    ///
    /// `TOPOPLAN_UNIQUE_ID_FILE` is for launchers: rank 0 given port 0 (in the id or as
    /// `MASTER_PORT`) binds a port the OS chooses and writes its id, with that port, to this
    /// file as soon as it listens ([`bootstrap::write_id_file`]); the launcher waits for it
    /// ([`bootstrap::wait_for_id_file`]) and starts the other ranks with `TOPOPLAN_UNIQUE_ID`
    /// set to its contents. Rank 0 at port 0 without the file is refused (no one could join).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, BootstrapError> {
        let num =
            |k: &str| -> Result<Option<u32>, BootstrapError> {
                match get(k) {
                    None => Ok(None),
                    Some(v) => v.trim().parse().map(Some).map_err(|_| {
                        BootstrapError::Env(format!("{k}={v:?} is not a rank number"))
                    }),
                }
            };
        let need = |k: &str| {
            num(k)?.ok_or_else(|| BootstrapError::Env(format!("{k} is not set (run under torchrun or set RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT)")))
        };
        let rank = need("RANK")?;
        let world_size = need("WORLD_SIZE")?;
        if world_size == 0 {
            return Err(BootstrapError::Env("WORLD_SIZE=0".into()));
        }
        let local_rank = num("LOCAL_RANK")?;
        let id = match get(params::UNIQUE_ID.name) {
            Some(s) if !s.is_empty() => s.parse()?,
            _ => {
                let addr = get("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".into());
                let port = match params::MASTER_PORT
                    .u32_from(&get)
                    .map_err(|e| BootstrapError::Env(e.to_string()))?
                {
                    Some(p) => p,
                    None => need("MASTER_PORT")?,
                };
                let shared = format!(
                    "{world_size}|{}|{}",
                    get("TORCHELASTIC_RUN_ID").unwrap_or_default(),
                    params::SECRET.raw_from(&get).unwrap_or_default()
                );
                UniqueId::derived(format!("{addr}:{port}"), &shared)
            }
        };
        let id_file = get(bootstrap::ID_FILE_VAR)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        if rank == 0 && id.port() == Some(0) && id_file.is_none() {
            return Err(BootstrapError::Env(format!(
                "rank 0 at {}: port 0 needs {} (a file to tell the launcher the port chosen)",
                id.addr,
                bootstrap::ID_FILE_VAR
            )));
        }
        Ok(EnvRank {
            rank,
            world_size,
            local_rank,
            id,
            id_file,
        })
    }
}

/// The address other hosts reach this one at: the local end of a route to rank 0.
fn local_ip_towards(addr: &str) -> String {
    let probe = || -> Option<String> {
        let u = UdpSocket::bind("0.0.0.0:0").ok()?;
        u.connect(addr).ok()?; // no packet is sent: this only picks a route
        Some(u.local_addr().ok()?.ip().to_string())
    };
    probe().unwrap_or_else(|| "127.0.0.1".into())
}

impl Communicator {
    /// Joins a job as `rank` of `nranks` through rank 0's [`UniqueId`] (rank 0 passes the id it
    /// created and hands its text form to the others).
    pub fn init_rank(
        id: &UniqueId,
        nranks: u32,
        rank: u32,
        cfg: Config,
    ) -> Result<Communicator, CommError> {
        Self::init_rank_on(None, id, nranks, rank, cfg)
    }

    /// Joins a job as the rank `env` names. Rank 0 binds first and, if `env.id_file` is set,
    /// writes the id it listens at there before it waits for the others.
    pub fn from_env_rank(env: &EnvRank, cfg: Config) -> Result<Communicator, CommError> {
        if env.rank != 0 {
            return Self::init_rank(&env.id, env.world_size, env.rank, cfg);
        }
        let root = RootListener::bind(&env.id.addr, env.id.secret)?;
        if let Some(f) = &env.id_file {
            root.publish(f)?;
        }
        let id = root.id().clone();
        Self::init_rank_on(Some(root), &id, env.world_size, 0, cfg)
    }

    /// [`Communicator::init_rank`] where rank 0 may bring the rendezvous listener it bound
    /// when it made the id (`ncclGetUniqueId` does): then no port is bound twice. `root` is
    /// ignored on the other ranks.
    pub fn init_rank_on(
        root: Option<bootstrap::RootListener>,
        id: &UniqueId,
        nranks: u32,
        rank: u32,
        cfg: Config,
    ) -> Result<Communicator, CommError> {
        let start = Instant::now();
        let (listener, mut rv) = meet(root, id, nranks, rank, &cfg)?;
        let me = &rv.peers[rank as usize];
        if cfg.transport == TransportChoice::Shm {
            if let Some(p) = rv.peers.iter().find(|p| p.host != me.host) {
                return Err(CommError::Config(format!(
                    "TOPOPLAN_TRANSPORT=shm but rank {} runs on {} and this rank on {}",
                    p.rank, p.host, me.host
                )));
            }
        }
        let (shm_peers, remote) = split_peers(&rv.peers, rank, cfg.transport);
        let job = format!("{}-{}", id.job_tag(), rv.session);
        let slot = cfg.slot_bytes + SLOT_HEADER;
        // Shared memory: every rank maps its pair files here; `seal_shm` checks and unlinks them.
        let shm = if shm_peers.is_empty() {
            None
        } else {
            Some(ShmLinks::open(
                &cfg.shm_dir,
                &job,
                rank,
                &shm_peers,
                cfg.slots,
                slot,
            )?)
        };
        let deadline = start
            .checked_add(cfg.timeout)
            .unwrap_or_else(|| bootstrap::deadline_after(cfg.timeout));
        let tcp = tcp_links(&listener, id, rank, &remote, &cfg, deadline)?;
        seal_shm(shm.as_ref(), &mut rv, &job)?;
        let name = match (shm.is_some(), !remote.is_empty()) {
            (true, true) => "shm+tcp",
            (true, false) => "shm",
            (false, true) => "tcp",
            (false, false) => "self",
        };
        let t = ProcTransport { shm, tcp, name };
        let hosts: Vec<String> = rv.peers.iter().map(|p| p.host.clone()).collect();
        let planner = crate::plan::Plans::cpu_planner_hosts(&hosts);
        Communicator::with_transport(
            rank,
            nranks,
            cfg,
            Box::new(t),
            vec![Box::new(rv)],
            Some(planner),
        )
    }

    /// Joins a job from the torchrun environment (see [`EnvRank::from_lookup`]), with the
    /// configuration from `TOPOPLAN_*` variables.
    pub fn from_env() -> Result<Communicator, CommError> {
        let cfg = Config::from_env()?;
        let env = EnvRank::from_lookup(|k| std::env::var(k).ok())?;
        Communicator::from_env_rank(&env, cfg)
    }
}

/// Binds this rank's data listener, then meets the other ranks through rank 0: the
/// rendezvous tells every rank each one's host, pid and data address.
fn meet(
    root: Option<RootListener>,
    id: &UniqueId,
    nranks: u32,
    rank: u32,
    cfg: &Config,
) -> Result<(TcpListener, Rendezvous), CommError> {
    let listener = TcpListener::bind("0.0.0.0:0")
        .map_err(|e| CommError::Transport(format!("data listener: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| CommError::Transport(e.to_string()))?
        .port();
    let info = PeerInfo {
        rank,
        host: bootstrap::hostname(),
        pid: std::process::id(),
        listen: format!("{}:{port}", local_ip_towards(&id.addr)),
    };
    let rv = match root {
        Some(root) if rank == 0 => {
            bootstrap::rendezvous_root(root, nranks, cfg.fingerprint(), info, cfg.timeout)?
        }
        _ => bootstrap::rendezvous(id, rank, nranks, cfg.fingerprint(), info, cfg.timeout)?,
    };
    Ok((listener, rv))
}

/// Splits the other ranks into those on this host, reached through shared memory unless TCP
/// is forced (as (rank, pid)), and the rest, reached through TCP.
fn split_peers(
    peers: &[PeerInfo],
    rank: u32,
    transport: TransportChoice,
) -> (Vec<(u32, u32)>, Vec<PeerInfo>) {
    let me = &peers[rank as usize];
    let local =
        |p: &PeerInfo| p.rank != rank && p.host == me.host && transport != TransportChoice::Tcp;
    let shm_peers = peers
        .iter()
        .filter(|p| local(p))
        .map(|p| (p.rank, p.pid))
        .collect();
    let remote = peers
        .iter()
        .filter(|p| p.rank != rank && !local(p))
        .cloned()
        .collect();
    (shm_peers, remote)
}

/// TCP links to the `remote` ranks: this rank connects to the lower ones and accepts the
/// higher ones, so each pair makes one connection.
fn tcp_links(
    listener: &TcpListener,
    id: &UniqueId,
    rank: u32,
    remote: &[PeerInfo],
    cfg: &Config,
    deadline: Instant,
) -> Result<TcpLinks, CommError> {
    let slot = cfg.slot_bytes + SLOT_HEADER;
    let mut tcp = TcpLinks::default();
    for p in remote.iter().filter(|p| p.rank < rank) {
        let mut s = connect_retry(&p.listen, deadline).map_err(|e| {
            CommError::Transport(format!(
                "connecting to rank {} at {}: {e}",
                p.rank, p.listen
            ))
        })?;
        bootstrap::link_greet(&mut s, id, rank)
            .map_err(|e| CommError::Transport(format!("greeting rank {}: {e}", p.rank)))?;
        tcp.add(p.rank, s, cfg.slots, slot)?;
    }
    let expect: Vec<u32> = remote
        .iter()
        .filter(|p| p.rank > rank)
        .map(|p| p.rank)
        .collect();
    if !expect.is_empty() {
        for (r, s) in bootstrap::accept_links(listener, id, &expect, deadline, cfg.timeout)? {
            tcp.add(r, s, cfg.slots, slot)?;
        }
    }
    Ok(tcp)
}

/// Checks that this rank shares its shared-memory files with its peers, then unlinks them.
/// Every rank takes part in both barriers, whether it has shared memory or not.
fn seal_shm(shm: Option<&ShmLinks>, rv: &mut Rendezvous, job: &str) -> Result<(), CommError> {
    if let Some(s) = shm {
        s.stamp(job);
    }
    rv.barrier()?;
    if let Some(s) = shm {
        s.verify(job)?;
    }
    // Everyone has verified (so has mapped) every file before anyone unlinks one.
    rv.barrier()?;
    if let Some(s) = shm {
        s.unlink();
    }
    Ok(())
}

fn connect_retry(addr: &str, deadline: Instant) -> std::io::Result<std::net::TcpStream> {
    loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
