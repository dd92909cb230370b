"""Experiments for d2l 0.17 sections 10.1-10.4 (attention cues, pooling, scoring
functions, Bahdanau attention; 1.0 chapter 11.1-11.4): pooling design, identities,
widths, distance, search and cost."""
