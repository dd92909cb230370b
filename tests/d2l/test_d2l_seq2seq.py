"""The book's chapter 9-10 seq2seq code, run unchanged against ``attnkit.d2l``."""

from __future__ import annotations

import re

import torch

from attnkit import d2l
from attnkit.inference.decoding import translate


def test_book_printed_checks():
    loss = d2l.MaskedSoftmaxCELoss()
    out = loss(torch.ones(3, 4, 10), torch.ones((3, 4), dtype=torch.long), torch.tensor([4, 2, 0]))
    assert [round(x, 4) for x in out.tolist()] == [2.3026, 1.1513, 0.0]

    encoder = d2l.Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)
    encoder.eval()
    X = torch.zeros((4, 7), dtype=torch.long)
    output, state = encoder(X)
    assert (output.shape, state.shape) == ((7, 4, 16), (2, 4, 16))

    decoder = d2l.Seq2SeqDecoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)
    decoder.eval()
    state = decoder.init_state(encoder(X))
    output, state = decoder(X, state)
    assert (output.shape, state.shape) == ((4, 7, 10), (2, 4, 16))

    decoder = d2l.Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)
    decoder.eval()
    state = decoder.init_state(encoder(X), None)
    output, state = decoder(X, state)
    got = (output.shape, len(state), state[0].shape, len(state[1]), state[1][0].shape)
    assert got == ((4, 7, 10), 3, (4, 7, 16), 2, (4, 16))
    assert issubclass(d2l.Seq2SeqAttentionDecoder, d2l.AttentionDecoder)
    assert issubclass(d2l.AttentionDecoder, d2l.Decoder)
    assert round(d2l.bleu("il est riche .", "il est calme .", k=2), 3) == 0.658


def _book_data_iter(data, num_steps=10, batch_size=64):
    """(X, X_valid_len, Y, Y_valid_len) batches as the book's load_data_nmt builds them."""

    def build(lines, vocab):
        rows = [vocab[line] + [vocab["<eos>"]] for line in lines]
        rows = [(r + [vocab["<pad>"]] * num_steps)[:num_steps] for r in rows]
        array = torch.tensor(rows)
        return array, (array != vocab["<pad>"]).type(torch.int32).sum(1)

    src, src_len = build([s for s, _ in data.train], data.src_vocab)
    tgt, tgt_len = build([t for _, t in data.train], data.tgt_vocab)
    dataset = torch.utils.data.TensorDataset(src, src_len, tgt, tgt_len)
    return torch.utils.data.DataLoader(dataset, batch_size, shuffle=True)


def test_book_training_and_prediction_code_runs_unchanged(tiny_data, capsys):
    embed_size, num_hiddens, num_layers, dropout = 16, 16, 2, 0.1
    lr, num_epochs, device = 0.005, 3, d2l.try_gpu()
    train_iter = _book_data_iter(tiny_data)
    src_vocab, tgt_vocab = tiny_data.src_vocab, tiny_data.tgt_vocab
    encoder = d2l.Seq2SeqEncoder(len(src_vocab), embed_size, num_hiddens, num_layers, dropout)
    decoder = d2l.Seq2SeqAttentionDecoder(
        len(tgt_vocab), embed_size, num_hiddens, num_layers, dropout
    )
    net = d2l.EncoderDecoder(encoder, decoder)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    d2l.train_seq2seq(net, train_iter, lr, num_epochs, tgt_vocab, device)
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(r"loss \d+\.\d{3}, \d+\.\d tokens/sec on cpu", line), line
    assert not torch.equal(before["decoder.dense.weight"], net.state_dict()["decoder.dense.weight"])

    engs = ["they are sad .", "we wash the pen .", "the girl is good ."]
    num_steps = 10
    for eng in engs:
        translation, dec_attention_weight_seq = d2l.predict_seq2seq(
            net, eng, src_vocab, tgt_vocab, num_steps, device, True
        )
        # the chapter's reshaping of the recorded weights
        attention_weights = torch.cat(
            [step[0][0][0] for step in dec_attention_weight_seq], 0
        ).reshape((1, 1, -1, num_steps))
        steps = len(dec_attention_weight_seq)
        assert attention_weights.shape == (1, 1, steps, num_steps)
        n_src = len(eng.split()) + 1
        torch.testing.assert_close(attention_weights[0, 0, :, :n_src].sum(-1), torch.ones(steps))
        assert attention_weights[0, 0, :, n_src:].abs().max() == 0
        # the same translation as the batched decoder
        assert translation == translate(net, tiny_data, [eng], max_len=num_steps)[0].text
        assert isinstance(d2l.bleu(translation, "ils sont tristes .", k=2), float)


def test_plain_seq2seq_decoder_accepts_the_books_bare_state():
    torch.manual_seed(0)
    encoder = d2l.Seq2SeqEncoder(10, 8, 16, 2).eval()
    decoder = d2l.Seq2SeqDecoder(10, 8, 16, 2).eval()
    X = torch.randint(0, 10, (2, 5))
    _, enc_state = encoder(X)
    a, _ = decoder(X, enc_state)  # a bare (L, B, H) tensor, as chapter code may pass
    b, _ = decoder(X, decoder.init_state(encoder(X)))
    torch.testing.assert_close(a, b)
