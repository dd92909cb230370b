"""Exercise 11.1.3 of d2l 1.0: a differentiable search engine. Documents are the keys
(and values), a query is embedded like them, and softmax attention over all documents is the
retrieval; trained end to end on a synthetic task where queries may use a synonym of a
document's word, which exact keyword matching cannot see.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["SoftSearch", "search_engine"]


class SoftSearch(nn.Module):
    """Bag-of-words encoders for queries and documents; scores qᵀd / √D, softmax over docs."""

    def __init__(self, vocab: int, dim: int = 32) -> None:
        super().__init__()
        self.query_words = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.doc_words = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.dim = dim

    def forward(self, queries: Tensor, docs: Tensor) -> Tensor:
        """queries (Q, Lq), docs (N, Ld) word ids -> scores (Q, N); softmax = attention."""
        q, d = self.query_words(queries), self.doc_words(docs)  # (Q, D), (N, D)
        return q @ d.T / math.sqrt(self.dim)


def _make_task(g: torch.Generator, words: int, docs: int, doc_len: int, per_doc: int, q_len: int):
    """Documents of distinct words in [0, words); word w's synonym is w + words. A query
    draws q_len of its document's words, each replaced by its synonym with probability 1/2."""
    doc_ids = torch.rand(docs, words, generator=g).argsort(1)[:, :doc_len]  # (N, Ld) distinct
    return doc_ids, *_queries(g, doc_ids, words, per_doc, q_len)


def _queries(g: torch.Generator, doc_ids: Tensor, words: int, per_doc: int, q_len: int):
    """per_doc queries for each document: (Q, q_len) word ids and (Q,) their documents."""
    docs, doc_len = doc_ids.shape
    target = torch.arange(docs).repeat_interleave(per_doc)  # (Q,)
    pick = torch.rand(len(target), doc_len, generator=g).argsort(1)[:, :q_len]  # distinct
    q = doc_ids[target[:, None], pick]  # (Q, q_len)
    q = torch.where(torch.rand(q.shape, generator=g) < 0.5, q + words, q)
    return q, target


@topic
def search_engine(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Top-1 accuracy on fresh queries: trained soft search, untrained, and keyword overlap."""
    check_args(small, seed)
    g = torch.Generator().manual_seed(seed)
    words, docs, doc_len, q_len = 150, (100 if small else 200), 8, 3
    steps = 100 if small else 200
    doc_ids, train_q, train_t = _make_task(g, words, docs, doc_len, 20, q_len)
    test_q, test_t = _queries(g, doc_ids, words, 5, q_len)  # fresh queries, the same docs
    torch.manual_seed(seed)
    model = SoftSearch(2 * words)

    def accuracy(q: Tensor, t: Tensor) -> float:
        with torch.no_grad():
            return float((model(q, doc_ids).argmax(1) == t).float().mean())

    untrained = accuracy(test_q, test_t)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(train_q, doc_ids), train_t)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # keyword search: the number of query words found verbatim in the document
    overlap = (test_q[:, :, None, None] == doc_ids[None, None]).any(-1).sum(1)  # (Q, N)
    best = overlap.max(1, keepdim=True).values
    # a tie among the best documents is broken by chance: expected accuracy 1 / (#ties)
    ties = (overlap == best).sum(1).float()
    hit = overlap[torch.arange(len(test_t)), test_t] == best[:, 0]
    keyword = float((hit.float() / ties).mean())
    values = {
        "data": f"synthetic: {docs} documents of {doc_len} words from {words}, each word with a synonym",
        "data_zh": f"合成数据：{docs} 个文档，每个由 {words} 个词中的 {doc_len} 个组成，每个词有一个同义词",
        "documents": docs,
        "test_queries": len(test_t),
        "chance": 1 / docs,
        "untrained_accuracy": untrained,
        "trained_accuracy": accuracy(test_q, test_t),
        "train_accuracy": accuracy(train_q, train_t),
        "keyword_accuracy": keyword,
        "loss_first_last": [losses[0], losses[-1]],
    }
    finding = (
        f"{docs} documents, {len(test_t)} fresh queries of {q_len} words (each a synonym with "
        f"chance 1/2): top-1 accuracy {values['trained_accuracy']:.2f} trained end to end "
        f"({steps} Adam steps), {untrained:.2f} untrained, {keyword:.2f} by keyword overlap, "
        f"{1 / docs:.3f} by chance."
    )
    return TopicResult("attention_search_search_engine", finding, values, {})
