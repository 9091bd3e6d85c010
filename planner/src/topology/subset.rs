//! A communicator over some of a topology's GPUs (PyTorch's `new_group`, a scheduler's
//! allocation): the same machine with the other GPUs taken out, the chosen ones renumbered as
//! ranks `0..k` in the order given. The other GPUs' links go with them, so no path relays through
//! a GPU the communicator does not own; switches, CPUs and NICs stay.

use super::model::{ModelError, NodeKind, Topology};
use petgraph::visit::EdgeRef;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SubsetError {
    #[error("the GPU list is empty")]
    Empty,
    #[error("GPU {0} is listed twice")]
    Duplicate(u32),
    #[error("GPU {gpu} does not exist (the topology has GPUs 0..{n})", n = .n.saturating_sub(1))]
    Missing { gpu: u32, n: u32 },
    #[error("the chosen GPUs do not form a communicator: {0}")]
    Model(#[from] ModelError),
}

impl Topology {
    /// The topology of a communicator over `gpus` (ranks of `self`): rank `i` of the result is
    /// GPU `gpus[i]`.
    pub fn subset(&self, gpus: &[u32]) -> Result<Topology, SubsetError> {
        let n = self.n_ranks() as u32;
        if gpus.is_empty() {
            return Err(SubsetError::Empty);
        }
        let mut new_rank = vec![None; n as usize];
        for (i, &g) in gpus.iter().enumerate() {
            let slot = new_rank
                .get_mut(g as usize)
                .ok_or(SubsetError::Missing { gpu: g, n })?;
            if slot.replace(i as u32).is_some() {
                return Err(SubsetError::Duplicate(g));
            }
        }
        let mut t = Topology::new();
        let mut map = vec![None; self.graph.node_count()];
        for x in self.graph.node_indices() {
            let mut node = self.graph[x].clone();
            if let NodeKind::Gpu(g) = &mut node.kind {
                match new_rank.get(g.rank as usize).copied().flatten() {
                    Some(r) => g.rank = r,
                    None => continue,
                }
            }
            map[x.index()] = Some(t.add_node(node.host, node.kind));
        }
        for e in self.graph.edge_references() {
            if let (Some(a), Some(b)) = (map[e.source().index()], map[e.target().index()]) {
                t.add_link(a, b, e.weight().clone());
            }
        }
        t.n_hosts = self.n_hosts;
        t.fabric = self.fabric.clone();
        t.validate()?;
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{synth, LinkKind};

    #[test]
    fn keeps_the_chosen_gpus_in_order_and_refuses_bad_lists() {
        let t = synth::single_host(8, LinkKind::NvLink, 100.0);
        let s = t.subset(&[5, 0, 2]).unwrap();
        assert_eq!(s.n_ranks(), 3);
        let busid = |t: &Topology, r| t.gpu(t.gpu_of_rank(r).unwrap()).unwrap().busid.clone();
        assert_eq!(busid(&s, 0), busid(&t, 5));
        assert_eq!(busid(&s, 2), busid(&t, 2));
        // Every link of a dropped GPU is gone; the others remain.
        assert_eq!(t.graph.edge_count() - s.graph.edge_count(), 5 * 2 * 2);
        assert_eq!(t.subset(&[]).err(), Some(SubsetError::Empty));
        assert_eq!(t.subset(&[1, 1]).err(), Some(SubsetError::Duplicate(1)));
        assert_eq!(
            t.subset(&[0, 8]).err(),
            Some(SubsetError::Missing { gpu: 8, n: 8 })
        );
    }
}
