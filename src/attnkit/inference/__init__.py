"""Inference: decoding (greedy, beam search), attention maps, and the one translator
service (``Translator``) behind ``translate run``/``eval``, the explorer and the demo.

    from attnkit.inference.translator import Translator
    tr = Translator.load("runs/bahdanau")
    tr.check(["i lost ."])                # unknown words, or an InputError
    [hyp] = tr.translate(["i lost ."], beam=4)
"""

from attnkit.inference.translator import Evaluation, Hypothesis, InputError, Translator

__all__ = ["Evaluation", "Hypothesis", "InputError", "Translator"]
