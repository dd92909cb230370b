"""Experiments for d2l 0.17 sections 8.4-8.7 (RNNs from scratch and concise,
backpropagation through time; 1.0 sections 9.4-9.7): the character language model they
share (``lm``), one-hot inputs, memory, clipping, detaching, sampling, tuning."""
