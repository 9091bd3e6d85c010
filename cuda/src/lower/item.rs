//! The lowered form: buffers, operands, work items, barriers and the phases they make. A leaf:
//! every part of the lowering imports it, and it imports none of them.

/// Physical buffers of a rank. In-place calls alias input and output before lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buf {
    Input = 0,
    Output = 1,
    Scratch = 2,
    /// The receiver's low-latency buffer (LL protocol): data and epoch flags in each line.
    Ll = 3,
}

/// Data bytes one rank can receive through LL buffers per call (all senders together); must
/// match `TP_LL_HALF / 2` in `cuda/kernels/exec.cu`.
pub const LL_DATA_BYTES: u64 = 2 << 20;

/// A contiguous element range start in one rank's buffer; the length is the item's `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Operand {
    pub rank: u32,
    pub buf: Buf,
    pub off: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemKind {
    /// `dst[j] = src[0] ⊕ … ⊕ src[k]` (a copy when there is one source).
    Reduce,
    /// `dst = src / nranks` (the second half of `Avg`).
    Scale,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Barrier {
    None = 0,
    Cta = 1,
    Full = 2,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// Rank whose GPU executes it (its SMs, or its copy engine when `copy_engine`).
    pub exec: u32,
    pub kind: ItemKind,
    pub srcs: Vec<Operand>,
    pub dsts: Vec<Operand>,
    pub n: u64,
    pub phase: u32,
    /// Moved by a copy engine (then exactly one source and one destination).
    pub copy_engine: bool,
    /// Items this one must follow (data hazards), for engines that order by events.
    pub deps: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Lowered {
    pub nranks: u32,
    pub items: Vec<Item>,
    /// Barrier before phase p (index p); phase 0 is never used by items (it is "before the call").
    pub barriers: Vec<Barrier>,
    /// Barrier after the last phase.
    pub end_barrier: Barrier,
    /// Scratch elements each rank needs.
    pub scratch_elems: u64,
    pub uses_copy_engine: bool,
    /// Some transfer goes through LL buffers (the kernel then advances its LL epoch).
    pub uses_ll: bool,
}

impl Lowered {
    pub fn nphases(&self) -> u32 {
        self.barriers.len() as u32
    }
    /// Largest item, in elements (sizes the grid).
    pub fn max_item(&self) -> u64 {
        self.items.iter().map(|i| i.n).max().unwrap_or(0)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LowerError {
    #[error("invalid schedule: {0}")]
    Invalid(String),
    #[error("schedule cannot be lowered: {0}")]
    Unsupported(String),
}

/// How the caller's buffers alias: `in_place` means NCCL's in-place convention (all-reduce:
/// input == output; all-gather: input is the rank's block of the output; reduce-scatter: output is
/// the rank's block of the input).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LowerParams {
    pub count: u64,
    pub in_place: bool,
    /// Divide by nranks at the end (ReduceOp::Avg).
    pub average: bool,
    /// Scratch ring capacity per rank, in elements.
    pub scratch_cap: u64,
    /// Run the program once over whole blocks instead of per `loop_elems` slice.
    pub flatten_loops: bool,
    /// Elide local copies whose destination is only read back (see `Lowerer::place`).
    pub elide_copies: bool,
    /// Copy-engine transfers issued by the sender (push) instead of the receiver (pull).
    pub ce_push: bool,
    /// Element size in bytes (LL buffers are laid out in bytes).
    pub elem_bytes: u64,
}
