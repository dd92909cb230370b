"""Experiments for d2l 0.17 sections 8.1-8.3 (sequence models, text preprocessing,
language models and their data; 1.0 chapter 9.1-9.3): lags, offsets, corpora, token
counts, tokenizers, padding and sampling of subsequences."""
