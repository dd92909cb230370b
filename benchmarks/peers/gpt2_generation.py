"""Generation at GPT-2 small's size on identical weights: attnkit's ``DecoderLM`` (key/value
cache), in float32 and in int8 (``quantize_int8``, as ``attnkit lm generate --int8``),
against Hugging Face ``generate`` (its cache), CTranslate2's ``Generator`` (float32 and int8)
and nanoGPT's formulation, greedy, batch 1 and 16, new tokens/s with the token ids compared.

    python -m benchmarks.peers.gpt2_generation [--rounds 3] [--threads 2] [--prompt 16]
        [--new 32] [--batches 1,16] [--nanogpt-batches 1,16] [--profile] [--quick]
        [--processes]

One random-weight ``GPT2LMHeadModel`` (transformers' initialization, seed 0; 124 M
parameters) is saved as a Hugging Face folder; attnkit reads it with
``attnkit.convert.gpt2.gpt2_model`` (linear layers then prepacked, as a loaded LM's are);
nanoGPT's ``GPT`` (written below from its published structure: its module names are
GPT-2's, so the state dict loads as nanoGPT's ``from_pretrained`` loads it, the ``Conv1D``
weights transposed) generates as nanoGPT's ``generate`` does: a full forward pass over the
whole sequence for every new token (it has no cache), logits of the last position only.
Two departures from nanoGPT's file, both to give GPT-2's outputs: its MLP's ``nn.GELU()`` is
GPT-2's tanh form here, and the next token is the argmax (nanoGPT samples).

"attnkit int8" is a copy of attnkit's model with ``attnkit.inference.int8.quantize_int8``
applied: every linear layer and the tied output layer (logits h E^T) in int8. "CT2 float32"
and "CT2 int8" are the same HF model converted by CTranslate2's own GPT-2 loader
(``benchmarks/peers/ct2_gpt2.py``; ``compute_type`` "float32" / "int8", ``intra_threads``
= ``--threads``); they are skipped, with a line saying so, without ctranslate2.

Every contender generates exactly ``--new`` tokens after prompts of ``--prompt`` random ids
(one length, so no padding; HF's end-of-text stop is off). Interleaved rounds (harness);
new tokens/s median [min-max], attnkit's and attnkit int8's speed over each contender's,
per round; "ids = attnkit's": how many sequences equal attnkit float32's; "ids = its
float32's": an int8 contender's against its own float32 model's.
Goals: attnkit >= 1.5x HF in every row (issue 35); attnkit int8 against HF and CT2 int8
(issue 47).
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.harness import (
    ContenderProcesses,
    interleaved_times,
    ratio_table,
    set_threads,
)
from benchmarks.peers.real_sizes import GPT2_SMALL, hf_gpt2, int8_columns


class CausalSelfAttention(nn.Module):
    """nanoGPT's: q, k, v from one ``c_attn``, PyTorch's fused causal attention, ``c_proj``."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.n_head = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape  # (B, T, D)
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, Dh)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.c_fc, self.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, eps: float) -> None:
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d, eps=eps), CausalSelfAttention(d, heads)
        self.ln_2, self.mlp = nn.LayerNorm(d, eps=eps), MLP(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's ``GPT`` at GPT-2's settings (biases, tied head)."""

    def __init__(self, vocab: int, ctx: int, d: int, layers: int, heads: int, eps: float) -> None:
        super().__init__()
        self.block_size = ctx
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d), wpe=nn.Embedding(ctx, d),
            h=nn.ModuleList(Block(d, heads, eps) for _ in range(layers)),
            ln_f=nn.LayerNorm(d, eps=eps),
        ))  # fmt: skip
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tied

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Inference: the logits of the last position (B, 1, V), as nanoGPT's without targets."""
        t = self.transformer
        x = t.wte(idx) + t.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in t.h:
            x = block(x)
        return self.lm_head(t.ln_f(x)[:, [-1], :])

    @classmethod
    def from_hf(cls, hf) -> GPT:
        """The HF model's weights, as nanoGPT's ``from_pretrained`` copies them."""
        c = hf.config
        model = cls(
            c.vocab_size, c.n_positions, c.n_embd, c.n_layer, c.n_head, c.layer_norm_epsilon
        )
        conv1d = (
            "attn.c_attn.weight",
            "attn.c_proj.weight",
            "mlp.c_fc.weight",
            "mlp.c_proj.weight",
        )
        state = {k: v.t() if k.endswith(conv1d) else v for k, v in hf.state_dict().items()
                 if not k.endswith((".attn.bias", ".attn.masked_bias"))}  # fmt: skip
        model.load_state_dict(state, strict=True)
        return model.eval()

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        """nanoGPT's loop, greedy: the whole (cropped) sequence through the model per token."""
        for _ in range(max_new_tokens):
            cond = idx if idx.shape[1] <= self.block_size else idx[:, -self.block_size :]
            nxt = self(cond)[:, -1, :].argmax(dim=-1, keepdim=True)  # (B, 1)
            idx = torch.cat((idx, nxt), dim=1)
        return idx


def contenders(ours, ours_int8, hf, ct2, nano, prompts: torch.Tensor, new: int) -> dict:
    """name -> a function generating ``new`` ids after ``prompts`` (B, P): B lists of ids.
    ``ct2``: (tokens, {compute type: Generator}) or None."""
    from attnkit.inference.generation import generate_ids

    P = prompts.shape[1]
    mask = torch.ones_like(prompts)
    fns = {
        "attnkit": lambda: generate_ids(ours, prompts, max_new_tokens=new),
        "attnkit int8": lambda: generate_ids(ours_int8, prompts, max_new_tokens=new),
        "HF generate": lambda: hf.generate(
            prompts, attention_mask=mask, max_new_tokens=new, do_sample=False, pad_token_id=0
        )[:, P:].tolist(),
    }
    if ct2 is not None:
        from benchmarks.peers.ct2_gpt2 import ct2_generate

        tokens, generators = ct2
        for ct, generator in generators.items():
            fns[f"CT2 {ct}"] = ct2_generate(generator, tokens, prompts, new)
    if nano is not None:
        fns["nanoGPT (no cache)"] = lambda: nano.generate(prompts, new)[:, P:].tolist()
    return fns


def runner(name: str, folder: str, threads: int):
    """In a contender's process (``--processes``): its model from the saved folders, and
    ``run((prompts, new))`` generating ``new`` ids after ``prompts`` (B, P)."""
    set_threads(threads)
    folder = Path(folder)
    if name.startswith("CT2"):
        from benchmarks.peers.ct2_gpt2 import Vocabulary, ct2_generate, ct2_generators

        kind = name.split()[1]
        generator = ct2_generators(folder / "ct2", threads, (kind,))[kind]
        tokens = Vocabulary(GPT2_SMALL["vocab_size"], GPT2_SMALL["vocab_size"] - 1).tokens
        return lambda request: ct2_generate(generator, tokens, *request)()
    from transformers import GPT2LMHeadModel

    hf = GPT2LMHeadModel.from_pretrained(folder / "hf", attn_implementation="eager").eval()
    hf.generation_config.eos_token_id = None
    ours = ours_int8 = nano = None
    if name.startswith("attnkit"):
        from attnkit.convert.gpt2 import gpt2_model
        from attnkit.inference.int8 import quantize_int8
        from attnkit.inference.prepacked import prepack_linears

        ours = ours_int8 = gpt2_model(folder / "hf")
        quantize_int8(ours_int8) if name == "attnkit int8" else prepack_linears(ours)
    elif name.startswith("nanoGPT"):
        nano = GPT.from_hf(hf)
    return lambda request: contenders(ours, ours_int8, hf, None, nano, *request)[name]()


def profile_top(fns: dict, rows: int = 12) -> None:
    """The top operators (self CPU time) of one call of attnkit, attnkit int8 and HF."""
    from torch.profiler import ProfilerActivity, profile

    for name in ("attnkit", "attnkit int8", "HF generate"):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fns[name]()
        print(f"\nprofile of one {name} call")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt", type=int, default=16, help="prompt length (random ids)")
    p.add_argument("--new", type=int, default=32, help="tokens generated per prompt")
    p.add_argument("--batches", default="1,16")
    p.add_argument("--nanogpt-batches", default="1,16", help="batches nanoGPT runs at (slowest)")
    p.add_argument("--profile", action="store_true", help="top operators of attnkit's calls")
    p.add_argument("--quick", action="store_true", help="1 round, 4 new tokens, batches 1,2")
    p.add_argument("--processes", action="store_true",
                   help="each contender in its own process (no shared thread pools or "
                        "allocator; --profile is then not available)")  # fmt: skip
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.new, args.batches = 1, 4, "1,2"
    set_threads(args.threads)
    import transformers

    from attnkit.convert.gpt2 import gpt2_model
    from attnkit.inference.int8 import quantize_int8
    from attnkit.inference.prepacked import prepack_linears

    ct2, ct2_version = None, "not installed: CT2 contenders skipped"
    with tempfile.TemporaryDirectory(prefix="gpt2-size-") as tmp:
        hf = hf_gpt2(Path(tmp) / "hf")
        ours = gpt2_model(Path(tmp) / "hf")
        try:
            import ctranslate2
        except ImportError:
            print("ctranslate2 is not importable: CT2 float32 and CT2 int8 skipped")
        else:
            from benchmarks.peers.ct2_gpt2 import ct2_generators, ct2_gpt2

            tokens = ct2_gpt2(hf, Path(tmp) / "ct2")
            ct2 = tokens, ct2_generators(Path(tmp) / "ct2", args.threads)  # loaded: folder unused
            ct2_version = ctranslate2.__version__
        if args.processes:
            names = ["attnkit", "attnkit int8", "HF generate"]
            names += ["CT2 float32", "CT2 int8"] if ct2 is not None else []
            names += ["nanoGPT (no cache)"] if args.nanogpt_batches else []
            workers = ContenderProcesses(
                names, "benchmarks.peers.gpt2_generation:runner", (tmp, args.threads)
            )
    prepack_linears(ours)
    ours_int8 = copy.deepcopy(ours)
    quantize_int8(ours_int8)
    hf.generation_config.eos_token_id = None  # exactly --new tokens, as the others
    nano = GPT.from_hf(hf)
    params = sum(p.numel() for p in ours.parameters())
    print(f"GPT-2 small shapes, random weights: {params:,} parameters; torch {torch.__version__}, "
          f"transformers {transformers.__version__}, ctranslate2 {ct2_version}, "
          f"{args.threads} threads, {args.rounds} "
          f"interleaved rounds, prompts of {args.prompt} ids, {args.new} new tokens")  # fmt: skip

    for batch in [int(b) for b in args.batches.split(",")]:
        gen = torch.Generator().manual_seed(batch)
        prompts = torch.randint(0, GPT2_SMALL["vocab_size"], (batch, args.prompt), generator=gen)
        with_nano = str(batch) in args.nanogpt_batches.split(",")
        if args.processes:
            times, outputs = workers.timed((prompts, args.new), args.rounds)
            if not with_nano:
                times.pop("nanoGPT (no cache)", None), outputs.pop("nanoGPT (no cache)", None)
        else:
            fns = contenders(ours, ours_int8, hf, ct2, nano if with_nano else None, prompts,
                             args.new)  # fmt: skip
            outputs = {name: fn() for name, fn in fns.items()}  # warm-up; the ids compared
            times = interleaved_times(fns, repeats=args.rounds, warmup=0)
        print(f"\nbatch {batch}: {batch} x {args.new} new tokens a round")
        headers, cells = int8_columns(times, outputs, "attnkit")
        ratio_table(
            times, "attnkit", unit="new tokens/s", shown=lambda t, n=batch * args.new: n / t,
            extra=cells, extra_headers=headers,
        )  # fmt: skip
        if args.profile and not args.processes:
            profile_top(fns)
    if args.processes:
        workers.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
