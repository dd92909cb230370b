"""Machine translation and sequence to sequence learning of d2l 1.0 (chapter 10).

``MTFraEng`` (the English-French data with 1.0's splits and alphabetical vocabularies),
the ``Encoder``/``Decoder`` interfaces (the core's, :mod:`attnkit.models.seq2seq`),
``EncoderDecoder`` (``predict_step`` is the core's greedy decoding,
:func:`attnkit.inference.decoding.greedy_decode`, with the decoder's attention weights per
step on request), ``init_seq2seq``, ``Seq2SeqEncoder``, ``Seq2Seq``, ``bleu``, and the
notebook's ``Seq2SeqDecoder``.

Batches are ``(src (B, num_steps), tgt_in (B, num_steps), src_valid_len (B,),
tgt_out (B, num_steps))``, ``tgt_in`` starting with ``<bos>``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from attnkit._validate import non_negative_int, positive_int
from attnkit.d2l.utils import show_list_len_pair_hist as _show_list_len_pair_hist
from attnkit.d2l.v1.base import Classifier, DataModule
from attnkit.d2l.v1.rnn import GRU
from attnkit.d2l.v1.text import Vocab, check_split_sizes
from attnkit.data import hub as _hub
from attnkit.data import translation as _nmt
from attnkit.i18n import _
from attnkit.inference.decoding import greedy_decode
from attnkit.metrics import bleu as _bleu
from attnkit.models.seq2seq import Decoder, Encoder, xavier_init_weights
from attnkit.training.optim import learning_rate

__all__ = [
    "Decoder", "Encoder", "EncoderDecoder", "MTFraEng", "Seq2Seq", "Seq2SeqDecoder",
    "Seq2SeqEncoder", "bleu", "fra_path", "init_seq2seq", "show_list_len_pair_hist",
]  # fmt: skip


def fra_path(root) -> Path:
    """``$ATTNKIT_FRA``; else ``root/fra-eng/fra.txt`` (what the book extracts); else
    ``root/fra.txt``; else a verified ``root/fra-eng.zip`` (extracted next to it), the cache
    or a download. Offline: ``DatasetUnavailableError`` naming every place looked at."""
    env = os.environ.get("ATTNKIT_FRA")
    if env:
        if not Path(env).is_file():
            raise FileNotFoundError(_("ATTNKIT_FRA={env!r} is not a file").format(env=env))
        return Path(env)
    if (Path(root) / "fra-eng" / "fra.txt").is_file():
        return Path(root) / "fra-eng" / "fra.txt"
    if (Path(root) / "fra.txt").is_file():
        return Path(root) / "fra.txt"
    try:
        return _nmt.download_fra(search=(root,))
    except _hub.DatasetUnavailableError as e:
        message = _("{error} MTFraEng also reads {extracted} or {flat} (root={root!r}).")
        extracted, flat = Path(root) / "fra-eng" / "fra.txt", Path(root) / "fra.txt"
        raise _hub.DatasetUnavailableError(
            message.format(error=e, extracted=extracted, flat=flat, root=str(root))
        ) from e


class MTFraEng(DataModule):
    """``MTFraEng(batch_size, num_steps=9, num_train=512, num_val=128)``.

    ``arrays``: ``(src, tgt[:, :-1], src_valid_len, tgt[:, 1:])`` over the first
    ``num_train + num_val`` lines (one more, the book's off-by-one); ``src_vocab``,
    ``tgt_vocab``: alphabetical, ``min_freq=2``, over every line read. The first
    ``num_train`` rows train; the rest validate.
    """

    def __init__(self, batch_size, num_steps=9, num_train=512, num_val=128, *, root="../data"):
        super().__init__(root=root)
        check_split_sizes(batch_size, num_steps, num_train, num_val)
        self.batch_size, self.num_steps = batch_size, num_steps
        self.num_train, self.num_val = num_train, num_val
        self.arrays, self.src_vocab, self.tgt_vocab = self._build_arrays(self._download())
        rows = len(self.arrays[0])
        if rows < num_train + num_val:
            message = _(
                "num_train + num_val = {num_train} + {num_val} = {total} sentence pairs "
                "asked for, but the data has {rows} usable pairs"
            )
            total = num_train + num_val
            raise ValueError(
                message.format(num_train=num_train, num_val=num_val, total=total, rows=rows)
            )

    def _download(self):
        path = fra_path(self.root)
        text = _nmt.read_fra(path)
        if not text.strip():
            raise ValueError(_("the fra-eng data file {path!r} is empty").format(path=str(path)))
        return text

    def _preprocess(self, text):
        """NBSPs to spaces, lower case, a space before ``,.!?`` following a non-space."""
        return _nmt.preprocess_nmt(text)

    def _tokenize(self, text, max_examples=None):
        """(src, tgt) token lists, each ending with ``<eos>``; lines 0..max_examples
        (0.17's ``tokenize_nmt`` with 1.0's changes: empty tokens dropped, ``<eos>`` added)."""
        pairs = _nmt.tokenize_nmt(text, max_examples)
        return tuple([[t for t in tokens if t] + ["<eos>"] for tokens in side] for side in pairs)

    def _build_arrays(self, raw_text, src_vocab=None, tgt_vocab=None):
        def _build_array(sentences, vocab, is_tgt=False):
            t = self.num_steps
            sentences = [s[:t] if len(s) > t else s + ["<pad>"] * (t - len(s)) for s in sentences]
            if is_tgt:
                sentences = [["<bos>", *s] for s in sentences]
            if vocab is None:
                vocab = Vocab(sentences, min_freq=2)
            width = t + 1 if is_tgt else t
            array = torch.tensor([vocab[s] for s in sentences], dtype=torch.long)
            array = array.reshape(len(sentences), width)
            valid_len = (array != vocab["<pad>"]).type(torch.int32).sum(1)
            return array, vocab, valid_len

        src, tgt = self._tokenize(self._preprocess(raw_text), self.num_train + self.num_val)
        src_array, src_vocab, src_valid_len = _build_array(src, src_vocab)
        tgt_array, tgt_vocab, _ = _build_array(tgt, tgt_vocab, True)
        arrays = (src_array, tgt_array[:, :-1], src_valid_len, tgt_array[:, 1:])
        return arrays, src_vocab, tgt_vocab

    def get_dataloader(self, train):
        idx = slice(0, self.num_train) if train else slice(self.num_train, None)
        return self.get_tensorloader(self.arrays, train, idx)

    def build(self, src_sentences, tgt_sentences):
        """Arrays for new sentence pairs, with this dataset's vocabularies."""
        for name, s in (("src_sentences", src_sentences), ("tgt_sentences", tgt_sentences)):
            if isinstance(s, str) or not all(isinstance(x, str) for x in s):
                message = _("{name} must be a list of str, got {value!r}")
                raise TypeError(message.format(name=name, value=s))
        if len(src_sentences) != len(tgt_sentences):
            message = _(
                "src_sentences and tgt_sentences must have the same length, got {n_src} and {n_tgt}"
            )
            raise ValueError(message.format(n_src=len(src_sentences), n_tgt=len(tgt_sentences)))
        raw_text = "\n".join([src + "\t" + tgt for src, tgt in zip(src_sentences, tgt_sentences)])
        return self._build_arrays(raw_text, self.src_vocab, self.tgt_vocab)[0]


def show_list_len_pair_hist(legend, xlabel, ylabel, xlist, ylist):
    """The histogram of list lengths (second set hatched); returns ``plt.hist``'s result."""
    return _show_list_len_pair_hist(legend, xlabel, ylabel, xlist, ylist)


# greedy_decode's end token for predict_step: an id no vocabulary reaches, so no row stops
# before num_steps (the book decodes num_steps tokens, <eos> or not)
_NO_TOKEN = torch.iinfo(torch.int64).max


def _check_ids(name, X):
    """Token ids: TypeError for anything but an integer tensor, ValueError unless 2-D."""
    if not isinstance(X, torch.Tensor):
        message = _("{name} must be an integer tensor (batch_size, num_steps), got {type}")
        raise TypeError(message.format(name=name, type=type(X).__name__))
    if X.is_floating_point() or X.is_complex() or X.dtype == torch.bool:
        message = _("{name} must be an integer tensor (batch_size, num_steps), got {dtype}")
        raise TypeError(message.format(name=name, dtype=X.dtype))
    if X.dim() != 2:
        message = _("{name} must be an integer tensor (batch_size, num_steps), got shape {shape}")
        raise ValueError(message.format(name=name, shape=tuple(X.shape)))


class EncoderDecoder(Classifier):
    """``forward(enc_X, dec_X, *args)`` -> the decoder's output (B, T, vocab)."""

    def __init__(self, encoder, decoder):
        super().__init__()
        if not isinstance(encoder, nn.Module) or not isinstance(decoder, nn.Module):
            message = _("encoder and decoder must be nn.Modules, got {encoder} and {decoder}")
            raise TypeError(
                message.format(encoder=type(encoder).__name__, decoder=type(decoder).__name__)
            )
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X, dec_X, *args):
        enc_X = self._trim_source(enc_X, args)
        enc_all_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_all_outputs, *args)
        return self.decoder(dec_X, dec_state)[0]

    def _trim_source(self, enc_X, args):
        """enc_X (B, T) -> (B, max valid length) in training mode, when nothing can see the
        trailing padding (in eval mode the encoder's ``attention_weights`` keep the book's
        (B*H, T, T) shape for its pictures).

        Only for an encoder and a decoder whose ``forward`` mask the source's padding
        (attnkit's ``TransformerEncoder`` and ``TransformerDecoder``, not overridden): the
        decoder's output is then the same (padded keys get exactly zero weight) and the
        all-padding columns cost nothing. Any other pair sees the batch as it is.
        """
        enc, dec = self.encoder, self.decoder
        if not (
            self.training
            and args
            and isinstance(args[0], torch.Tensor)
            and args[0].dim() == 1
            and isinstance(enc_X, torch.Tensor)
            and enc_X.dim() == 2
            and type(enc).forward is getattr(type(enc), "_pad_safe_forward", None)
            and type(dec).forward is getattr(type(dec), "_pad_safe_forward", None)
        ):
            return enc_X
        longest = int(args[0].max()) if args[0].numel() else 0
        return enc_X[:, :longest] if 0 < longest < enc_X.shape[1] else enc_X

    def predict_step(self, batch, device, num_steps, save_attention_weights=False):
        """Greedy decoding of ``num_steps`` tokens for the whole batch from ``tgt[:, 0]``.

        ``batch``: ``(src (B, T), tgt (B, T'), src_valid_len (B,), _)``; ``tgt[:, 0]`` is
        the start token (``<bos>``), the same in every row. Returns ``(ids (B, num_steps),
        attention_weights)``: one ``decoder.attention_weights`` per step when
        ``save_attention_weights``, else ``[]``. As the book, every row decodes
        ``num_steps`` tokens (``<eos>`` does not stop it); the core's ``greedy_decode``
        runs them, in eval mode and without gradients (the mode is restored after).
        """
        num_steps = positive_int("num_steps", num_steps)
        if len(batch) != 4:
            message = _("batch must be (src, tgt, src_valid_len, label), got {n} items")
            raise ValueError(message.format(n=len(batch)))
        batch = [torch.as_tensor(a).to(device) for a in batch]
        src, tgt, src_valid_len = batch[:3]
        _check_ids("src", src)
        _check_ids("tgt", tgt)
        if src_valid_len.shape != (src.shape[0],):
            message = _("src_valid_len must have shape (B,) = ({b},), got {shape}")
            raise ValueError(message.format(b=src.shape[0], shape=tuple(src_valid_len.shape)))
        start = tgt[:, 0]  # (B,)
        if start.numel() and bool((start != start[0]).any()):
            message = _("tgt[:, 0] must hold one start token (<bos>) for every row, got {starts}")
            raise ValueError(message.format(starts=start.tolist()))
        attention_weights = []
        keep = lambda decoder: attention_weights.append(decoder.attention_weights)  # noqa: E731
        result = greedy_decode(
            self, src.long(), src_valid_len, bos_id=int(start[0]) if start.numel() else 0,
            eos_id=_NO_TOKEN, max_len=int(num_steps),
            on_step=keep if save_attention_weights else None,
        )  # fmt: skip
        preds = torch.tensor(result.tokens, dtype=torch.long, device=src.device)
        return preds.reshape(src.shape[0], int(num_steps)), attention_weights


def init_seq2seq(module):
    """Xavier-uniform weights of ``nn.Linear`` and ``nn.GRU`` (exact types, as the book:
    a lazy layer not yet materialised is left as it is): the core's initialization."""
    xavier_init_weights(module)


class Seq2SeqEncoder(Encoder):
    """Embedding + ``d2l.GRU``; ``forward(X (B, T), *args)`` -> (outputs (T, B, H),
    state (L, B, H)). As the book, valid lengths are ignored (the GRU runs over padding)."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        positive_int("vocab_size", vocab_size)
        positive_int("embed_size", embed_size)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = GRU(embed_size, num_hiddens, num_layers, dropout)
        self.apply(init_seq2seq)

    def forward(self, X, *args):
        _check_ids("X", X)
        embs = self.embedding(X.t().type(torch.int64))  # (T, B, embed_size)
        outputs, state = self.rnn(embs)
        return outputs, state


class Seq2SeqDecoder(Decoder):
    """The notebook's GRU decoder: the encoder's last output as context at every step."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        positive_int("vocab_size", vocab_size)
        positive_int("embed_size", embed_size)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout)
        self.dense = nn.LazyLinear(vocab_size)
        self.apply(init_seq2seq)

    def init_state(self, enc_all_outputs, *args):
        return enc_all_outputs

    def forward(self, X, state):
        """X (B, T) ids; state (enc_outputs (T_src, B, H), hidden (L, B, H))."""
        _check_ids("X", X)
        embs = self.embedding(X.t().type(torch.int32))  # (T, B, E)
        enc_output, hidden_state = state
        context = enc_output[-1].repeat(embs.shape[0], 1, 1)  # (T, B, H)
        outputs, hidden_state = self.rnn(torch.cat((embs, context), -1), hidden_state)
        outputs = self.dense(outputs).swapaxes(0, 1)  # (B, T, vocab)
        return outputs, [enc_output, hidden_state]


class Seq2Seq(EncoderDecoder):
    """``Seq2Seq(encoder, decoder, tgt_pad, lr)``: Adam; the loss is ``Classifier.loss``
    (unmasked, as the package; the seq2seq notebook masks it with ``add_to_class``)."""

    def __init__(self, encoder, decoder, tgt_pad, lr):
        super().__init__(encoder, decoder)
        non_negative_int("tgt_pad", tgt_pad)  # a token id
        learning_rate("lr", lr)
        self.save_hyperparameters()

    def validation_step(self, batch):
        Y_hat = self(*batch[:-1])
        self.plot("loss", self.loss(Y_hat, batch[-1]), train=False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def bleu(pred_seq, label_seq, k):
    """The book's BLEU (1.0): n-grams up to ``min(k, len(pred))``; 0.0 for an empty prediction."""
    if not isinstance(pred_seq, str) or not isinstance(label_seq, str):
        message = _("pred_seq and label_seq must be str, got {pred} and {label}")
        raise TypeError(
            message.format(pred=type(pred_seq).__name__, label=type(label_seq).__name__)
        )
    k = positive_int("k", k)
    return _bleu(pred_seq, label_seq, min(k, len(pred_seq.split(" "))))
