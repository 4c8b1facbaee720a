//! The values of the model as the storage layer binds and reads them: owned ([`Value`]) and
//! borrowed from a row being stepped ([`Cell`]). Plain types below every layer that needs them
//! (requests' documents, search words, the store).

/// A value bound to a statement or read into a record.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Bool(bool),
    Text(String),
    /// A point in time, milliseconds since the Unix epoch (UTC).
    Time(i64),
    /// A list of ids, bound as one parameter (see the store's `Dialect::in_ids`).
    Ids(Vec<String>),
}

impl Value {
    /// The value as a borrowed cell (`Ids` has no cell form and reads as null).
    pub fn cell(&self) -> Cell<'_> {
        match self {
            Value::Null | Value::Ids(_) => Cell::Null,
            Value::Int(i) => Cell::Int(*i),
            Value::Bool(b) => Cell::Bool(*b),
            Value::Text(s) => Cell::Text(s.as_bytes()),
            Value::Time(ms) => Cell::Time(*ms),
        }
    }

    /// Some text, or null.
    pub fn text_or_null(s: Option<&str>) -> Value {
        s.map_or(Value::Null, |s| Value::Text(s.to_owned()))
    }
}

/// One column of a row as the engine holds it, read in place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Null,
    Int(i64),
    Bool(bool),
    /// Text as stored (UTF-8 unless another program wrote the file).
    Text(&'a [u8]),
    Time(i64),
}

impl<'a> Cell<'a> {
    pub fn as_str(self) -> Option<&'a str> {
        match self {
            Cell::Text(t) => std::str::from_utf8(t).ok(),
            _ => None,
        }
    }
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Cell::Int(i) => Some(i),
            Cell::Bool(b) => Some(i64::from(b)),
            _ => None,
        }
    }
    /// An owned copy.
    pub fn to_value(self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Int(i) => Value::Int(i),
            Cell::Bool(b) => Value::Bool(b),
            // Checked 32 bytes at a time; a text that is not UTF-8 (written by another
            // program) gets replacement characters.
            Cell::Text(t) => Value::Text(match simdutf8::basic::from_utf8(t) {
                Ok(text) => text.to_owned(),
                Err(_) => String::from_utf8_lossy(t).into_owned(),
            }),
            Cell::Time(ms) => Value::Time(ms),
        }
    }
}
