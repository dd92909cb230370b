"""Mutations of the exercises of d2l 0.17 sections 10.1-10.4 and 1.0's 11.1-11.3:
(exercise ID, module under src/attnkit, line before, line after, the change in words,
the test that must fail, a -k expression over tests/exercises)."""

MUTATIONS = [
    ("10.1.2", "exercises/attention_cues.py",
     "weights = torch.softmax(scores, dim=-1)  # each row over the keys",
     "weights = torch.softmax(scores, dim=0)  # each row over the keys",
     "the softmax runs down the columns instead of along the rows",
     "test_10_1_2_random_softmax_rows_are_distributions"),
]  # fmt: skip
