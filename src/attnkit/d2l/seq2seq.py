"""Chapter 9 of the book (d2l 0.17) and the seq2seq parts of chapter 10.

The book's names over :mod:`attnkit.data.translation`, :mod:`attnkit.models.seq2seq`,
:mod:`attnkit.training.losses`, :mod:`attnkit.inference.decoding` and :mod:`attnkit.metrics` (same
signatures, state_dict keys and printed line). Differences from the book: the encoder
packs padded sources when given valid lengths; Seq2SeqDecoder keeps the encoder context in
its state; bleu returns 0.0 where the book divides by zero. Files are read as UTF-8 (the zh
book; en 0.17.6 depends on the locale). ``train_seq2seq`` is in :mod:`attnkit.d2l.training`.
"""

from __future__ import annotations

import os

import torch

from attnkit import metrics as _metrics
from attnkit.d2l.utils import book_data_dir
from attnkit.data import translation as _nmt
from attnkit.data.text import Vocab as _Vocab
from attnkit.inference import decoding as _decoding
from attnkit.models import seq2seq as _s2s
from attnkit.training import losses as _losses

preprocess_nmt = _nmt.preprocess_nmt
tokenize_nmt = _nmt.tokenize_nmt
truncate_pad = _nmt.truncate_pad
build_array_nmt = _nmt.build_array_nmt


def read_data_nmt() -> str:
    """``fra.txt`` as one string.

    From ``$ATTNKIT_FRA`` if set; else ``../data/fra-eng/fra.txt`` (the folder the book's
    ``download_extract('fra-eng')`` leaves, relative to the working directory), read as is:
    only the zip has a registered sha1, so an extracted file cannot be checked; else a
    verified ``../data/fra-eng.zip`` or ``DATA_HUB['fra-eng']`` from attnkit's cache,
    downloading into it (``DatasetUnavailableError`` naming the places looked at offline).
    """
    path = os.environ.get("ATTNKIT_FRA")
    return _nmt.read_fra(path if path else _nmt.download_fra(search=(book_data_dir(),)))


def load_array(data_arrays, batch_size, is_train=True):
    """A ``DataLoader`` over ``TensorDataset(*data_arrays)``, shuffled when ``is_train``."""
    dataset = torch.utils.data.TensorDataset(*data_arrays)
    return torch.utils.data.DataLoader(dataset, batch_size, shuffle=is_train)


def load_data_nmt(batch_size, num_steps, num_examples=600):
    """``(data_iter, src_vocab, tgt_vocab)``; batches are ``(X, X_valid_len, Y, Y_valid_len)``.

    As the book: ``num_examples + 1`` pairs (its off-by-one), ``min_freq=2``, vocabularies
    over all pairs, ``<eos>`` appended before truncation to ``num_steps``.
    """
    raw = read_data_nmt()
    if num_examples:  # only lines 0..num_examples are read: preprocess just those (same result)
        raw = "\n".join(raw.split("\n", num_examples + 1)[: num_examples + 1])
    source, target = tokenize_nmt(preprocess_nmt(raw), num_examples)
    reserved = ["<pad>", "<bos>", "<eos>"]
    src_vocab = _Vocab(source, min_freq=2, reserved_tokens=reserved)
    tgt_vocab = _Vocab(target, min_freq=2, reserved_tokens=reserved)
    src_array, src_valid_len = build_array_nmt(source, src_vocab, num_steps)
    tgt_array, tgt_valid_len = build_array_nmt(target, tgt_vocab, num_steps)
    data_arrays = (src_array, src_valid_len, tgt_array, tgt_valid_len)
    data_iter = load_array(data_arrays, batch_size)
    return data_iter, src_vocab, tgt_vocab


Encoder = _s2s.Encoder
Decoder = _s2s.Decoder
AttentionDecoder = _s2s.AttentionDecoder
EncoderDecoder = _s2s.EncoderDecoder
Seq2SeqEncoder = _s2s.Seq2SeqEncoder
Seq2SeqDecoder = _s2s.Seq2SeqDecoder
Seq2SeqAttentionDecoder = _s2s.Seq2SeqAttentionDecoder
MaskedSoftmaxCELoss = _losses.MaskedSoftmaxCELoss
bleu = _metrics.bleu


def predict_seq2seq(
    net, src_sentence, src_vocab, tgt_vocab, num_steps, device, save_attention_weights=False
):
    """Greedy translation of one sentence; returns ``(translation, attention_weight_seq)``.

    As the book: ``src_sentence.lower().split(' ')`` + ``<eos>``, padded to ``num_steps``;
    ``attention_weight_seq`` holds ``net.decoder.attention_weights`` after every step.
    """
    net.eval()
    src_tokens = src_vocab[src_sentence.lower().split(" ")] + [src_vocab["<eos>"]]
    enc_valid_len = torch.tensor([len(src_tokens)], device=device)
    src_tokens = truncate_pad(src_tokens, num_steps, src_vocab["<pad>"])
    enc_X = torch.tensor([src_tokens], dtype=torch.long, device=device)
    attention_weight_seq = []
    result = _decoding.greedy_decode(
        net,
        enc_X,
        enc_valid_len,
        bos_id=tgt_vocab["<bos>"],
        eos_id=tgt_vocab["<eos>"],
        max_len=num_steps,
        on_step=(lambda dec: attention_weight_seq.append(dec.attention_weights))
        if save_attention_weights
        else None,
    )
    return " ".join(tgt_vocab.to_tokens(result.tokens[0])), attention_weight_seq
