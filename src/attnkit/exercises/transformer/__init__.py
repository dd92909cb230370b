"""Experiments for d2l 0.17 sections 10.5-10.7 (multi-head attention, self-attention and
positional encoding, the Transformer; 1.0 sections 11.5-11.9): positions, costs, the
Transformer language model and the vision Transformer."""
