//! A JSON value that also travels over bincode.
//!
//! Tool arguments and results are JSON-shaped (a Python harness writes them as plain
//! objects), but bincode cannot carry `serde_json::Value` because that type needs a
//! self-describing format. [`Value`] asks the serializer: a human-readable format (JSON)
//! gets the plain value; a binary one (bincode) gets a tagged tree of the same data.

use serde::de::Deserializer;
use serde::ser::{SerializeSeq, SerializeTuple, Serializer};
use serde::{Deserialize, Serialize};

/// A JSON value; on the wire it is plain JSON under the JSON codec and a tagged tree under
/// bincode.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Value(pub serde_json::Value);

impl Value {
    pub fn null() -> Self {
        Value(serde_json::Value::Null)
    }
    pub fn into_inner(self) -> serde_json::Value {
        self.0
    }
}

impl From<serde_json::Value> for Value {
    fn from(v: serde_json::Value) -> Self {
        Value(v)
    }
}

impl std::ops::Deref for Value {
    type Target = serde_json::Value;
    fn deref(&self) -> &serde_json::Value {
        &self.0
    }
}

const NAME: &str = "Value";
const VARIANTS: [&str; 8] = ["Null", "Bool", "I64", "U64", "F64", "Str", "List", "Map"];

/// Borrowed view used to write the binary form without cloning the tree.
struct Bin<'a>(&'a serde_json::Value);

impl Serialize for Bin<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde_json::Value as J;
        match self.0 {
            J::Null => s.serialize_unit_variant(NAME, 0, VARIANTS[0]),
            J::Bool(b) => s.serialize_newtype_variant(NAME, 1, VARIANTS[1], b),
            J::Number(n) => {
                if let Some(i) = n.as_i64() {
                    s.serialize_newtype_variant(NAME, 2, VARIANTS[2], &i)
                } else if let Some(u) = n.as_u64() {
                    s.serialize_newtype_variant(NAME, 3, VARIANTS[3], &u)
                } else {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    s.serialize_newtype_variant(NAME, 4, VARIANTS[4], &f)
                }
            }
            J::String(st) => s.serialize_newtype_variant(NAME, 5, VARIANTS[5], st),
            J::Array(items) => s.serialize_newtype_variant(NAME, 6, VARIANTS[6], &BinList(items)),
            J::Object(map) => s.serialize_newtype_variant(NAME, 7, VARIANTS[7], &BinMap(map)),
        }
    }
}

struct BinList<'a>(&'a [serde_json::Value]);

impl Serialize for BinList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&Bin(item))?;
        }
        seq.end()
    }
}

struct BinMap<'a>(&'a serde_json::Map<String, serde_json::Value>);

impl Serialize for BinMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (k, v) in self.0 {
            seq.serialize_element(&BinEntry(k, v))?;
        }
        seq.end()
    }
}

struct BinEntry<'a>(&'a str, &'a serde_json::Value);

impl Serialize for BinEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(self.0)?;
        t.serialize_element(&Bin(self.1))?;
        t.end()
    }
}

/// Owned binary form, read back with a derived deserializer.
#[derive(Deserialize)]
#[serde(rename = "Value")]
enum Repr {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(String),
    List(Vec<Repr>),
    Map(Vec<(String, Repr)>),
}

impl Repr {
    fn into_json<E: serde::de::Error>(self) -> Result<serde_json::Value, E> {
        use serde_json::Value as J;
        Ok(match self {
            Repr::Null => J::Null,
            Repr::Bool(b) => J::Bool(b),
            Repr::I64(i) => J::from(i),
            Repr::U64(u) => J::from(u),
            Repr::F64(f) => J::Number(
                serde_json::Number::from_f64(f)
                    .ok_or_else(|| E::custom(format!("{f} is not a finite number")))?,
            ),
            Repr::Str(s) => J::String(s),
            Repr::List(items) => J::Array(
                items
                    .into_iter()
                    .map(Repr::into_json)
                    .collect::<Result<_, E>>()?,
            ),
            Repr::Map(entries) => {
                let mut map = serde_json::Map::with_capacity(entries.len());
                for (k, v) in entries {
                    map.insert(k, v.into_json()?);
                }
                J::Object(map)
            }
        })
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            self.0.serialize(s)
        } else {
            Bin(&self.0).serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            serde_json::Value::deserialize(d).map(Value)
        } else {
            let repr = Repr::deserialize(d)?;
            repr.into_json::<D::Error>().map(Value)
        }
    }
}
