"""``Translator``: one set of input limits, batch-invariant decoding, test-set scoring."""

from __future__ import annotations

import pytest
import torch

from attnkit.inference.translator import Evaluation, InputError, Translator
from attnkit.metrics import corpus_bleu, corpus_chrf
from attnkit.training.translation import teacher_forcing_loss


@pytest.fixture
def translator(tiny_data, tiny_model):
    return Translator(tiny_model("bahdanau", dropout=0.0), tiny_data)


@pytest.fixture(scope="module")
def trained(tiny_data):
    """A Bahdanau model trained for a couple of seconds: its translations are not noise."""
    from attnkit.models.registry import build_model

    torch.manual_seed(0)
    cfg = {"embed_size": 32, "num_hiddens": 32, "num_layers": 1, "dropout": 0.0}
    model = build_model("bahdanau", cfg, len(tiny_data.src_vocab), len(tiny_data.tgt_vocab))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    bos = tiny_data.tgt_vocab["<bos>"]
    for _ in range(12):
        for batch in tiny_data.batches("train", 1024, shuffle=True):
            src, src_len, tgt, tgt_len = batch.astuple()
            loss = teacher_forcing_loss(model, src, src_len, tgt, tgt_len, bos, "sum")
            opt.zero_grad()
            (loss / tgt_len.sum()).backward()
            opt.step()
    return Translator(model, tiny_data)


def _known(data, i: int = 0) -> str:
    return data.sources("train")[i]


def _error(translator, sentences, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        translator.check(sentences, **kwargs)
    return info.value


def test_check_accepts_known_sentences_and_returns_no_unknown_words(translator, tiny_data):
    assert translator.check([_known(tiny_data, 0), _known(tiny_data, 1)]) == []
    assert translator.max_tokens == tiny_data.max_len - 1


def test_check_empty_sentence(translator):
    e = _error(translator, ["   "])
    assert "cannot translate an empty sentence" in str(e) and e.field == "text"
    e = _error(translator, [""], field="text")
    assert str(e) == "text is empty: type an English sentence"


def test_check_too_many_tokens_uses_the_smaller_of_data_and_model_limits(tiny_data, tiny_model):
    translator = Translator(tiny_model(), tiny_data)
    e = _error(translator, ["a " * 40])
    assert "has 40 words + <eos>, more than max_len=12 of this model" in str(e)
    assert "a a a a" in str(e) and "a " * 40 not in str(e)  # cut short, not echoed whole
    small = Translator(tiny_model(), tiny_data, model_config={"max_len": 6})
    assert small.max_tokens == 5
    e = _error(small, ["a b c d e f"])
    assert "more than max_len=6 of this model" in str(e)
    e = _error(small, ["a b c d e f"], field="text")
    assert str(e) == (
        "text has 6 words (punctuation included), more than the limit of 5 for this model"
    )


def test_check_unknown_words(translator, tiny_data):
    sentence = f"{_known(tiny_data)} zyzzyva qux zyzzyva"
    e = _error(translator, [sentence])
    assert "zyzzyva, qux" in str(e) and "--allow-unknown" in str(e)
    assert f"{len(tiny_data.src_vocab)}-word English vocabulary" in str(e)
    assert translator.check([sentence], allow_unknown=True) == ["zyzzyva", "qux"]
    e = _error(translator, ["zyzzyva\u200b"], field="text")  # the explorer: no CLI hint
    assert "--allow-unknown" not in str(e) and "zyzzyva\\u200b" in str(e)
    assert "invisible or control characters" in str(e) and "ZERO WIDTH SPACE" in str(e)


def test_check_max_chars_only_when_given(translator, tiny_data):
    sentence = _known(tiny_data)
    assert translator.check([sentence]) == []
    e = _error(translator, [sentence], max_chars=3, field="text")
    assert str(e) == f"text has {len(sentence)} characters, more than the limit of 3"


def test_check_lone_surrogate(translator):
    e = _error(translator, ["ab\ud800c"], field="text")
    assert "not valid Unicode" in str(e) and "character 3 " in str(e)
    assert "lone surrogate (U+D800)" in str(e) and e.field == "text"


def test_check_names_the_input_line(translator, tiny_data):
    e = _error(translator, [_known(tiny_data), ""], where="--input f.txt", line_numbers=[2, 5])
    assert str(e).startswith("--input f.txt line 5: cannot translate an empty sentence")


def test_decode_steps_is_checked_against_the_model(tiny_data, tiny_model):
    assert Translator(tiny_model(), tiny_data).decode_steps() == tiny_data.max_len + 2
    small = Translator(tiny_model(), tiny_data, model_config={"max_len": 10})
    # --max-len N: at most N new tokens, <eos> included (transformers' max_new_tokens)
    assert small.decode_steps() == 9 and small.decode_steps(8) == 8 and small.decode_steps(9) == 9
    with pytest.raises(ValueError, match="max_len=10 positions, so --max-len can be at most 9"):
        small.decode_steps(10)


@pytest.mark.parametrize("beam", [None, 3])
def test_translate_keeps_input_order_and_does_not_depend_on_batching(trained, tiny_data, beam):
    sentences = tiny_data.sources("test")[:12]
    one = trained.translate(sentences, beam=beam, batch_size=1)
    many = trained.translate(sentences, beam=beam, batch_size=64)
    assert one == many and len(one) == len(sentences)
    alone = [trained.translate([s], beam=beam)[0] for s in sentences[:4]]
    assert alone == many[:4]
    for hyp in many:
        assert hyp.text == tiny_data.detokenize(hyp.ids)


def test_beam_one_is_greedy(trained, tiny_data):
    sentences = tiny_data.sources("test")[:8]
    assert trained.translate(sentences, beam=1) == trained.translate(sentences)


def test_translate_rejects_bad_arguments(translator, tiny_data):
    with pytest.raises(TypeError, match="list of str"):
        translator.translate(_known(tiny_data))
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        translator.translate([_known(tiny_data)], batch_size=0)
    with pytest.raises(TypeError, match=r"beam must be a positive int, got '3' \(str\)"):
        translator.translate([_known(tiny_data)], beam="3")
    with pytest.raises(ValueError, match="beam must be a positive int, got 0"):
        translator.translate([_known(tiny_data)], beam=0)
    with pytest.raises(ValueError, match="max_len must be a positive int, got 0"):
        translator.translate([_known(tiny_data)], max_len=0)
    with pytest.raises(ValueError, match="length_penalty must be a finite number >= 0"):
        translator.translate([_known(tiny_data)], beam=2, length_penalty=-0.5)


def test_evaluate_is_corpus_bleu_of_its_own_translations(trained, tiny_data):
    ev = trained.evaluate("test")
    assert isinstance(ev, Evaluation) and ev.split == "test"
    assert ev.sources == tiny_data.sources("test") and ev.refs == tiny_data.references("test")
    assert ev.hyps == [h.text for h in trained.translate(ev.sources)]
    assert ev.bleu == pytest.approx(corpus_bleu(ev.hyps, ev.refs, tiny_data.bleu_tokenize))
    assert ev.chrf == pytest.approx(corpus_chrf(ev.hyps, ev.refs))
    assert ev.bleu > 0 and "tok:none" in ev.signature
    limited = trained.evaluate("test", limit=5)
    assert limited.hyps == ev.hyps[:5]
    with pytest.raises(ValueError, match="limit must be a positive int, got 0"):
        trained.evaluate("test", limit=0)
    with pytest.raises(ValueError, match="split must be one of 'train', 'val', 'test'"):
        trained.evaluate("dev")
    beam = trained.evaluate("test", beam=3, length_penalty=0.0)
    assert beam.hyps == [h.text for h in trained.translate(ev.sources, beam=3, length_penalty=0.0)]
    assert beam.bleu == pytest.approx(corpus_bleu(beam.hyps, ev.refs, tiny_data.bleu_tokenize))
    assert trained.evaluate("test", beam=1).hyps == ev.hyps  # a beam of one is greedy


def test_maps_of_a_word_model_are_unchanged_by_merge_pieces(trained, tiny_data):
    sentence = tiny_data.sources("test")[0]
    [hyp] = trained.translate([sentence])
    maps = trained.maps(sentence, hyp.ids, hyp.finished)
    assert maps.translation == hyp.text
    assert (maps.outputs[-1] == "<eos>") == hyp.finished
    merged = trained.maps(sentence, hyp.ids, hyp.finished, merge_pieces=True)
    assert merged.source == maps.source and merged.outputs == maps.outputs
    torch.testing.assert_close(merged.cross, maps.cross)
    greedy = trained.maps(sentence)  # no ids: decoded greedily, the same translation
    assert greedy.translation == hyp.text


def test_constructor_names_what_it_got(tiny_data, tiny_model):
    with pytest.raises(TypeError, match="model must be an attnkit EncoderDecoder, got Linear"):
        Translator(torch.nn.Linear(2, 2), tiny_data)
    with pytest.raises(
        TypeError, match=r"data must be a TranslationData, got dict \(no encode_source"
    ):
        Translator(tiny_model(), {})
