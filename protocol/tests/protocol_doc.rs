//! Keeps `docs/PROTOCOL.md` true: its JSON examples parse as the frames they claim to be and
//! round-trip through both codecs, every frame variant has an example, its hex dumps are the
//! exact bincode bytes, and its variant index table matches the enums.

use std::collections::BTreeSet;

use serde::de::{self, Deserialize, Visitor};
use serde_json::Value as Json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::tree::NodeState;
use toolvisor_protocol::value::Value;
use toolvisor_protocol::wire::{
    ClientFrame, ClientKind, DaemonFrame, Event, Outcome, Stream, Tier, Topic,
};

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/PROTOCOL.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// One fenced code block: its info string, its text and the line it starts on.
struct Block {
    info: String,
    text: String,
    line: usize,
}

fn blocks(doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (n, line) in doc.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some(Block {
                        info: info.trim().to_string(),
                        text: String::new(),
                        line: n + 1,
                    });
                }
            }
            Some(mut block) => {
                if trimmed.starts_with("```") {
                    out.push(block);
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                    open = Some(block);
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed code fence in docs/PROTOCOL.md");
    out
}

/// The wire name of a client frame. Exhaustive: a new variant does not compile until it is
/// named here, and the coverage test then wants an example of it.
fn client_name(frame: &ClientFrame) -> &'static str {
    match frame {
        ClientFrame::Hello(_) => "hello",
        ClientFrame::Call(_) => "call",
        ClientFrame::Cancel { .. } => "cancel",
        ClientFrame::ApprovalAnswer(_) => "approval_answer",
        ClientFrame::QuestionAnswer(_) => "question_answer",
        ClientFrame::BridgeResult { .. } => "bridge_result",
        ClientFrame::ListTools { .. } => "list_tools",
        ClientFrame::Tree => "tree",
        ClientFrame::Subscribe { .. } => "subscribe",
        ClientFrame::Unsubscribe { .. } => "unsubscribe",
        ClientFrame::Status => "status",
        ClientFrame::Ping { .. } => "ping",
        ClientFrame::EndConversation { .. } => "end_conversation",
    }
}

/// The wire name of a daemon frame; exhaustive for the same reason as [`client_name`].
fn daemon_name(frame: &DaemonFrame) -> &'static str {
    match frame {
        DaemonFrame::Welcome(_) => "welcome",
        DaemonFrame::Refused(_) => "refused",
        DaemonFrame::Event { .. } => "event",
        DaemonFrame::Result { .. } => "result",
        DaemonFrame::ApprovalRequest(_) => "approval_request",
        DaemonFrame::Question(_) => "question",
        DaemonFrame::BridgeCall(_) => "bridge_call",
        DaemonFrame::Tools { .. } => "tools",
        DaemonFrame::Tree(_) => "tree",
        DaemonFrame::TreeUpdate(_) => "tree_update",
        DaemonFrame::Status(_) => "status",
        DaemonFrame::Pong { .. } => "pong",
        DaemonFrame::Error(_) => "error",
    }
}

/// A deserializer that only records the variant list serde hands to `deserialize_enum`:
/// the wire names of an enum, in variant-index order. It claims to be a binary format, so
/// [`Value`] shows its bincode variants.
struct VariantNames<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for VariantNames<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not an enum"))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = variants;
        Err(de::Error::custom("variant names recorded"))
    }

    fn is_human_readable(&self) -> bool {
        false
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

fn variants<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(VariantNames(&mut names));
    assert!(
        !names.is_empty(),
        "{} is not an enum",
        std::any::type_name::<T>()
    );
    names
}

/// Every enum whose variant indices a bincode client needs, by the name the doc uses.
fn enums() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        ("ClientFrame", variants::<ClientFrame>()),
        ("DaemonFrame", variants::<DaemonFrame>()),
        ("Codec", variants::<Codec>()),
        ("ClientKind", variants::<ClientKind>()),
        ("Tier", variants::<Tier>()),
        ("Topic", variants::<Topic>()),
        ("Outcome", variants::<Outcome>()),
        ("Event", variants::<Event>()),
        ("Stream", variants::<Stream>()),
        ("NodeState", variants::<NodeState>()),
        ("ErrorKind", variants::<ErrorKind>()),
        ("Value", variants::<Value>()),
    ]
}

/// Every key the example spells must exist in the canonical encoding with the same value
/// (a misspelt optional field would otherwise be dropped silently by serde).
fn is_subset(example: &Json, canonical: &Json, path: &str) -> Result<(), String> {
    match (example, canonical) {
        (Json::Object(ex), Json::Object(canon)) => {
            for (key, value) in ex {
                let Some(c) = canon.get(key) else {
                    return Err(format!("{path}.{key} is not a field of this frame"));
                };
                is_subset(value, c, &format!("{path}.{key}"))?;
            }
            Ok(())
        }
        (Json::Array(ex), Json::Array(canon)) if ex.len() == canon.len() => ex
            .iter()
            .zip(canon)
            .enumerate()
            .try_for_each(|(i, (e, c))| is_subset(e, c, &format!("{path}[{i}]"))),
        _ if example == canonical => Ok(()),
        _ => Err(format!(
            "{path} is {example}, which reads back as {canonical}"
        )),
    }
}

fn round_trips<T>(value: &T, at: &str)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    for c in [Codec::Bincode, Codec::Json] {
        let bytes = codec::encode(c, value).unwrap_or_else(|e| panic!("{at}: encode {c}: {e}"));
        let back: T = codec::decode(c, &bytes).unwrap_or_else(|e| panic!("{at}: decode {c}: {e}"));
        assert_eq!(&back, value, "{at}: round trip through {c}");
    }
}

fn hex_bytes(text: &str, at: &str) -> Vec<u8> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(|h| u8::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{at}: bad hex {h:?}: {e}")))
        .collect()
}

#[derive(Default)]
struct Checked {
    client: BTreeSet<&'static str>,
    daemon: BTreeSet<&'static str>,
    json_blocks: usize,
    hex_blocks: usize,
}

fn check_examples(doc: &str) -> Checked {
    let mut seen = Checked::default();
    let mut last_client: Option<ClientFrame> = None;
    let mut last_daemon: Option<DaemonFrame> = None;
    for block in blocks(doc) {
        let at = format!("docs/PROTOCOL.md:{} (```{})", block.line, block.info);
        let example: Option<Json> = block.info.starts_with("json").then(|| {
            serde_json::from_str(&block.text).unwrap_or_else(|e| panic!("{at}: not JSON: {e}"))
        });
        match block.info.as_str() {
            "json client" => {
                let frame: ClientFrame = serde_json::from_str(&block.text)
                    .unwrap_or_else(|e| panic!("{at}: not a ClientFrame: {e}"));
                let canonical = serde_json::to_value(&frame).unwrap();
                if let Err(e) = is_subset(example.as_ref().unwrap(), &canonical, "frame") {
                    panic!("{at}: {e}");
                }
                round_trips(&frame, &at);
                assert_eq!(
                    Codec::sniff(block.text.as_bytes()),
                    Codec::Json,
                    "{at}: the daemon would not take this for JSON"
                );
                let bin = codec::encode(Codec::Bincode, &frame).unwrap();
                assert_eq!(
                    Codec::sniff(&bin),
                    Codec::Bincode,
                    "{at}: its bincode form would be taken for JSON"
                );
                let name = client_name(&frame);
                assert_eq!(wire_name(&canonical), name, "{at}");
                seen.client.insert(name);
                seen.json_blocks += 1;
                last_client = Some(frame);
            }
            "json daemon" => {
                let frame: DaemonFrame = serde_json::from_str(&block.text)
                    .unwrap_or_else(|e| panic!("{at}: not a DaemonFrame: {e}"));
                let canonical = serde_json::to_value(&frame).unwrap();
                // The daemon writes every field: its examples show exactly what it sends.
                assert_eq!(
                    example.as_ref().unwrap(),
                    &canonical,
                    "{at}: the daemon would send this frame differently"
                );
                round_trips(&frame, &at);
                let name = daemon_name(&frame);
                assert_eq!(wire_name(&canonical), name, "{at}");
                seen.daemon.insert(name);
                seen.json_blocks += 1;
                last_daemon = Some(frame);
            }
            "hex client" => {
                let frame = last_client
                    .take()
                    .unwrap_or_else(|| panic!("{at}: no ```json client block before it"));
                check_hex(&frame, &hex_bytes(&block.text, &at), &at);
                seen.hex_blocks += 1;
            }
            "hex daemon" => {
                let frame = last_daemon
                    .take()
                    .unwrap_or_else(|| panic!("{at}: no ```json daemon block before it"));
                check_hex(&frame, &hex_bytes(&block.text, &at), &at);
                seen.hex_blocks += 1;
            }
            other if other.starts_with("json") || other.starts_with("hex") => {
                panic!("{at}: use ```json client, ```json daemon, ```hex client or ```hex daemon")
            }
            _ => {}
        }
    }
    seen
}

/// The bytes are the bincode payload of the JSON example just before them, both ways.
fn check_hex<T>(frame: &T, bytes: &[u8], at: &str)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let decoded: T = codec::decode(Codec::Bincode, bytes)
        .unwrap_or_else(|e| panic!("{at}: the hex is not a bincode frame: {e}"));
    assert_eq!(&decoded, frame, "{at}: the hex decodes to another frame");
    assert_eq!(
        codec::encode(Codec::Bincode, frame).unwrap(),
        bytes,
        "{at}: bincode encodes the frame before it to other bytes"
    );
}

/// `"tree"` or the single key of `{"call": {...}}`.
fn wire_name(canonical: &Json) -> &str {
    match canonical {
        Json::String(s) => s,
        Json::Object(map) if map.len() == 1 => map.keys().next().unwrap(),
        other => panic!("not an externally tagged frame: {other}"),
    }
}

#[test]
fn every_example_parses_round_trips_and_every_variant_has_one() {
    let seen = check_examples(&doc());
    assert!(seen.json_blocks > 0 && seen.hex_blocks > 0);
    let want = |names: &[&'static str]| names.iter().copied().collect::<BTreeSet<_>>();
    let client_missing: Vec<_> = want(variants::<ClientFrame>())
        .difference(&seen.client)
        .copied()
        .collect();
    let daemon_missing: Vec<_> = want(variants::<DaemonFrame>())
        .difference(&seen.daemon)
        .copied()
        .collect();
    assert!(
        client_missing.is_empty() && daemon_missing.is_empty(),
        "docs/PROTOCOL.md lacks examples of client frames {client_missing:?} and daemon frames {daemon_missing:?}"
    );
}

#[test]
fn the_variant_index_table_matches_the_enums() {
    let doc = doc();
    for (name, names) in enums() {
        let prefix = format!("| `{name}` |");
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with(&prefix)).collect();
        assert_eq!(
            rows.len(),
            1,
            "docs/PROTOCOL.md needs exactly one variant index row for `{name}`"
        );
        let listed: Vec<&str> = rows[0][prefix.len()..]
            .trim()
            .trim_end_matches('|')
            .split(',')
            .map(|s| s.trim().trim_matches('`'))
            .collect();
        assert_eq!(
            listed, names,
            "the variant index row of `{name}` is out of date"
        );
    }
}

#[test]
fn the_error_table_names_every_kind() {
    let doc = doc();
    for kind in variants::<ErrorKind>() {
        assert!(
            doc.lines()
                .any(|l| l.starts_with(&format!("| `{kind}` | "))),
            "docs/PROTOCOL.md has no error table row for `{kind}`"
        );
    }
}
