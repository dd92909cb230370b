"""Experiments for d2l 0.17 sections 9.1-9.4 (GRU, LSTM, deep and bidirectional RNNs;
1.0 chapter 10.1-10.4): the gated cells, their language models and data, sine
extrapolation, bidirectional lookahead."""
