//! A JSON value that also travels over bincode, nested at most [`MAX_DEPTH`] levels.
//!
//! Tool arguments and results are JSON-shaped (a Python harness writes them as plain
//! objects), but bincode cannot carry `serde_json::Value` because that type needs a
//! self-describing format. [`Value`] asks the serializer: a human-readable format (JSON)
//! gets the plain value; a binary one (bincode) gets a tagged tree of the same data.
//!
//! Both directions are hand-written and count nesting: a value deeper than [`MAX_DEPTH`]
//! arrays and objects is refused, in either codec and either direction, with the same
//! message ([`too_deep`]), before the recursion goes one level further. A derived
//! deserializer would recurse as deep as the frame says, and 8 KB of bincode nesting 4,000
//! levels overflowed a tokio worker's stack.
//!
//! The other recursive wire type, a tree snapshot's `TreeNode`, is decoded under the same limit
//! (`crate::tree`). Everything else that walks a value (the daemon's validator, masking,
//! projection, `Debug`) therefore meets at most this depth, or serde_json's own 128 for values
//! parsed from a child's output.

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, SeqAccess, VariantAccess};
use serde::ser::{SerializeMap, SerializeSeq, SerializeTuple, Serializer};
use serde::{Deserialize, Serialize};

/// The deepest nesting of arrays and objects a [`Value`] may have on the wire: a scalar is
/// depth 0, `[]` and `{}` depth 1, `[[1]]` depth 2. The same limit holds for both codecs,
/// on decode and on encode, so a value the daemon sends is one a client can read back.
/// It sits below serde_json's own recursion limit (128 for the whole document) by more
/// than the depth of any frame's envelope, so in JSON this limit is the one that trips.
pub const MAX_DEPTH: usize = 100;

/// The message of a value nested deeper than [`MAX_DEPTH`], the same in both codecs.
pub fn too_deep() -> String {
    format!("value nests deeper than {MAX_DEPTH} levels of arrays and objects (flatten it)")
}

/// At most this many elements are reserved up front for one array, whatever length a
/// bincode payload claims: the claimed length is only believed as the elements arrive.
const PREALLOC_MAX: usize = 256;

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

/// Borrowed view used to write the binary form without cloning the tree; `.1` is the
/// number of arrays and objects around it.
struct Bin<'a>(&'a serde_json::Value, usize);

/// The depth a container at `outer` enclosing containers has, or the error when it is too
/// deep.
fn enter<E>(outer: usize, err: impl FnOnce(String) -> E) -> Result<usize, E> {
    let depth = outer + 1;
    if depth > MAX_DEPTH {
        return Err(err(too_deep()));
    }
    Ok(depth)
}

impl Serialize for Bin<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
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
            J::Array(items) => {
                let depth = enter(self.1, S::Error::custom)?;
                s.serialize_newtype_variant(NAME, 6, VARIANTS[6], &BinList(items, depth))
            }
            J::Object(map) => {
                let depth = enter(self.1, S::Error::custom)?;
                s.serialize_newtype_variant(NAME, 7, VARIANTS[7], &BinMap(map, depth))
            }
        }
    }
}

struct BinList<'a>(&'a [serde_json::Value], usize);

impl Serialize for BinList<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for item in self.0 {
            seq.serialize_element(&Bin(item, self.1))?;
        }
        seq.end()
    }
}

struct BinMap<'a>(&'a serde_json::Map<String, serde_json::Value>, usize);

impl Serialize for BinMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for (k, v) in self.0 {
            seq.serialize_element(&BinEntry(k, v, self.1))?;
        }
        seq.end()
    }
}

struct BinEntry<'a>(&'a str, &'a serde_json::Value, usize);

impl Serialize for BinEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(self.0)?;
        t.serialize_element(&Bin(self.1, self.2))?;
        t.end()
    }
}

/// Borrowed view that writes the plain JSON form, counting depth like [`Bin`]; the output
/// is byte for byte what `serde_json::Value` writes.
struct Plain<'a>(&'a serde_json::Value, usize);

impl Serialize for Plain<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        use serde_json::Value as J;
        match self.0 {
            J::Array(items) => {
                let depth = enter(self.1, S::Error::custom)?;
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Plain(item, depth))?;
                }
                seq.end()
            }
            J::Object(map) => {
                let depth = enter(self.1, S::Error::custom)?;
                let mut m = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    m.serialize_entry(k, &Plain(v, depth))?;
                }
                m.end()
            }
            scalar => scalar.serialize(s),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            Plain(&self.0, 0).serialize(s)
        } else {
            Bin(&self.0, 0).serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            PlainSeed(0).deserialize(d).map(Value)
        } else {
            BinSeed(0).deserialize(d).map(Value)
        }
    }
}

/// Reads the plain (JSON) form of a value inside `.0` enclosing arrays and objects.
#[derive(Clone, Copy)]
struct PlainSeed(usize);

impl<'de> DeserializeSeed<'de> for PlainSeed {
    type Value = serde_json::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> de::Visitor<'de> for PlainSeed {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        finite(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let depth = enter(self.0, de::Error::custom)?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(PREALLOC_MAX));
        while let Some(item) = seq.next_element_seed(PlainSeed(depth))? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let depth = enter(self.0, de::Error::custom)?;
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(PlainSeed(depth))?;
            out.insert(key, value);
        }
        Ok(serde_json::Value::Object(out))
    }
}

fn finite<E: de::Error>(f: f64) -> Result<serde_json::Value, E> {
    serde_json::Number::from_f64(f)
        .map(serde_json::Value::Number)
        .ok_or_else(|| E::custom(format!("{f} is not a finite number")))
}

/// Reads the binary (tagged) form of a value inside `.0` enclosing arrays and objects.
#[derive(Clone, Copy)]
struct BinSeed(usize);

impl<'de> DeserializeSeed<'de> for BinSeed {
    type Value = serde_json::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_enum(NAME, &VARIANTS, self)
    }
}

impl<'de> de::Visitor<'de> for BinSeed {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a tagged Value")
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        use serde_json::Value as J;
        let (tag, variant) = data.variant::<u32>()?;
        match tag {
            0 => variant.unit_variant().map(|()| J::Null),
            1 => variant.newtype_variant::<bool>().map(J::Bool),
            2 => variant.newtype_variant::<i64>().map(J::from),
            3 => variant.newtype_variant::<u64>().map(J::from),
            4 => finite(variant.newtype_variant::<f64>()?),
            5 => variant.newtype_variant::<String>().map(J::String),
            6 => {
                let depth = enter(self.0, de::Error::custom)?;
                variant.newtype_variant_seed(ListSeed(depth))
            }
            7 => {
                let depth = enter(self.0, de::Error::custom)?;
                variant.newtype_variant_seed(MapSeed(depth))
            }
            other => Err(de::Error::invalid_value(
                de::Unexpected::Unsigned(u64::from(other)),
                &"a Value variant index 0 to 7",
            )),
        }
    }
}

/// The elements of a binary array whose own depth is `.0`.
struct ListSeed(usize);

impl<'de> DeserializeSeed<'de> for ListSeed {
    type Value = serde_json::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> de::Visitor<'de> for ListSeed {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of Values")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(PREALLOC_MAX));
        while let Some(item) = seq.next_element_seed(BinSeed(self.0))? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }
}

/// The entries of a binary object whose own depth is `.0`.
struct MapSeed(usize);

impl<'de> DeserializeSeed<'de> for MapSeed {
    type Value = serde_json::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> de::Visitor<'de> for MapSeed {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of (key, Value) entries")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some((key, value)) = seq.next_element_seed(EntrySeed(self.0))? {
            out.insert(key, value);
        }
        Ok(serde_json::Value::Object(out))
    }
}

/// One `(key, value)` entry of a binary object whose own depth is `.0`.
struct EntrySeed(usize);

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = (String, serde_json::Value);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_tuple(2, self)
    }
}

impl<'de> de::Visitor<'de> for EntrySeed {
    type Value = (String, serde_json::Value);

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a (key, Value) entry")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let key = seq
            .next_element::<String>()?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let value = seq
            .next_element_seed(BinSeed(self.0))?
            .ok_or_else(|| de::Error::invalid_length(1, &self))?;
        Ok((key, value))
    }
}
