//! Reading an input file as text: bytes that are not text (NUL, invalid UTF-8) are bad input
//! naming the file and line, never a panic or a silently wrong parse.

use crate::cli::error::CliError;
use std::path::Path;

/// The text of one input and the name reports cite it by.
#[derive(Debug, Clone)]
pub struct Text {
    pub name: String,
    pub body: String,
    /// The last line has no newline: the file may have been cut while being written.
    pub cut: bool,
}

/// Reads `path` (`-` is standard input); an empty file is bad input.
pub fn read(path: &Path) -> Result<Text, CliError> {
    let (name, bytes) = read_bytes(path)?;
    from_bytes(&name, bytes)
}

/// Like [`read`], but an empty file is an empty text (an environment with no variables).
pub fn read_maybe_empty(path: &Path) -> Result<Text, CliError> {
    let (name, bytes) = read_bytes(path)?;
    if bytes.is_empty() {
        return Ok(Text {
            name,
            body: String::new(),
            cut: false,
        });
    }
    from_bytes(&name, bytes)
}

fn read_bytes(path: &Path) -> Result<(String, Vec<u8>), CliError> {
    let name = if path.as_os_str() == "-" {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    };
    let bytes = if path.as_os_str() == "-" {
        planner::input::read_stdin(&name)
    } else {
        planner::input::read_bytes(path)
    };
    Ok((name, bytes.map_err(CliError::input)?))
}

/// Checks that `bytes` are text and returns them as such.
pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Text, CliError> {
    if bytes.is_empty() {
        return Err(CliError::input(format!("{name}: empty file")));
    }
    if let Some(pos) = bytes.iter().position(|&b| b == 0) {
        let (line, col) = line_col(&bytes, pos);
        return Err(CliError::input(format!(
            "{name}:{line}: not text (NUL byte at column {col}): a binary or corrupted file"
        )));
    }
    let cut = bytes.last() != Some(&b'\n');
    match String::from_utf8(bytes) {
        Ok(body) => Ok(Text {
            name: name.to_string(),
            body,
            cut,
        }),
        Err(e) => {
            let pos = e.utf8_error().valid_up_to();
            let (line, col) = line_col(e.as_bytes(), pos);
            Err(CliError::input(format!(
                "{name}:{line}: not text (invalid UTF-8 at column {col}): a binary or corrupted file"
            )))
        }
    }
}

/// 1-based line and column of byte `pos`.
fn line_col(bytes: &[u8], pos: usize) -> (usize, usize) {
    let before = &bytes[..pos.min(bytes.len())];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let col = 1 + before.iter().rev().take_while(|&&b| b != b'\n').count();
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_byte_names_line_and_column() {
        let e = from_bytes("x.log", b"ok\nab\0c\n".to_vec()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .starts_with("x.log:2: not text (NUL byte at column 3)"),
            "{e}"
        );
    }

    #[test]
    fn invalid_utf8_names_line() {
        let e = from_bytes("y", b"a\nb\nc\xff\n".to_vec()).unwrap_err();
        assert!(
            e.to_string().starts_with("y:3: not text (invalid UTF-8"),
            "{e}"
        );
    }

    #[test]
    fn empty_is_bad_input_and_cut_is_noticed() {
        assert_eq!(from_bytes("z", vec![]).unwrap_err().exit_code(), 2);
        assert!(from_bytes("z", b"a\nb".to_vec()).unwrap().cut);
        assert!(!from_bytes("z", b"a\nb\n".to_vec()).unwrap().cut);
    }
}
