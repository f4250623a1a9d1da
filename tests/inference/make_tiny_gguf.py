"""Write a tiny llama-architecture GGUF with random weights and a working tokenizer.

Usage: make_tiny_gguf.py OUT.gguf [--seed N] [--layers N] [--embd N]

A sentencepiece-style ("llama") vocabulary: <unk>, <s>, </s>, the 256 byte tokens (byte
fallback, so any text tokenizes) and a few dozen word pieces; 2 layers of width 64 by default,
float32 — about 0.6 MB. The text it writes is garbage; what the tests need is a real server
loading a real model file and reporting real token counts.
"""

import argparse
import sys

import numpy as np
import gguf

WORDS = (
    "the a an is are was be to of and in that it for on with as at by this from or "
    "hello world user assistant system model test token say yes no one two three "
    "what how why who when where which can will not all any some more"
).split()

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<s>{{ message['role'] }}: {{ message['content'] }}</s>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--embd", type=int, default=64)
    p.add_argument("--ctx", type=int, default=2048, help="the context length it declares")
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    n_embd, n_head, n_ff, n_ctx = a.embd, 4, a.embd * 2, a.ctx

    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    scores = [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(gguf.TokenType.BYTE)
        scores.append(0.0)
    pieces = ["\u2581"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["\u2581" + w for w in WORDS]
    for i, piece in enumerate(pieces):
        tokens.append(piece)
        types.append(gguf.TokenType.NORMAL)
        scores.append(-float(i))
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("toolvisor-tiny-llama")
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    ones = np.ones(n_embd, dtype=np.float32)
    w.add_tensor("token_embd.weight", rand(n_vocab, n_embd))
    for i in range(a.layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.attn_output.weight", rand(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(n_embd, n_ff))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", rand(n_vocab, n_embd))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
