//! Message sizes as nccl-tests spells them (`-b 8 -e 4G -f 4`), shared by every subcommand.

use super::error::CliError;

/// The largest message size any subcommand takes: 1 TiB, beyond the memory of any one GPU.
/// The planner and simulator do work that grows with the size, so a bound keeps them fast.
pub const MAX_SIZE: u64 = 1 << 40;

/// A plot axis's label for `x` bytes: the largest binary suffix (K, M, G) that writes it exactly,
/// as [`parse_size`] reads it back; plain bytes otherwise.
pub fn size_label(x: f64) -> String {
    let x = x.round() as u64;
    match x {
        _ if x >= 1 << 30 && (x >> 30) << 30 == x => format!("{}G", x >> 30),
        _ if x >= 1 << 20 && (x >> 20) << 20 == x => format!("{}M", x >> 20),
        _ if x >= 1 << 10 && (x >> 10) << 10 == x => format!("{}K", x >> 10),
        _ => x.to_string(),
    }
}

/// Parses "8", "64K", "4M", "1G" (binary multiples), optionally followed by "B" or "iB", up to
/// [`MAX_SIZE`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    let v = parse_unbounded(s)?;
    if v > MAX_SIZE {
        return Err(format!(
            "\"{s}\" is larger than the 1T ({MAX_SIZE}-byte) limit on message sizes"
        ));
    }
    Ok(v)
}

fn parse_unbounded(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mul) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let v: u64 = num
        .trim()
        .parse()
        .map_err(|_| format!("\"{s}\" is not a size (e.g. 8, 64K, 4M, 1G)"))?;
    v.checked_mul(mul)
        .ok_or_else(|| format!("\"{s}\" is too large"))
}

/// nccl-tests' size sweep flags (`-b 8 -e 4G -f 4`), shared by `plan`, `sim` and `whatif`.
#[derive(clap::Args, Debug, Clone)]
pub struct SizeArgs {
    /// Smallest size in bytes (nccl-tests -b; K, M, G suffixes).
    #[arg(short = 'b', long = "minbytes", default_value = "8", value_parser = parse_size)]
    pub min_bytes: u64,
    /// Largest size in bytes (nccl-tests -e).
    #[arg(short = 'e', long = "maxbytes", default_value = "4G", value_parser = parse_size)]
    pub max_bytes: u64,
    /// Multiplication factor between sizes (nccl-tests -f).
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    pub step_factor: u64,
}

impl SizeArgs {
    /// The sizes of the sweep: -b, then times -f while <= -e (nccl-tests' order).
    pub fn list(&self) -> Result<Vec<u64>, CliError> {
        let (min, max, f) = (self.min_bytes, self.max_bytes, self.step_factor);
        if f < 2 {
            return Err(CliError::input("-f/--stepfactor must be >= 2"));
        }
        if min > max {
            return Err(CliError::input(format!("-b {min} is larger than -e {max}")));
        }
        let mut v = Vec::new();
        let mut s = min.max(1);
        while s <= max {
            v.push(s);
            match s.checked_mul(f) {
                Some(x) => s = x,
                None => break,
            }
        }
        Ok(v)
    }
}

/// The collective, size sweep, algorithm/protocol and engine flags `sim` and `whatif` share
/// (flattened into both, so the flags read the same everywhere).
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// Collective (all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all).
    #[arg(short = 'c', long = "collective", default_value = "all-reduce")]
    pub collective: String,
    #[command(flatten)]
    pub sizes: SizeArgs,
    /// Force an algorithm: ring, tree, one-shot, two-shot, ce, direct (default: tuner's choice).
    #[arg(long)]
    pub algo: Option<String>,
    /// Force a protocol: LL, LL128, Simple (default: tuner's choice).
    #[arg(long)]
    pub proto: Option<String>,
    /// Engine: auto (detailed unless the run is too large), detailed, aggregated.
    #[arg(long, default_value = "auto")]
    pub mode: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_labels_read_back_as_the_same_size() {
        for x in [
            0u64,
            8,
            1000,
            1024,
            3 << 10,
            1 << 20,
            1536 << 10,
            1 << 30,
            5 << 30,
        ] {
            let l = size_label(x as f64);
            assert_eq!(parse_size(&l), Ok(x), "{x} -> {l}");
        }
        assert_eq!(size_label(1536.0 * 1024.0), "1536K");
        assert_eq!(size_label(4.0 * (1 << 30) as f64), "4G");
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("128m"), Ok(128 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert!(
            parse_size("99999999999G").is_err(),
            "overflow is an error, not a wrap"
        );
        assert_eq!(parse_size("1T"), Ok(MAX_SIZE));
        assert!(parse_size("1099511627777").unwrap_err().contains("limit"));
    }
}
