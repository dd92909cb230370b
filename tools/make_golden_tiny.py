"""Write tests/models/golden_tiny.json: a frozen tiny Transformer and its outputs.

Run once, by hand, when the golden values must change on purpose (say why in the commit):
    .venv/bin/python tools/make_golden_tiny.py
"""

import json

import torch

from attnkit.inference.beam_search import BeamSearch
from attnkit.inference.decoding import greedy_decode
from attnkit.models.transformer import TransformerConfig, build_transformer

torch.manual_seed(7)
cfg = dict(d_model=8, num_heads=2, num_layers=1, d_ff=16, dropout=0.0)
model = build_transformer(TransformerConfig(**cfg), 10, 10).eval()
with torch.no_grad():
    model.decoder.dense.bias[3] += 1.0  # <eos> likely enough that some sentences finish
src = torch.tensor([[4, 5, 6, 3, 1], [7, 8, 3, 1, 1], [9, 3, 1, 1, 1]])
src_len = torch.tensor([4, 3, 2])
dec_in = torch.tensor([[2, 4, 5], [2, 6, 1], [2, 7, 8]])
with torch.no_grad():
    logits, _ = model(src, dec_in, src_len)
greedy = greedy_decode(model, src, src_len, bos_id=2, eos_id=3, max_len=6)
beams = BeamSearch(3, 6, 2, 3)(model, src, src_len)
golden = {
    "config": cfg,
    "src_vocab": 10,
    "tgt_vocab": 10,
    "state_dict": {k: v.tolist() for k, v in model.state_dict().items()},
    "src": src.tolist(),
    "src_len": src_len.tolist(),
    "dec_in": dec_in.tolist(),
    "logits": [[[round(x, 6) for x in row] for row in seq] for seq in logits.tolist()],
    "greedy": greedy.tokens,
    "greedy_finished": greedy.finished,
    "beam": [
        [
            {"tokens": h.tokens, "log_prob": round(h.log_prob, 6), "finished": h.finished}
            for h in hyps
        ]
        for hyps in beams
    ],
}
with open("tests/models/golden_tiny.json", "w") as f:
    json.dump(golden, f, separators=(",", ":"))
print(greedy.tokens, [[h.tokens for h in hyps] for hyps in beams])
