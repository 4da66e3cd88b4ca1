"""The transformer and RNN models of the zoo (tools/export/gen_zoo.py, docs/testing.md "Zoo").

Small random-initialised configurations; the Hugging Face models are built from transformers'
config classes (nothing is downloaded). Every module takes (tokens or features, target) and
returns a scalar float32 loss.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one fused qkv projection, split, heads, causal SDPA, projection."""

    def __init__(self, d, heads, dropout=0.0):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Block(nn.Module):
    def __init__(self, d, heads, dropout=0.0):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads, dropout)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class NanoGPT(nn.Module):
    """A nanoGPT-style LM: token + learned position embedding, pre-LN blocks (causal SDPA, tanh
    GELU MLP), final LayerNorm, head tied to the token embedding, next-token cross entropy."""

    def __init__(self, vocab=65, block=16, d=32, heads=4, layers=2, dropout=0.0):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        # nanoGPT's init: N(0, 0.02) weights and embeddings, zero biases, residual projections
        # scaled by 1/sqrt(2 layers).
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for n, p in self.named_parameters():
            if n.endswith("out.weight") or n.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))

    def forward(self, idx, target):
        t = idx.shape[1]
        x = self.drop(self.tok(idx) + self.pos(torch.arange(t, device=idx.device)))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))


class HFLoss(nn.Module):
    """A Hugging Face model called with labels; returns its .loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, labels, attention_mask=None):
        if attention_mask is None:
            return self.model(input_ids=input_ids, labels=labels).loss
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


def gpt2(attn="eager", dropout=0.0, vocab=96, block=32, d=32, layers=2, heads=4):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=vocab, n_positions=block, n_embd=d, n_layer=layers, n_head=heads,
                     resid_pdrop=dropout,
                     embd_pdrop=dropout, attn_pdrop=dropout, attn_implementation=attn)
    return HFLoss(GPT2LMHeadModel(cfg))


def llama(attn="eager", vocab=96, block=64, d=32, hidden=64, layers=2, heads=4, kv_heads=2):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=d, intermediate_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=block,
                      rms_norm_eps=1e-6, tie_word_embeddings=False, attn_implementation=attn)
    return HFLoss(LlamaForCausalLM(cfg))


def bert(attn="eager", dropout=0.0):
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=32, num_labels=3,
                     hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                     classifier_dropout=dropout, attn_implementation=attn)
    return HFLoss(BertForSequenceClassification(cfg))


class RNNClassifier(nn.Module):
    """Embedding, a 2-layer batch_first nn.LSTM or nn.GRU, the last step's hidden state to a
    linear head, cross entropy."""

    def __init__(self, cell, vocab=50, d=16, hidden=24, classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = getattr(nn, cell)(d, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, idx, target):
        out, _ = self.rnn(self.emb(idx))
        return F.cross_entropy(self.head(out[:, -1]), target)


def lm_inputs(vocab, b=4, t=16):
    idx = torch.randint(0, vocab, (b, t + 1))
    return {"idx": idx[:, :-1].contiguous(), "target": idx[:, 1:].contiguous()}


def hf_lm_inputs(vocab, b=2, t=16):
    ids = torch.randint(0, vocab, (b, t))
    return {"input_ids": ids, "labels": ids.clone()}


def bench_lm(spec):
    """(module, inputs) of a benchmark LM (tools/bench/run_case.py, ctor `lm:SPEC`): SPEC is
    `family,key=value,...` with family nanogpt, gpt2 or llama and the keys of that factory
    (vocab, block, d, heads, layers; llama also hidden, kv_heads) plus batch and seq."""
    family, *kv = spec.split(",")
    args = {k: int(v) for k, v in (p.split("=") for p in kv)}
    batch, seq = args.pop("batch"), args.pop("seq")
    make = {"nanogpt": NanoGPT, "gpt2": gpt2, "llama": llama}[family]
    torch.manual_seed(2)
    module = make(**args)
    inputs = (lm_inputs if family == "nanogpt" else hf_lm_inputs)(args["vocab"], batch, seq)
    return module, inputs


def bert_inputs(vocab=96, b=3, t=12):
    ids = torch.randint(0, vocab, (b, t))
    mask = torch.ones(b, t, dtype=torch.int64)
    mask[1, 8:] = 0          # padding at the end of two of the sequences
    mask[2, 5:] = 0
    return {"input_ids": ids, "labels": torch.randint(0, 3, (b,)), "attention_mask": mask}


class ReplayDropout:
    """torch.nn.functional.dropout drawing aotc's Philox streams (docs/randomness.md), so torch
    applies the mask an aotc program of the same export draws: the k-th dropout call of step s
    that draws (training, 0 < p < 1) uses stream offset s * streams + k of seed `seed`, with the
    f32 uniform (the exported programs are float32, also under the float64 reference) and
    aotc's decomposition mask = u > p, out = mask * x * (1 / (1 - p)). Use as a context
    manager around the training loop; step() after each forward."""

    def __init__(self, seed):
        import philox
        self.philox, self.seed, self.step_index, self.k, self.streams = philox, seed, 0, 0, None

    def __enter__(self):
        self.saved = F.dropout
        F.dropout = self
        return self

    def __exit__(self, *exc):
        F.dropout = self.saved

    def __call__(self, x, p=0.5, training=True, inplace=False):
        if not (training and 0.0 < p < 1.0):
            return self.saved(x, p, training, inplace)
        base = self.step_index * (self.streams or 0)
        u = self.philox.uniform(self.seed, base + self.k, tuple(x.shape), "float32")
        self.k += 1
        mask = torch.from_numpy(u > p)
        return mask * x * (1.0 / (1.0 - p))

    def step(self):
        if self.streams is None:
            self.streams = self.k
        assert self.k == self.streams, "every step draws the same number of streams"
        self.step_index, self.k = self.step_index + 1, 0


def models():
    """name -> (module factory, inputs factory, train mode, lr[, options])."""
    return {
        "nanogpt": (NanoGPT, lambda: lm_inputs(65), True, 0.1),
        "gpt2": (gpt2, lambda: hf_lm_inputs(96), True, 0.1),
        # HF's sdpa attention: torch 2.15's run_decompositions() fails on it ("Cannot view a
        # tensor with shape [2, 16, 32] and strides (32, 64, 1)"), so the export keeps
        # aten.scaled_dot_product_attention whole (docs/testing.md "Zoo").
        "gpt2_sdpa": (lambda: gpt2("sdpa"), lambda: hf_lm_inputs(96), True, 0.1,
                      {"keep": (torch.ops.aten.scaled_dot_product_attention.default,)}),
        "llama": (llama, lambda: hf_lm_inputs(96), True, 0.1),
        "bert": (bert, bert_inputs, True, 0.1),
        # Dropout 0.1 everywhere HF puts it (embeddings, attention probabilities, residuals,
        # classifier); the goldens replay aotc's Philox mask (ReplayDropout).
        "gpt2_dropout": (lambda: gpt2(dropout=0.1), lambda: hf_lm_inputs(96), True, 0.1,
                         {"rng_seed": 1234}),
        "bert_dropout": (lambda: bert(dropout=0.1), bert_inputs, True, 0.1, {"rng_seed": 1234}),
        "lstm": (lambda: RNNClassifier("LSTM"), lambda: {"idx": torch.randint(0, 50, (4, 10)),
                                                         "target": torch.randint(0, 4, (4,))}, True, 0.1),
        "gru": (lambda: RNNClassifier("GRU"), lambda: {"idx": torch.randint(0, 50, (4, 10)),
                                                       "target": torch.randint(0, 4, (4,))}, True, 0.1),
    }
