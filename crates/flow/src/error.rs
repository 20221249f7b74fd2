//! Errors at the edges where users' files are read: each names the file, the position and what
//! was expected, on one line.

use std::fmt;

/// Where in an input an error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// A text file: 1-based line and column (in characters).
    Line { line: usize, column: usize },
    /// A capture file: 1-based packet number and byte offset of the record in the file.
    Packet { index: usize, offset: u64 },
    /// The whole file (unreadable, empty, wrong magic).
    File,
}

/// A malformed input: file, position, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub file: String,
    pub position: Position,
    pub message: String,
}

impl ParseError {
    pub fn at_line(file: &str, line: usize, column: usize, message: impl Into<String>) -> Self {
        ParseError { file: file.to_string(), position: Position::Line { line, column }, message: message.into() }
    }

    pub fn at_packet(file: &str, index: usize, offset: u64, message: impl Into<String>) -> Self {
        ParseError { file: file.to_string(), position: Position::Packet { index, offset }, message: message.into() }
    }

    pub fn in_file(file: &str, message: impl Into<String>) -> Self {
        ParseError { file: file.to_string(), position: Position::File, message: message.into() }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Position::Line { line, column } => {
                write!(f, "{}:{}:{}: {}", self.file, line, column, self.message)
            }
            Position::Packet { index, offset } => {
                write!(f, "{}: packet {} (byte {}): {}", self.file, index, offset, self.message)
            }
            Position::File => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ParseError {}

/// Shorthand for results of the format readers.
pub type Result<T> = std::result::Result<T, ParseError>;
