//! What a GGUF file's header says about fitting the model: its layers and how many bytes each
//! holds, the bytes outside the layers (embeddings, output), and what the KV cache costs per
//! token of context. Read from the header only (metadata and tensor descriptions), never the
//! weights; every count and length is bounded, so a damaged or hostile file is an error, not
//! an allocation of its choosing.

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// Tensors described at most.
const TENSORS_MAX: u64 = 1 << 20;
/// Metadata entries at most.
const KEYS_MAX: u64 = 1 << 16;
/// Bytes of one string at most (a key, a value, a tensor name).
const STRING_MAX: u64 = 1 << 20;
/// Elements of one metadata array at most (a vocabulary of a few hundred thousand tokens).
const ARRAY_MAX: u64 = 1 << 24;

/// The model's shape, as far as fitting it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The repeating layers (`{arch}.block_count`).
    pub layers: u32,
    /// Bytes of each layer's tensors (`blk.N.*`), in order.
    pub layer_bytes: Vec<u64>,
    /// Bytes of the tensors outside the layers (token embeddings, output head, norms).
    pub other_bytes: u64,
    /// Bytes of K and V cache per token of context, over all layers (f16).
    pub kv_bytes_per_token: u64,
    /// The context length the model was trained for.
    pub context_trained: Option<u64>,
    /// How an embedding model pools its tokens into one vector (`{arch}.pooling_type`:
    /// llama.cpp's 0 none, 1 mean, 2 cls, 3 last, 4 rank), when its header says.
    pub pooling: Option<u64>,
}

impl Shape {
    /// The KV cache of `context` tokens.
    pub fn kv_bytes(&self, context: u64) -> u64 {
        self.kv_bytes_per_token.saturating_mul(context)
    }
}

/// A metadata value, as far as the shape needs it.
#[derive(Debug)]
enum Value {
    Int(u64),
    Text(String),
    Other,
}

struct Reader<R: Read + Seek> {
    r: R,
}

type Result<T> = std::result::Result<T, String>;

impl<R: Read + Seek> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut b = [0u8; N];
        self.r
            .read_exact(&mut b)
            .map_err(|e| format!("the header ends early: {e}"))?;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }
    fn skip(&mut self, n: u64) -> Result<()> {
        let n = i64::try_from(n).map_err(|_| "a length past any file".to_string())?;
        self.r
            .seek(SeekFrom::Current(n))
            .map(drop)
            .map_err(|e| format!("cannot seek in the header: {e}"))
    }
    fn string(&mut self) -> Result<String> {
        let len = self.u64()?;
        if len > STRING_MAX {
            return Err(format!("a string of {len} bytes (at most {STRING_MAX})"));
        }
        let mut b = vec![0u8; len as usize];
        self.r
            .read_exact(&mut b)
            .map_err(|e| format!("the header ends early: {e}"))?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
    /// A value of GGUF type `ty`; arrays and floats are skipped.
    fn value(&mut self, ty: u32) -> Result<Value> {
        Ok(match ty {
            0 | 1 => Value::Int(self.bytes::<1>()?[0] as u64),
            2 | 3 => Value::Int(u16::from_le_bytes(self.bytes()?) as u64),
            4 | 5 => Value::Int(self.u32()? as u64),
            10 | 11 => Value::Int(self.u64()?),
            6 => {
                self.skip(4)?;
                Value::Other
            }
            12 => {
                self.skip(8)?;
                Value::Other
            }
            7 => {
                self.skip(1)?;
                Value::Other
            }
            8 => Value::Text(self.string()?),
            9 => {
                let item = self.u32()?;
                let len = self.u64()?;
                if len > ARRAY_MAX {
                    return Err(format!("an array of {len} items (at most {ARRAY_MAX})"));
                }
                let fixed = match item {
                    0 | 1 | 7 => Some(1),
                    2 | 3 => Some(2),
                    4..=6 => Some(4),
                    10..=12 => Some(8),
                    _ => None,
                };
                match fixed {
                    Some(size) => self.skip(len * size)?,
                    None if item == 8 => {
                        for _ in 0..len {
                            let n = self.u64()?;
                            if n > STRING_MAX {
                                return Err(format!(
                                    "a string of {n} bytes (at most {STRING_MAX})"
                                ));
                            }
                            self.skip(n)?;
                        }
                    }
                    None => {
                        return Err(format!("an array of type {item}, which GGUF does not have"));
                    }
                }
                Value::Other
            }
            other => return Err(format!("a value of type {other}, which GGUF does not have")),
        })
    }
}

/// The shape of the model in the GGUF file at `path` (its first file, for a split model: the
/// other files' tensors are counted by `extra_bytes`, spread over the layers).
pub fn read(path: &Path) -> Result<Shape> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open it: {e}"))?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    parse(BufReader::new(file), len)
}

fn parse<R: Read + Seek>(r: R, file_len: u64) -> Result<Shape> {
    let mut rd = Reader { r };
    if &rd.bytes::<4>()? != b"GGUF" {
        return Err("not a GGUF file (no GGUF magic)".into());
    }
    let version = rd.u32()?;
    if !(2..=3).contains(&version) {
        return Err(format!("GGUF version {version} (2 and 3 are read)"));
    }
    let tensors = rd.u64()?;
    let keys = rd.u64()?;
    if tensors > TENSORS_MAX || keys > KEYS_MAX {
        return Err(format!(
            "{tensors} tensors and {keys} metadata entries: too many"
        ));
    }
    let mut meta: BTreeMap<String, Value> = BTreeMap::new();
    for _ in 0..keys {
        let key = rd.string()?;
        let ty = rd.u32()?;
        let value = rd.value(ty)?;
        meta.insert(key, value);
    }
    let mut infos: Vec<(String, u64)> = Vec::with_capacity(tensors.min(4096) as usize);
    for _ in 0..tensors {
        let name = rd.string()?;
        let dims = rd.u32()?;
        if dims > 8 {
            return Err(format!("tensor {name} has {dims} dimensions"));
        }
        rd.skip(8 * dims as u64)?;
        let _ty = rd.u32()?;
        let offset = rd.u64()?;
        infos.push((name, offset));
    }
    let here =
        rd.r.stream_position()
            .map_err(|e| format!("cannot tell where the header ends: {e}"))?;
    let int = |k: &str| match meta.get(k) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    let align = int("general.alignment").filter(|a| *a > 0).unwrap_or(32);
    let data_start = here.div_ceil(align) * align;
    let data_len = file_len.saturating_sub(data_start);
    // Each tensor's bytes: to the next tensor's offset, the last to the end of the data.
    let mut by_offset: Vec<(u64, usize)> =
        infos.iter().enumerate().map(|(i, t)| (t.1, i)).collect();
    by_offset.sort_unstable();
    let mut sizes = vec![0u64; infos.len()];
    for (w, &(offset, i)) in by_offset.iter().enumerate() {
        let end = by_offset.get(w + 1).map_or(data_len, |n| n.0);
        sizes[i] = end.saturating_sub(offset);
    }
    let arch = match meta.get("general.architecture") {
        Some(Value::Text(a)) => a.clone(),
        _ => return Err("no general.architecture in its metadata".into()),
    };
    let key = |k: &str| int(&format!("{arch}.{k}"));
    let layers = key("block_count").ok_or(format!("no {arch}.block_count in its metadata"))?;
    if layers == 0 || layers > 10_000 {
        return Err(format!("{arch}.block_count is {layers}"));
    }
    let mut layer_bytes = vec![0u64; layers as usize];
    let mut other_bytes = 0u64;
    for ((name, _), size) in infos.iter().zip(&sizes) {
        let layer = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n < layer_bytes.len());
        match layer {
            Some(n) => layer_bytes[n] += size,
            None => other_bytes += size,
        }
    }
    let embd = key("embedding_length").unwrap_or(0);
    let heads = key("attention.head_count").unwrap_or(0).max(1);
    let heads_kv = key("attention.head_count_kv").unwrap_or(heads);
    let k_len = key("attention.key_length").unwrap_or(embd / heads);
    let v_len = key("attention.value_length").unwrap_or(embd / heads);
    // f16 K and V for every layer: 2 bytes per element.
    let kv_bytes_per_token = layers * heads_kv * (k_len + v_len) * 2;
    Ok(Shape {
        layers: layers as u32,
        layer_bytes,
        other_bytes,
        kv_bytes_per_token,
        context_trained: key("context_length"),
        pooling: key("pooling_type"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn s(out: &mut Vec<u8>, text: &str) {
        out.extend((text.len() as u64).to_le_bytes());
        out.extend(text.as_bytes());
    }

    /// A GGUF header with `layers` layers of two tensors each, `layer` bytes apiece, plus a
    /// 1,000-byte embedding table, and a token list to skip.
    fn tiny(layers: u64, layer: u64) -> Vec<u8> {
        let mut h = b"GGUF".to_vec();
        h.extend(3u32.to_le_bytes());
        let tensors = 1 + 2 * layers;
        h.extend(tensors.to_le_bytes());
        h.extend(6u64.to_le_bytes());
        s(&mut h, "general.architecture");
        h.extend(8u32.to_le_bytes());
        s(&mut h, "llama");
        for (k, v) in [
            ("llama.block_count", layers),
            ("llama.embedding_length", 64),
            ("llama.attention.head_count", 4),
            ("llama.attention.head_count_kv", 2),
        ] {
            s(&mut h, k);
            h.extend(4u32.to_le_bytes());
            h.extend((v as u32).to_le_bytes());
        }
        s(&mut h, "tokenizer.ggml.tokens");
        h.extend(9u32.to_le_bytes());
        h.extend(8u32.to_le_bytes());
        h.extend(2u64.to_le_bytes());
        s(&mut h, "<s>");
        s(&mut h, "</s>");
        let mut offset = 0u64;
        let mut tensor = |h: &mut Vec<u8>, name: &str, size: u64| {
            s(h, name);
            h.extend(1u32.to_le_bytes());
            h.extend(size.to_le_bytes());
            h.extend(0u32.to_le_bytes());
            h.extend(offset.to_le_bytes());
            offset += size;
        };
        tensor(&mut h, "token_embd.weight", 1000);
        for i in 0..layers {
            tensor(&mut h, &format!("blk.{i}.attn_q.weight"), layer / 2);
            tensor(&mut h, &format!("blk.{i}.ffn_up.weight"), layer - layer / 2);
        }
        while !h.len().is_multiple_of(32) {
            h.push(0);
        }
        h.resize(h.len() + offset as usize, 7);
        h
    }

    #[test]
    fn layers_their_bytes_and_the_kv_cache_come_from_the_header() {
        let file = tiny(4, 500);
        let shape = parse(Cursor::new(&file), file.len() as u64).unwrap();
        assert_eq!(shape.layers, 4);
        assert_eq!(shape.layer_bytes, vec![500; 4]);
        assert_eq!(shape.other_bytes, 1000);
        // 4 layers × 2 KV heads × (16 + 16) × 2 bytes.
        assert_eq!(shape.kv_bytes_per_token, 4 * 2 * 32 * 2);
        assert_eq!(shape.kv_bytes(1024), 1024 * 512);
    }

    #[test]
    fn a_damaged_header_is_an_error_not_an_allocation() {
        assert!(parse(Cursor::new(b"NOPE"), 4).is_err());
        let mut file = tiny(2, 100);
        // The first string's length made huge.
        file[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = parse(Cursor::new(&file), file.len() as u64).unwrap_err();
        assert!(e.contains("at most"), "{e}");
        let cut = tiny(2, 100);
        assert!(parse(Cursor::new(&cut[..60]), 60).is_err());
    }
}
