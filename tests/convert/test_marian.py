"""A MarianMT folder imported into attnkit's Transformer computes what transformers computes.

One tiny random Marian model (tests/convert/marian_fixtures.py) against transformers on
identical weights: teacher-forced logits on padded batches, every attention map on its
valid positions, cached decoding against a full pass, greedy and beam search against
``generate``; the refusals; OPUS-MT en-fr's shapes on the meta device.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tests.convert.marian_fixtures import hf_model, marian_folder, random_marian, tiny_config

from attnkit.attention.recording import record_attention
from attnkit.convert.hf_files import HFSourceError
from attnkit.convert.marian import (
    MarianMappingError,
    attnkit_state_dict,
    marian_config,
    marian_model,
)
from attnkit.inference.beam_search import BeamSearch
from attnkit.inference.decoding import greedy_decode
from attnkit.models.transformer import build_transformer

# padded batch: 3 sources of lengths 7, 4, 2 (</s> last), right-padded with <pad>
SRC = [[5, 9, 14, 3, 22, 7, 0], [11, 4, 30, 0], [8, 0]]
TGT = [[12, 6, 17, 25, 9], [3, 40, 7], [21, 5, 33, 2]]  # decoder inputs after the start


def _pad(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(map(len, rows))
    ids = torch.tensor([r + [pad] * (n - len(r)) for r in rows])
    return ids, torch.tensor([len(r) for r in rows])


@pytest.fixture(scope="module")
def pair():
    folder = marian_folder()
    hf = hf_model(folder)
    ours = marian_model(folder)
    pad = hf.config.pad_token_id
    src, src_len = _pad(SRC, pad)
    tgt, tgt_len = _pad([[hf.config.decoder_start_token_id, *t] for t in TGT], pad)
    return hf, ours, src, src_len, tgt, tgt_len


def _hf_forward(hf, src, src_len, tgt):
    mask = (torch.arange(src.shape[1])[None] < src_len[:, None]).long()
    with torch.no_grad():
        return hf(input_ids=src, attention_mask=mask, decoder_input_ids=tgt,
                  output_attentions=True)  # fmt: skip


def test_config_maps_onto_attnkits_fields(pair):
    hf, ours, *_ = pair
    c = ours.encoder.config
    assert (c.d_model, c.num_heads, c.num_layers, c.d_ff, c.max_len) == (16, 4, 2, 32, 64)
    assert (c.activation, c.positions_layout, c.scale_embedding, c.tie_embeddings) == (
        "silu", "halves", True, True)  # fmt: skip
    assert c.bias and not c.pre_norm and not ours.training
    w = ours.encoder.embedding.weight
    assert ours.decoder.embedding.weight is w and ours.decoder.dense.weight is w
    assert torch.equal(ours.decoder.dense.bias, hf.final_logits_bias[0])
    table = hf.model.encoder.embed_positions.weight  # Marian's own (float64 -> float32)
    assert torch.equal(ours.encoder.pos_encoding.P[0], table)


def test_teacher_forced_logits_and_every_attention_map_equal_hf(pair):
    hf, ours, src, src_len, tgt, tgt_len = pair
    out = _hf_forward(hf, src, src_len, tgt)
    with torch.no_grad(), record_attention() as record:
        enc = ours.encoder(src, src_len)
        logits, _ = ours.decoder(tgt, ours.decoder.init_state(enc, src_len))
    worst = 0.0
    for b, T in enumerate(tgt_len.tolist()):
        diff = (logits[b, :T] - out.logits[b, :T]).abs().max().item()
        worst = max(worst, diff)
    assert worst < 1e-4, worst
    assert out.logits.abs().max() > 1.0  # the comparison is of sizeable values
    maps = [
        ([blk.attention for blk in ours.encoder.blks], out.encoder_attentions, "src", "src"),
        ([blk.attention1 for blk in ours.decoder.blks], out.decoder_attentions, "tgt", "tgt"),
        ([blk.attention2 for blk in ours.decoder.blks], out.cross_attentions, "tgt", "src"),
    ]
    lengths = {"src": src_len.tolist(), "tgt": tgt_len.tolist()}
    for modules, expected, q_side, k_side in maps:
        for module, ref in zip(modules, expected, strict=True):
            got = record.get(module)  # (B, H, Q, K)
            for b in range(src.shape[0]):
                Q, K = lengths[q_side][b], lengths[k_side][b]
                torch.testing.assert_close(got[b, :, :Q, :K], ref[b, :, :Q, :K], atol=1e-5, rtol=0)


def test_cached_decoding_equals_the_full_pass(pair):
    _, ours, src, src_len, tgt, _ = pair
    with torch.no_grad():
        enc = ours.encoder(src, src_len)
        full, _ = ours.decoder(tgt, ours.decoder.init_state(enc, src_len))
        state, steps = ours.decoder.init_state(enc, src_len), []
        for t in range(tgt.shape[1]):  # the lean one-position step after the first
            step, state = ours.decoder(tgt[:, t : t + 1], state)
            steps.append(step)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


def _hf_generate(hf, src, src_len, **kwargs) -> list[list[int]]:
    mask = (torch.arange(src.shape[1])[None] < src_len[:, None]).long()
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=mask, do_sample=False,
                          forced_eos_token_id=None,
                          bad_words_ids=[[hf.config.pad_token_id]], **kwargs)  # fmt: skip
    rows = []
    for row in out[:, 1:].tolist():  # the decoder start left out
        rows.append(row[: row.index(0)] if 0 in row else row)
    return rows


def test_greedy_equals_hf_generate_token_for_token(pair):
    hf, ours, src, src_len, *_ = pair
    pad = hf.config.pad_token_id
    expected = _hf_generate(hf, src, src_len, num_beams=1, max_new_tokens=20)
    res = greedy_decode(ours, src, src_len, bos_id=pad, eos_id=0, max_len=20, suppress=[pad])
    assert res.tokens == expected
    # rows that end with </s> and rows that stop at the limit, both compared
    assert any(res.finished) and not all(res.finished) and max(map(len, res.tokens)) == 20
    unsuppressed = greedy_decode(ours, src, src_len, bos_id=pad, eos_id=0, max_len=20)
    assert unsuppressed.tokens != res.tokens  # the model favours <pad>: suppression matters


def test_beam_4_equals_hf_generate_without_length_penalty(pair):
    """Raw log-probabilities on both sides (attnkit's alpha 0, HF's length_penalty 0) and
    HF's early_stopping="never" (search until no running beam can win): same best."""
    hf, ours, src, src_len, *_ = pair
    pad = hf.config.pad_token_id
    expected = _hf_generate(hf, src, src_len, num_beams=4, max_new_tokens=20,
                            length_penalty=0.0, early_stopping="never")  # fmt: skip
    search = BeamSearch(4, 20, pad, 0, length_penalty=0.0, suppress=[pad])
    assert [h[0].tokens for h in search(ours, src, src_len)] == expected


def _refused(tmp_path, match, **changes):
    folder = tmp_path / "changed"
    shutil.copytree(marian_folder(), folder, dirs_exist_ok=True)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(MarianMappingError, match=match):
        marian_model(folder)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"decoder_layers": 3}, r"encoder_layers=2 but decoder_layers=3"),
        (
            {"decoder_attention_heads": 2},
            r"encoder_attention_heads=4 but decoder_attention_heads=2",
        ),
        ({"decoder_ffn_dim": 64}, r"encoder_ffn_dim=32 but decoder_ffn_dim=64"),
        ({"normalize_before": True}, r"normalize_before=True \(pre-norm"),
        ({"layernorm_embedding": True}, r"layernorm_embedding=True \(a LayerNorm on the emb"),
        ({"static_position_embeddings": False}, r"static_position_embeddings=False \(learned"),
        ({"activation_function": "quick_gelu"}, r"activation_function 'quick_gelu' has no"),
        ({"decoder_vocab_size": 7}, r"decoder_vocab_size=7 differs from vocab_size"),
        ({"model_type": "bart"}, r"model_type 'bart' is not 'marian'"),
    ],
)
def test_what_does_not_map_is_refused_with_the_reason(tmp_path, changes, match):
    _refused(tmp_path, match, **changes)


def test_missing_folder_and_weights_are_clear_errors(tmp_path):
    with pytest.raises(HFSourceError, match=r"config\.json' not found"):
        marian_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "marian"}))
    with pytest.raises(HFSourceError, match=r"holds no weights: expected one of model\.safet"):
        marian_model(tmp_path)
    # a config.json without the sizes means transformers' defaults (d_model 1024 ...)
    shutil.copy(marian_folder() / "model.safetensors", tmp_path)
    with pytest.raises(
        HFSourceError,
        match=r"model\.safetensors: model\.shared\.weight has shape "
        r"\(82, 16\), but config\.json's sizes make it \(58101, 1024\) \(and ",
    ):
        marian_model(tmp_path)


def test_opus_mt_en_fr_shapes_map_on_the_meta_device():
    """OPUS-MT en-fr's config.json values (Helsinki-NLP/opus-mt-en-fr), mapped on the meta
    device: every tensor of the HF model finds its attnkit place, shapes equal."""
    from transformers import MarianMTModel

    opus = dict(
        vocab_size=59514, decoder_vocab_size=59514, d_model=512, encoder_layers=6,
        decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8,
        encoder_ffn_dim=2048, decoder_ffn_dim=2048, max_position_embeddings=512,
        activation_function="swish", scale_embedding=True, pad_token_id=59513,
        eos_token_id=0, decoder_start_token_id=59513, share_encoder_decoder_embeddings=True,
        static_position_embeddings=True, normalize_before=False, normalize_embedding=False,
        add_final_layer_norm=False, model_type="marian",
    )  # fmt: skip
    config = marian_config(opus)
    with torch.device("meta"):
        hf = MarianMTModel(tiny_config(**{k: v for k, v in opus.items() if k != "model_type"}))
        ours = build_transformer(config, 59514, 59514)
    state = attnkit_state_dict(hf.state_dict(), config)
    ours.load_state_dict(state, strict=True)  # names and shapes checked (meta: no copy)
    assert ours.decoder.dense.weight is ours.encoder.embedding.weight
    n = sum(p.numel() for p in ours.parameters())
    n_hf = sum(p.numel() for p in hf.parameters()) + hf.final_logits_bias.numel()
    assert n == n_hf - 2 * 512 * 512  # HF's two position tables are parameters, ours buffers
    assert 74_000_000 < n < 76_000_000


def test_an_untied_model_maps_too(tmp_path):
    """share_encoder_decoder_embeddings false: three matrices, attnkit ties none."""
    folder = tmp_path / "untied"
    hf = random_marian(tiny_config(48, share_encoder_decoder_embeddings=False,
                                   tie_word_embeddings=False), seed=3)  # fmt: skip
    hf.save_pretrained(folder)
    ours = marian_model(folder)
    assert not ours.encoder.config.tie_embeddings
    assert ours.decoder.dense.weight is not ours.decoder.embedding.weight
    src, src_len = _pad(SRC[:2], 47)
    tgt, _ = _pad([[47, *t] for t in TGT[:2]], 47)
    ref = _hf_forward(hf, src, src_len, tgt).logits
    with torch.no_grad():
        got, _ = ours.decoder(tgt, ours.decoder.init_state(ours.encoder(src, src_len), src_len))
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=0)
