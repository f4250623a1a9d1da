#!/usr/bin/env python3
"""A BERT-family sentence embedder (Hugging Face layout, safetensors) to a GGUF llama.cpp loads.

The hybrid-search test's real embedding model (scripts/install-test-deps, tests/tests/
data_hybrid.rs) comes from PyPI as safetensors. llama.cpp's own converter
(convert_hf_to_gguf.py) imports torch and transformers at the top, which the registries here
offer only as multi-GB CUDA wheels; this writes what that converter writes for a BertModel
(its hyperparameters, the WordPiece vocabulary in its phantom-space form, the pooling the
sentence-transformers config declares, the same tensors kept F32) with llama.cpp's own GGUF
library, gguf-py (`gguf`, with its BERT tensor name map), and numpy alone. The safetensors file
is read by hand: an 8-byte header length, a JSON header, little-endian data.

Usage: bert_to_gguf.py MODEL_DIR OUT.gguf [--outtype f16|f32] [--name NAME]
MODEL_DIR holds config.json, model.safetensors, vocab.txt or tokenizer.json, and optionally
modules.json and 1_Pooling/config.json.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np
import gguf

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: Path):
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    hlen = int(np.frombuffer(raw[:8].tobytes(), dtype="<u8")[0])
    header = json.loads(raw[8:8 + hlen].tobytes())
    base = 8 + hlen
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        s, e = info["data_offsets"]
        buf = raw[base + s: base + e]
        if dt == "BF16":
            u16 = np.frombuffer(buf.tobytes(), dtype="<u2")
            arr = (u16.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf.tobytes(), dtype=np.dtype(ST_DTYPES[dt]).newbyteorder("<"))
        yield name, arr.reshape(info["shape"])


def load_vocab(d: Path):
    """Return (tokens, toktypes) in id order, as transformers' BertTokenizer would."""
    added_special = set()
    tj = d / "tokenizer.json"
    if tj.is_file():
        tok = json.loads(tj.read_text(encoding="utf-8"))
        vocab = tok["model"]["vocab"]  # WordPiece: {token: id}
        for a in tok.get("added_tokens", []):
            vocab.setdefault(a["content"], a["id"])
            if a.get("special"):
                added_special.add(a["content"])
    else:
        vocab = {}
        for i, line in enumerate((d / "vocab.txt").read_text(encoding="utf-8").split("\n")):
            if line or i == 0:
                vocab.setdefault(line, i)
    stm = d / "special_tokens_map.json"
    if stm.is_file():
        for v in json.loads(stm.read_text(encoding="utf-8")).values():
            added_special.add(v["content"] if isinstance(v, dict) else v)
    return vocab, added_special


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--outtype", choices=["f16", "f32"], default="f16")
    ap.add_argument("--name", default=None)
    a = ap.parse_args()
    d = a.model_dir
    hp = json.loads((d / "config.json").read_text())
    archs = hp.get("architectures", ["BertModel"])
    if not any(x in ("BertModel", "BertForMaskedLM") for x in archs):
        sys.exit(f"unsupported architecture {archs} (only BERT-family BertModel handled)")

    n_layer = hp["num_hidden_layers"]
    arch = gguf.MODEL_ARCH.BERT
    w = gguf.GGUFWriter(str(a.out), gguf.MODEL_ARCH_NAMES[arch])
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(a.name or hp.get("_name_or_path") or d.name)
    w.add_block_count(n_layer)
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    w.add_layer_norm_eps(hp.get("layer_norm_eps", 1e-12))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if a.outtype == "f16" else gguf.LlamaFileType.ALL_F32)
    w.add_causal_attention(False)

    # pooling type from sentence-transformers modules.json (same logic as _try_set_pooling_type)
    mj = d / "modules.json"
    pool_dir = None
    if mj.is_file():
        for m in json.loads(mj.read_text()):
            if m["type"].endswith("Pooling"):
                pool_dir = d / m["path"]
    if pool_dir is None and (d / "1_Pooling").is_dir():
        pool_dir = d / "1_Pooling"
    if pool_dir is not None and (pool_dir / "config.json").is_file():
        pc = json.loads((pool_dir / "config.json").read_text())
        if pc.get("pooling_mode_mean_tokens"):
            w.add_pooling_type(gguf.PoolingType.MEAN)
        elif pc.get("pooling_mode_cls_token"):
            w.add_pooling_type(gguf.PoolingType.CLS)
        elif pc.get("pooling_mode_lasttoken"):
            w.add_pooling_type(gguf.PoolingType.LAST)
        print(f"pooling config: {pc}")

    # --- vocab (WPM / "bert"), phantom-space form as in conversion/bert.py ---
    vocab, specials = load_vocab(d)
    n_vocab = hp.get("vocab_size", len(vocab))
    rev = {i: t for t, i in vocab.items()}
    tokens, toktypes = [], []
    for i in range(n_vocab):
        t = rev.get(i)
        if t is None:
            tokens.append(f"[PAD{i}]"); toktypes.append(gguf.TokenType.UNUSED)
        elif t in specials:
            tokens.append(t); toktypes.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(t[2:] if t.startswith("##") else "\u2581" + t)
            toktypes.append(gguf.TokenType.NORMAL)
    w.add_token_type_count(hp.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("bert-bge")  # WPM ignores pre-type; same value the official converter picks for bert-base-uncased vocabs
    w.add_token_list(tokens)
    w.add_token_types(toktypes)
    gguf.SpecialVocab(d, n_vocab=len(tokens)).add_to_gguf(w)

    # --- tensors ---
    tmap = gguf.get_tensor_name_map(arch, n_layer)
    st = d / "model.safetensors"
    if not st.is_file():
        sys.exit("model.safetensors not found (pytorch_model.bin needs torch; not supported)")
    n = 0
    for name, arr in read_safetensors(st):
        if name.startswith("bert."):
            name = name[5:]
        if name.endswith(".gamma"):
            name = name[:-6] + ".weight"
        if name.endswith(".beta"):
            name = name[:-5] + ".bias"
        if name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias") or name.startswith("cls."):
            continue
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            sys.exit(f"cannot map tensor {name}")
        arr = np.asarray(arr, dtype=np.float32)
        # as in the official converter: 1-D tensors (biases, norms), position and token-type
        # embeddings stay F32 (llama.cpp adds token_types with ggml_add, which rejects F16 there)
        if a.outtype == "f16" and arr.ndim >= 2 and new not in ("position_embd.weight", "token_types.weight"):
            arr = arr.astype(np.float16)
        w.add_tensor(new, np.ascontiguousarray(arr))
        n += 1
    print(f"{n} tensors, vocab {len(tokens)}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
