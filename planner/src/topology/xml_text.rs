//! What the XML reader needs from the raw text, in linear time: a shape check before parsing
//! (nesting depth and element count, so hostile files fail fast instead of overflowing the
//! stack), and line/column positions of byte offsets without rescanning the text per element.

use std::cell::Cell;

/// Deepest nesting accepted. NCCL's dumps nest system, cpu, a few levels of PCIe switches, gpu
/// and nvlink: well under 20.
pub const MAX_DEPTH: usize = 64;

/// Most elements accepted in one file. A machine of NCCL's largest size (hundreds of GPUs and
/// NICs, each with a handful of children) stays far below this.
pub const MAX_ELEMENTS: usize = 100_000;

/// Where and why a text's shape was refused.
#[derive(Debug, PartialEq)]
pub struct ShapeError {
    pub offset: usize,
    pub message: String,
}

/// Scans the tags once: refuses nesting deeper than [`MAX_DEPTH`] or more than [`MAX_ELEMENTS`]
/// elements. It only counts; well-formedness is the parser's job, so text it cannot follow is
/// left for the parser to report.
pub fn check_shape(text: &str) -> Result<(), ShapeError> {
    check_shape_with(text, MAX_DEPTH, MAX_ELEMENTS)
}

fn check_shape_with(text: &str, max_depth: usize, max_elements: usize) -> Result<(), ShapeError> {
    let b = text.as_bytes();
    let (mut i, mut depth, mut elements) = (0usize, 0usize, 0usize);
    while let Some(off) = memchr(b'<', &b[i..]) {
        let start = i + off;
        let rest = &b[start..];
        let skip_to = |end: &[u8]| find(&b[start..], end).map(|e| start + e + end.len());
        let next = if rest.starts_with(b"<!--") {
            skip_to(b"-->")
        } else if rest.starts_with(b"<![CDATA[") {
            skip_to(b"]]>")
        } else if rest.starts_with(b"<?") {
            skip_to(b"?>")
        } else if rest.starts_with(b"<!") || rest.starts_with(b"</") {
            if rest.starts_with(b"</") {
                depth = depth.saturating_sub(1);
            }
            skip_to(b">")
        } else {
            let end = tag_end(b, start + 1);
            if let Some(e) = end {
                elements += 1;
                if b[e - 1] != b'/' {
                    depth += 1;
                }
                if depth > max_depth {
                    return Err(ShapeError {
                        offset: start,
                        message: format!(
                            "elements nested more than {max_depth} deep: not an NCCL topology"
                        ),
                    });
                }
                if elements > max_elements {
                    return Err(ShapeError {
                        offset: start,
                        message: format!(
                            "more than {max_elements} elements: larger than any machine NCCL describes"
                        ),
                    });
                }
            }
            end.map(|e| e + 1)
        };
        match next {
            Some(n) => i = n,
            None => return Ok(()),
        }
    }
    Ok(())
}

/// The offset of the `>` that ends a start tag beginning at `i`, skipping quoted values.
fn tag_end(b: &[u8], mut i: usize) -> Option<usize> {
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == b'"' || c == b'\'' => quote = Some(c),
            None if c == b'>' => return Some(i),
            None => {}
        }
        i += 1;
    }
    None
}

fn memchr(c: u8, b: &[u8]) -> Option<usize> {
    b.iter().position(|&x| x == c)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Line and column (1-based, columns in characters, as roxmltree counts them) of byte offsets.
/// Line starts are indexed once; the column is counted from the line's start, or from the last
/// offset asked on the same line, so a whole document on one line stays linear when asked in
/// document order.
pub struct Positions<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
    /// (offset, line, column) of the last answer.
    last: Cell<(usize, u32, u32)>,
}

impl<'a> Positions<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, c)| *c == b'\n')
                .map(|(i, _)| i + 1),
        );
        Positions {
            text,
            line_starts,
            last: Cell::new((0, 1, 1)),
        }
    }

    /// (line, column) of byte offset `pos` (clamped to the text).
    pub fn at(&self, pos: usize) -> (u32, u32) {
        let pos = pos.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= pos);
        let start = self.line_starts[line - 1];
        let (lo, lcol) = match self.last.get() {
            (off, l, c) if l as usize == line && off <= pos && off >= start => (off, c),
            _ => (start, 1),
        };
        let col = lcol + chars_between(self.text, lo, pos);
        self.last.set((pos, line as u32, col));
        (line as u32, col)
    }
}

fn chars_between(text: &str, lo: usize, hi: usize) -> u32 {
    // Count characters by their first bytes, so offsets inside a character cannot panic.
    text.as_bytes()[lo..hi]
        .iter()
        .filter(|&&c| (c & 0xC0) != 0x80)
        .count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_counts_depth_and_elements_outside_comments_and_quotes() {
        let ok = "<a><!-- <b><b><b> --><b x='>' y=\"<c>\"/><![CDATA[<d><d>]]><?p <e>?></a>";
        assert_eq!(check_shape_with(ok, 2, 2), Ok(()));
        let deep = "<a><b><c></c></b></a>";
        let e = check_shape_with(deep, 2, 10).unwrap_err();
        assert_eq!(e.offset, 6);
        assert!(e.message.contains("nested more than 2"));
        let many = "<a><b/><b/><b/></a>";
        assert!(check_shape_with(many, 5, 3)
            .unwrap_err()
            .message
            .contains("more than 3 elements"));
        // Unterminated or odd text is left to the parser.
        assert_eq!(check_shape_with("<a><b", 1, 1), Ok(()));
    }

    #[test]
    fn positions_match_roxmltree() {
        let text = "<a>\n  <bé x=\"1\"/>\r\n<c/><d/>\n</a>";
        let p = Positions::new(text);
        let doc = roxmltree::Document::parse(text).unwrap();
        let mut offsets: Vec<usize> = doc.descendants().map(|n| n.range().start).collect();
        offsets.extend([3, 0, text.len()]);
        for off in offsets {
            let r = doc.text_pos_at(off);
            assert_eq!(p.at(off), (r.row, r.col), "offset {off}");
        }
    }
}
