"""Translation metrics: the book's sentence BLEU, sacrebleu corpus BLEU and chrF, perplexity.

Tokenization: word-level sentences are already tokenized by the data preprocessing
(lower-cased, a space before ``, . ! ?``, words split on spaces, as the book), so
``corpus_bleu`` scores exactly those tokens with sacrebleu's ``tokenize="none"`` by default.
Subword translators produce real (detokenized) text: they are scored with
``tokenize="13a"``, sacreBLEU's standard, comparable with published scores
(``bleu_signature`` gives the line to print beside them). Scores are on a 0-100 scale.
chrF works on characters and ignores whitespace either way.
"""

from __future__ import annotations

import collections
import functools
import math
from collections.abc import Sequence

from attnkit._validate import one_of, positive_int
from attnkit.i18n import _

__all__ = [
    "bleu",
    "bleu_from_stats",
    "bleu_signature",
    "bleu_stats",
    "corpus_bleu",
    "corpus_chrf",
    "perplexity",
]

BLEU_TOKENIZERS = ("none", "13a")


def bleu(pred_seq: str, label_seq: str, k: int) -> float:
    """The book's sentence BLEU in [0, 1]: brevity penalty times clipped n-gram precisions.

    ``exp(min(0, 1 - len_label / len_pred)) * prod_{n=1..k} p_n ** (1 / 2**n)``.

    Difference from the book: when the prediction is shorter than some n <= k (the
    empty prediction included), the book divides by zero; this returns 0.0 instead.
    """
    if not isinstance(pred_seq, str) or not isinstance(label_seq, str):
        message = _("pred_seq and label_seq must be str, got {pred_type} and {label_type}")
        raise TypeError(
            message.format(pred_type=type(pred_seq).__name__, label_type=type(label_seq).__name__)
        )
    positive_int("k", k)
    pred_tokens, label_tokens = pred_seq.split(" "), label_seq.split(" ")
    if pred_seq == "":
        pred_tokens = []
    len_pred, len_label = len(pred_tokens), len(label_tokens)
    if len_pred < k:
        return 0.0
    score = math.exp(min(0, 1 - len_label / len_pred))
    for n in range(1, k + 1):
        num_matches = 0
        label_subs = collections.Counter(
            " ".join(label_tokens[i : i + n]) for i in range(len_label - n + 1)
        )
        for i in range(len_pred - n + 1):
            gram = " ".join(pred_tokens[i : i + n])
            if label_subs[gram] > 0:
                num_matches += 1
                label_subs[gram] -= 1
        score *= math.pow(num_matches / (len_pred - n + 1), math.pow(0.5, n))
    return score


def _check_corpus(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if isinstance(hyps, str) or isinstance(refs, str):
        raise TypeError(_("hyps and refs must be sequences of sentences, not a single str"))
    if len(hyps) != len(refs):
        message = _("hyps and refs must have the same length, got {hyps} and {refs}")
        raise ValueError(message.format(hyps=len(hyps), refs=len(refs)))


@functools.cache
def _sacrebleu():
    """sacrebleu's BLEU and CHRF classes (imported on first use, so ``import attnkit``
    stays light)."""
    from sacrebleu.metrics import BLEU, CHRF

    return BLEU, CHRF


@functools.cache
def _bleu_scorer(tokenize: str):
    one_of("tokenize", tokenize, BLEU_TOKENIZERS)
    # force: with "none" the text is tokenized on purpose (no warning about it)
    return _sacrebleu()[0](tokenize=tokenize, force=tokenize == "none")


def bleu_signature(tokenize: str = "13a") -> str:
    """sacreBLEU's signature of our corpus BLEU (one reference, exponential smoothing),
    e.g. ``nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.5.1``."""
    _bleu_scorer(tokenize)  # checks the name
    scorer = _sacrebleu()[0](tokenize=tokenize, force=tokenize == "none")
    scorer.corpus_score(["a"], [["a"]])  # the signature counts the references it saw
    return str(scorer.get_signature())


def bleu_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "none") -> list[int]:
    """Sufficient statistics of corpus BLEU: 4 matches, 4 totals, hyp length, ref length.

    They add up over shards, so distributed workers sum them (all-reduce) and then
    call ``bleu_from_stats``. ``tokenize``: "none" (already tokenized text) or "13a".
    """
    _check_corpus(hyps, refs)
    scorer = _bleu_scorer(tokenize)
    if not hyps:
        return [0] * 10
    s = scorer.corpus_score(list(hyps), [list(refs)])
    return [*s.counts, *s.totals, s.sys_len, s.ref_len]


def bleu_from_stats(stats: Sequence[int | float]) -> float:
    """Corpus BLEU (0-100, sacrebleu's default exponential smoothing) from ``bleu_stats``."""
    if len(stats) != 10:
        message = _("stats must have 10 numbers (see bleu_stats), got {count}")
        raise ValueError(message.format(count=len(stats)))
    s = [int(x) for x in stats]
    if s[8] == 0:
        return 0.0
    bleu = _sacrebleu()[0]
    return float(bleu.compute_bleu(s[0:4], s[4:8], s[8], s[9], smooth_method="exp").score)


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "none") -> float:
    """sacrebleu corpus BLEU (0-100), one reference each: of space-tokenized sentences
    (``tokenize="none"``) or of detokenized text (``"13a"``)."""
    return bleu_from_stats(bleu_stats(hyps, refs, tokenize))


def corpus_chrf(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """sacrebleu corpus chrF (0-100), one reference each."""
    _check_corpus(hyps, refs)
    if not hyps:
        return 0.0
    return float(_sacrebleu()[1]().corpus_score(list(hyps), [list(refs)]).score)


def perplexity(nll: float, num_tokens: float | None = None) -> float:
    """exp of the mean negative log-likelihood per token (nats): 1 is perfect, V a uniform
    guess over V tokens. ``nll`` is that mean, or with ``num_tokens`` a total over them."""
    if num_tokens is not None:
        if not num_tokens > 0:
            message = _("num_tokens must be positive, got {num_tokens}")
            raise ValueError(message.format(num_tokens=num_tokens))
        nll = float(nll) / float(num_tokens)
    mean_nll = float(nll)
    if math.isnan(mean_nll) or mean_nll < 0:
        message = _("mean_nll must be a non-negative number, got {mean_nll}")
        raise ValueError(message.format(mean_nll=mean_nll))
    return math.exp(min(mean_nll, 700.0))
