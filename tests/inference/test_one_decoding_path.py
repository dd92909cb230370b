"""The one decoding path, ``decoding.translate``: against a per-sentence reference, and
every caller going through it.

The references below decode one sentence at a time, without batching, padding, row
pruning or beam bookkeeping on tensors: greedy is argmax until ``<eos>``; beam search keeps
a Python list of hypotheses, each with its own decoder state, a finished one carried on
unchanged (what ``BeamSearch`` does with its free ``<eos>`` continuation), and ranks the
survivors by log-probability over the GNMT length penalty at the end.
"""

from __future__ import annotations

import pytest
import torch

from attnkit.inference import decoding, evaluation
from attnkit.inference.decoding import Hypothesis, translate
from attnkit.inference.translator import Translator
from attnkit.models.registry import build_model

MAX_LEN = 7  # decoder steps: short enough that some sentences stop without <eos>


@torch.no_grad()
def reference_greedy(model, data, sentence: str, max_len: int) -> tuple[list[int], bool]:
    """(ids, finished) of ``sentence`` alone, by argmax one step at a time."""
    bos, eos = data.tgt_vocab["<bos>"], data.tgt_vocab["<eos>"]
    src, src_len = data.encode_source([sentence])  # (1, S), (1,)
    state = model.decoder.init_state(model.encoder(src, src_len), src_len)
    y, ids = bos, []
    for _ in range(max_len):
        logits, state = model.decoder(torch.tensor([[y]]), state)  # (1, 1, V)
        y = int(logits[0, -1].argmax())
        if y == eos:
            return ids, True
        ids.append(y)
    return ids, False


@torch.no_grad()
def reference_beam(
    model, data, sentence: str, k: int, max_len: int, alpha: float
) -> tuple[list[int], bool]:
    """(ids, finished) of the best of ``k`` beams for ``sentence`` alone."""
    bos, eos = data.tgt_vocab["<bos>"], data.tgt_vocab["<eos>"]
    src, src_len = data.encode_source([sentence])  # (1, S), (1,)
    state = model.decoder.init_state(model.encoder(src, src_len), src_len)
    # (tokens, log-probability as float32, finished, decoder state after <bos> + tokens[:-1])
    beams = [([], torch.zeros(()), False, state)]
    for _ in range(max_len):
        candidates = []  # (log_prob, tokens, finished, state to feed tokens[-1] into)
        for tokens, log_prob, finished, st in beams:
            if finished:
                candidates.append((log_prob, tokens, True, None))
                continue
            y = tokens[-1] if tokens else bos
            logits, st = model.decoder(torch.tensor([[y]]), st)  # (1, 1, V)
            step = torch.log_softmax(logits[0, -1].float(), dim=-1)  # (V,)
            for v, lp in enumerate(log_prob + step):
                candidates.append((lp, [*tokens, v], v == eos, st))
        candidates.sort(key=lambda c: float(c[0]), reverse=True)
        beams = [(t, lp, f, st) for lp, t, f, st in candidates[:k]]
        if all(f for _, _, f, _ in beams):
            break

    def score(beam):
        tokens, log_prob, _, _ = beam
        length = torch.tensor(float(len(tokens)))  # <eos> included when finished
        return float(log_prob / ((5.0 + length) / 6.0) ** alpha)

    tokens, _, finished, _ = max(beams, key=score)
    return (tokens[:-1] if finished else tokens), finished


def _trained(data, arch: str):
    """A tiny ``arch`` trained for about a second: translations of several lengths."""
    from attnkit.training.translation import teacher_forcing_loss

    torch.manual_seed(0)
    if arch == "transformer":
        cfg = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "dropout": 0.0}
    else:
        cfg = {"embed_size": 16, "num_hiddens": 16, "num_layers": 1, "dropout": 0.0}
    model = build_model(arch, cfg, len(data.src_vocab), len(data.tgt_vocab))
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    bos = data.tgt_vocab["<bos>"]
    for epoch in range(30):
        for batch in data.batches("train", 1024, shuffle=True, epoch=epoch):
            src, src_len, tgt, tgt_len = batch.astuple()
            loss = teacher_forcing_loss(model, src, src_len, tgt, tgt_len, bos, "sum")
            opt.zero_grad()
            (loss / tgt_len.sum()).backward()
            opt.step()
    return model.eval()


def _mixed_sentences(data) -> list[str]:
    """13 sentences of mixed lengths, not in length order, one of them twice."""
    pool = data.sources("test")[:8] + data.sources("train")[:4]
    pool.sort(key=lambda s: (len(s.split()) % 3, s))  # a shuffle that stays deterministic
    sentences = [*pool, pool[2]]
    lengths = [len(s.split()) for s in sentences]
    assert len(set(lengths)) >= 3 and lengths != sorted(lengths)
    return sentences


@pytest.fixture(scope="module")
def cases(tiny_data):
    """(data, sentences, {arch: trained model}): ~300 generated pairs, max_len 12."""
    models = {a: _trained(tiny_data, a) for a in ("transformer", "bahdanau")}
    return tiny_data, _mixed_sentences(tiny_data), models


@pytest.mark.parametrize("arch", ["transformer", "bahdanau"])
@pytest.mark.parametrize("batch_size", [1, 4, 5, 64])  # 13 = 4+4+4+1 = 5+5+3 = one batch
def test_greedy_equals_one_sentence_at_a_time(cases, arch, batch_size):
    data, sentences, models = cases
    model = models[arch]
    want = [reference_greedy(model, data, s, MAX_LEN) for s in sentences]
    got = translate(model, data, sentences, max_len=MAX_LEN, batch_size=batch_size)
    assert [(h.ids, h.finished) for h in got] == want  # same ids, same (input) order
    assert {f for _, f in want} == {True, False}  # both endings are exercised
    assert [h.text for h in got] == [data.detokenize(ids) for ids, _ in want]


@pytest.mark.parametrize("arch", ["transformer", "bahdanau"])
@pytest.mark.parametrize(("beam", "alpha", "batch_size"), [(3, 0.6, 4), (3, 0.0, 5), (2, 1.0, 1)])
def test_beam_equals_one_sentence_at_a_time(cases, arch, beam, alpha, batch_size):
    data, sentences, models = cases
    model = models[arch]
    want = [reference_beam(model, data, s, beam, MAX_LEN, alpha) for s in sentences]
    got = translate(
        model, data, sentences, beam=beam, length_penalty=alpha, max_len=MAX_LEN,
        batch_size=batch_size,
    )  # fmt: skip
    assert [(h.ids, h.finished) for h in got] == want
    assert {f for _, f in want} == {True, False}
    assert [h.text for h in got] == [data.detokenize(ids) for ids, _ in want]


def test_the_references_agree_where_they_must(cases):
    """A beam of one is greedy: the two references check each other."""
    data, sentences, models = cases
    for s in sentences[:5]:
        greedy = reference_greedy(models["transformer"], data, s, MAX_LEN)
        assert reference_beam(models["transformer"], data, s, 1, MAX_LEN, 0.6) == greedy


def test_every_caller_decodes_through_the_one_path(cases, monkeypatch):
    """Translator.translate/evaluate/maps, translate_and_score (the trainer's validation
    BLEU) and the explorer's ModelService all call ``decoding.translate``."""
    from attnkit.serve.model_service import ModelService

    data, sentences, models = cases
    model = models["bahdanau"]
    real = decoding.translate
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs.get("beam"))
        return real(*args, **kwargs)

    monkeypatch.setattr(decoding, "translate", spy)
    tr = Translator(model, data)
    greedy = tr.translate(sentences[:3])
    beam = tr.translate(sentences[:3], beam=2)
    ev = tr.evaluate("test", limit=4)
    ev_beam = tr.evaluate("test", limit=4, beam=2, length_penalty=0.0)
    tr.maps(sentences[0])
    hyps, _ = evaluation.translate_and_score(model, data, sentences[:2], sentences[:2])
    service = ModelService(model, data, "bahdanau")
    one = service.translate(sentences[0])
    two = service.translate(sentences[0], beam_size=2)
    assert calls == [None, 2, None, 2, None, None, None, 2]
    assert [h.text for h in greedy[:2]] == hyps
    assert all(isinstance(h, Hypothesis) for h in beam)
    assert ev.hyps == [h.text for h in real(model, data, ev.sources, max_len=tr.decode_steps())]
    assert len(ev_beam.hyps) == 4
    assert one.text == greedy[0].text and two.beam_size == 2


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"beam": 0}, ValueError, "beam must be a positive int, got 0"),
        ({"beam": 2.0}, TypeError, r"beam must be a positive int, got 2\.0 \(float\)"),
        ({"beam": True}, TypeError, r"beam must be a positive int, got True \(bool\)"),
        ({"batch_size": 0}, ValueError, "batch_size must be a positive int, got 0"),
        ({"batch_size": "8"}, TypeError, r"batch_size must be a positive int, got '8' \(str\)"),
        ({"max_len": -1}, ValueError, "max_len must be a positive int, got -1"),
        ({"length_penalty": -1}, ValueError, "length_penalty must be a finite number >= 0"),
        ({"length_penalty": None}, TypeError, "length_penalty must be a finite number >= 0"),
    ],
)
def test_arguments_are_checked(cases, kwargs, error, match):
    data, sentences, models = cases
    with pytest.raises(error, match=match):
        translate(models["bahdanau"], data, sentences[:2], **kwargs)


def test_inputs_are_checked(cases):
    data, sentences, models = cases
    model = models["bahdanau"]
    with pytest.raises(TypeError, match="sentences must be a list of str, not a single str"):
        translate(model, data, sentences[0])
    with pytest.raises(TypeError, match="sentences must be a list of str, got int at 1"):
        translate(model, data, [sentences[0], 3])
    with pytest.raises(TypeError, match="model must be an attnkit EncoderDecoder, got Linear"):
        translate(torch.nn.Linear(2, 2), data, sentences[:1])
    with pytest.raises(TypeError, match=r"data must be a TranslationData, got dict \(no encode"):
        translate(model, {}, sentences[:1])
    with pytest.raises(ValueError, match="empty sentence"):
        translate(model, data, [sentences[0], " "])


class _DecoderRows:
    """The rows of every decoder call (a forward pre-hook), while in a ``with`` block."""

    def __init__(self, decoder) -> None:
        self.decoder, self.per_call = decoder, []

    def __enter__(self):
        hook = lambda module, args: self.per_call.append(args[0].shape[0])  # noqa: E731
        self.handle = self.decoder.register_forward_pre_hook(hook)
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()


@pytest.mark.parametrize("arch", ["transformer", "bahdanau"])
@pytest.mark.parametrize("beam", [None, 3])
def test_finished_sentences_and_hypotheses_leave_the_batch(cases, arch, beam):
    """One batch of 13 sentences computes exactly the decoder rows of the 13 sentences
    decoded alone (one row per live hypothesis and step), far fewer than keeping every
    row until the last sentence ends."""
    data, sentences, models = cases
    model = models[arch]
    steps = 20  # room to finish: most sentences end well before the limit
    with _DecoderRows(model.decoder) as alone:
        for s in sentences:
            if beam is None:
                reference_greedy(model, data, s, steps)
            else:
                reference_beam(model, data, s, beam, steps, 0.6)
    with _DecoderRows(model.decoder) as batched:
        translate(model, data, sentences, beam=beam, max_len=steps, batch_size=64)
    rows = batched.per_call
    assert sum(rows) == sum(alone.per_call)  # the useful rows, and no other
    kept = len(sentences) * (beam or 1) * len(rows)  # every row until the last one ends
    assert sum(rows) < 0.85 * kept  # here 0.49-0.77 of it
    assert rows[0] == len(sentences)  # step 1: one row per sentence (beam 0 only)
    assert rows[-1] < max(rows)  # by the last step, finished sentences have left
