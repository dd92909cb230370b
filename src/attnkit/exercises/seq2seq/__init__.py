"""Experiments for d2l 0.17 sections 9.5-9.8 (machine translation data, encoder-decoder,
seq2seq, beam search; 1.0 sections 10.5-10.8): vocabularies, the seq2seq variants they
share (``common``, ``variants``), the bridge between encoder and decoder, search."""
