"""Translation data: book preprocessing, reading, splits, bucketed batches, TranslationData."""

from __future__ import annotations

import functools
import json
import random
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.data import hub
from attnkit.data.text import Vocab
from attnkit.data.translation import (
    TranslationBatch,
    TranslationData,
    bucket_batches,
    build_array_nmt,
    load_translation_data,
    padding_efficiency,
    preprocess_nmt,
    read_fra,
    read_pairs,
    split_by_source,
    tokenize_nmt,
    truncate_pad,
)


@functools.cache
def generated() -> TranslationData:
    return load_translation_data(num_pairs=3000, seed=0)


def book_preprocess_nmt(text: str) -> str:
    """The book's code, verbatim in behaviour (reference for the regex version)."""

    def no_space(char, prev_char):
        return char in set(",.!?") and prev_char != " "

    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    out = [" " + c if i > 0 and no_space(c, text[i - 1]) else c for i, c in enumerate(text)]
    return "".join(out)


# ------------------------------------------------------------------ book preprocessing


def test_preprocess_nmt_examples():
    raw = "Go.\tVa !\nHi.\tSalut !\nRun!\tCours\u202f!\nWow!\tÇa alors\xa0!\nI'm OK.\tJ'ai 2,5 ans."
    assert preprocess_nmt(raw) == (
        "go .\tva !\nhi .\tsalut !\nrun !\tcours !\nwow !\tça alors !\ni'm ok .\tj'ai 2 ,5 ans ."
    )
    assert preprocess_nmt(".Go") == ".go"  # position 0 never gets a space
    assert preprocess_nmt("a!?") == "a ! ?"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="aZé ,.!?;:'\t\n\u202f\xa0", max_size=40))
def test_preprocess_nmt_equals_book_code(text):
    assert preprocess_nmt(text) == book_preprocess_nmt(text)


def test_tokenize_nmt_off_by_one_and_malformed_lines():
    text = "a .\tb .\nc\nd .\te .\tf\ng h\ti\nj\tk\nl\tm\n"
    src, tgt = tokenize_nmt(text)
    assert src == [["a", "."], ["g", "h"], ["j"], ["l"]]
    assert tgt == [["b", "."], ["i"], ["k"], ["m"]]
    # break when i > num_examples: lines 0..3 are read (4 lines), two of them malformed
    src, _ = tokenize_nmt(text, num_examples=3)
    assert src == [["a", "."], ["g", "h"]]
    src, _ = tokenize_nmt(text, num_examples=4)
    assert len(src) == 3


def test_truncate_pad_and_build_array_nmt():
    assert truncate_pad([47, 4], 5, 1) == [47, 4, 1, 1, 1]
    assert truncate_pad([1, 2, 3, 4], 2, 0) == [1, 2]
    with pytest.raises(ValueError, match="num_steps must be a positive int, got 0"):
        truncate_pad([1], 0, 0)
    with pytest.raises(TypeError, match=r"num_steps must be a positive int, got 2\.0 \(float\)"):
        truncate_pad([1], 2.0, 0)
    vocab = Vocab([["a", "b", "a", "b", "c", "c"]], reserved_tokens=["<pad>", "<bos>", "<eos>"])
    a, b, c = vocab["a"], vocab["b"], vocab["c"]
    X, valid = build_array_nmt([["a"], ["a", "b", "c"], ["zz"]], vocab, 3)
    # <eos>=3 appended before truncation: the 3-token line loses it
    assert X.tolist() == [[a, 3, 1], [a, b, c], [0, 3, 1]]
    assert valid.tolist() == [2, 3, 2]
    assert X.dtype == torch.long
    assert valid.dtype == (X != 1).type(torch.int32).sum(1).dtype  # the book's expression
    X, valid = build_array_nmt([], vocab, 4)
    assert X.shape == (0, 4) and valid.shape == (0,)


# ------------------------------------------------------------------ reading files


def test_read_fra_is_utf8(tmp_path):
    path = tmp_path / "fra.txt"
    path.write_bytes("Hi.\tÇa va\u202f?\n".encode())
    assert read_fra(path) == "Hi.\tÇa va\u202f?\n"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_fra(tmp_path / "missing.txt")


def test_read_pairs_skips_and_reports_malformed_lines():
    text = "Go.\tVa !\nno tab here\n\nHi.\tSalut !\n\tempty source\nA\tB\tC\nOK.\t  \nYes.\tOui.\n"
    with pytest.warns(UserWarning, match=r"skipped 4 malformed line\(s\).*line\(s\) 2, 5, 6, 7"):
        pairs, report = read_pairs(text, source="f.txt")
    assert pairs == [(["go", "."], ["va", "!"]), (["hi", "."], ["salut", "!"]),
                     (["yes", "."], ["oui", "."])]  # fmt: skip
    assert (report.pairs, report.malformed, report.malformed_lines) == (3, 4, (2, 5, 6, 7))
    # num_examples keeps the first usable pairs, no off-by-one
    with pytest.warns(UserWarning):
        assert len(read_pairs(text, 2)[0]) == 2


def test_zero_usable_pairs_names_the_file(tmp_path):
    path = tmp_path / "broken.txt"
    path.write_text("no tabs\nat all\n", encoding="utf-8")
    # one error (no warning as well) that names the file, the first bad line and its text
    with pytest.raises(
        ValueError,
        match=r"broken\.txt has no usable 'English<TAB>French' pairs \(2 malformed line\(s\); "
        r"line 1 reads 'no tabs'\)",
    ):
        load_translation_data(path)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty\.txt has no usable"):
        load_translation_data(empty)


def test_download_offline_error_suggests_data_file(monkeypatch):
    def offline(name, folder=None, **kwargs):
        raise hub.DatasetUnavailableError("could not download 'fra-eng' (no network)")

    monkeypatch.setattr(hub, "download_extract", offline)
    with pytest.raises(hub.DatasetUnavailableError, match=r"--data FILE"):
        load_translation_data("download")


# ------------------------------------------------------------------ splits


def _sentences(pairs, part):
    return {tuple(pairs[i][0]) for i in part}, {tuple(pairs[i][1]) for i in part}


@settings(max_examples=80, deadline=None)
@given(
    links=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=120),
    val=st.floats(0, 0.45),
    test=st.floats(0, 0.45),
    seed=st.integers(0, 5),
)
def test_splits_never_share_a_source_or_a_target(links, val, test, seed):
    # few distinct sentences on each side: many pairs share a source, a target or both
    pairs = [([f"w{s}"], [f"t{t}"]) for s, t in links]
    tr, va, te = split_by_source(pairs, val, test, seed)
    assert sorted(tr + va + te) == list(range(len(pairs)))
    assert all(part == sorted(part) for part in (tr, va, te))  # corpus order
    for a, b in ((tr, va), (tr, te), (va, te)):
        (src_a, tgt_a), (src_b, tgt_b) = _sentences(pairs, a), _sentences(pairs, b)
        assert not src_a & src_b, "a source sentence is in two splits"
        assert not tgt_a & tgt_b, "a target sentence is in two splits"
    assert (tr, va, te) == split_by_source(pairs, val, test, seed)
    # sizes are off their targets by at most half the largest group of linked pairs
    biggest = max(len(g) for g in _components(pairs))
    assert abs(len(te) - round(test * len(pairs))) <= biggest / 2
    if tr:
        assert abs(len(va) - round(val * len(pairs))) <= biggest / 2


def _components(pairs):
    """Reference grouping: connected components of the source-target graph, by search."""
    todo, groups = set(range(len(pairs))), []
    while todo:
        stack, group = [todo.pop()], set()
        while stack:
            i = stack.pop()
            group.add(i)
            linked = {j for j in todo if pairs[j][0] == pairs[i][0] or pairs[j][1] == pairs[i][1]}
            todo -= linked
            stack.extend(linked)
        groups.append(group)
    return groups


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 200),
    val=st.floats(0, 0.45),
    test=st.floats(0, 0.45),
    seed=st.integers(0, 5),
)
def test_splits_of_distinct_pairs_have_the_rounded_sizes(n, val, test, seed):
    pairs = [([f"w{i}"], [f"t{i}"]) for i in range(n)]  # every group is one pair
    tr, va, te = split_by_source(pairs, val, test, seed)
    assert (len(te), len(va)) == (round(test * n), round(val * n))
    assert len(tr) == n - len(te) - len(va)


def test_two_sources_sharing_one_target_stay_together():
    # Tatoeba: "go ." and "go !" both translate to "va !"; "go !" also to "bouge !"
    linked = [(["go", "."], ["va", "!"]), (["go", "!"], ["va", "!"]), (["go", "!"], ["bouge", "!"])]
    others = [([f"w{i}", "."], [f"m{i}", "."]) for i in range(40)]
    homes = set()
    for seed in range(20):
        for at in (0, 20, 40):
            pairs = others[:at] + linked + others[at:]
            parts = split_by_source(pairs, 0.2, 0.2, seed)
            where = {k for k, part in enumerate(parts) for i in part if pairs[i] in linked}
            assert len(where) == 1  # the three pairs share one split
            homes |= where
            # 43 pairs -> targets of round(8.6) = 9; one group of 3 is off by <= 1.5
            assert all(abs(len(part) - 9) <= 1 for part in parts[1:])
    assert homes == {0, 1, 2}  # the group is not pinned to train


def test_split_arguments_are_validated():
    pairs = [(["a"], ["b"])]
    with pytest.raises(ValueError, match=r"val_fraction must be in \[0, 1\), got 1.0"):
        split_by_source(pairs, 1.0, 0.0)
    with pytest.raises(ValueError, match=r"test_fraction must be in \[0, 1\), got -0.1"):
        split_by_source(pairs, 0.1, -0.1)
    with pytest.raises(TypeError, match=r"val_fraction must be a float in \[0, 1\), got '0.1'"):
        split_by_source(pairs, "0.1", 0.0)
    with pytest.raises(ValueError, match="val_fraction \\+ test_fraction must be < 1"):
        split_by_source(pairs, 0.5, 0.5)


# ------------------------------------------------------------------ batching


lengths_strategy = st.lists(
    st.tuples(st.integers(1, 12), st.integers(1, 12)), min_size=1, max_size=150
)


@settings(max_examples=60, deadline=None)
@given(lengths=lengths_strategy, budget=st.integers(24, 300), seed=st.integers(0, 3))
def test_bucketing_covers_every_example_once_within_budget(lengths, budget, seed):
    for shuffle in (True, False):
        batches = bucket_batches(lengths, budget, shuffle=shuffle, seed=seed, epoch=seed)
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(len(lengths)))
        for b in batches:
            cost = len(b) * (max(lengths[i][0] for i in b) + max(lengths[i][1] for i in b))
            assert cost <= budget


@settings(max_examples=60, deadline=None)
@given(
    lengths=lengths_strategy,
    budget=st.integers(24, 120),
    world_size=st.integers(1, 4),
    epoch=st.integers(0, 3),
)
def test_shards_split_every_global_batch_by_rows(lengths, budget, world_size, epoch):
    all_batches = bucket_batches(lengths, budget, seed=1, epoch=epoch)
    shards = [
        bucket_batches(lengths, budget, seed=1, epoch=epoch, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    assert len({len(s) for s in shards}) == 1  # every rank does the same number of steps
    usable = [b for b in all_batches if len(b) >= world_size]
    assert len(shards[0]) == len(usable)
    flat = [i for s in shards for b in s for i in b]
    assert len(flat) == len(set(flat))  # disjoint
    for step, global_batch in enumerate(usable):
        # step k of the N ranks together is exactly global batch k
        together = sorted(i for s in shards for i in s[step])
        assert together == sorted(global_batch)
        assert all(len(s[step]) > 0 for s in shards)


def test_batches_deterministic_per_seed_and_epoch():
    lengths = [
        (random.Random(i).randint(2, 11), random.Random(-i).randint(2, 11)) for i in range(500)
    ]
    a = bucket_batches(lengths, 200, seed=0, epoch=0)
    assert a == bucket_batches(lengths, 200, seed=0, epoch=0)
    assert a != bucket_batches(lengths, 200, seed=0, epoch=1)
    assert a != bucket_batches(lengths, 200, seed=1, epoch=0)
    fixed = bucket_batches(lengths, 200, shuffle=False, seed=0)
    assert fixed == bucket_batches(lengths, 200, shuffle=False, seed=7, epoch=3)
    # unshuffled batches come in increasing length order
    assert [lengths[b[0]] for b in fixed] == sorted(lengths[b[0]] for b in fixed)


def test_batching_errors():
    with pytest.raises(ValueError, match="batch_tokens must be a positive int, got 0"):
        bucket_batches([(1, 1)], 0)
    with pytest.raises(ValueError, match=r"batch_tokens=10 is smaller than the longest example"):
        bucket_batches([(6, 7)], 10)
    with pytest.raises(TypeError, match=r"batch_tokens must be a positive int, got True \(bool\)"):
        bucket_batches([(1, 1)], True)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, 2\), got 2"):
        bucket_batches([(1, 1)], 10, rank=2, world_size=2)
    with pytest.raises(TypeError, match=r"rank must be an int in \[0, 2\), got 1\.0 \(float\)"):
        bucket_batches([(1, 1)], 10, rank=1.0, world_size=2)
    with pytest.raises(ValueError, match="world_size must be a positive int, got 0"):
        bucket_batches([(1, 1)], 10, world_size=0)
    with pytest.raises(TypeError, match="shuffle must be a bool, got 1 \\(int\\)"):
        bucket_batches([(1, 1)], 10, shuffle=1)
    assert bucket_batches([], 10) == []


def _random_batches(data: TranslationData, budget: int) -> list[TranslationBatch]:
    """Baseline: shuffle the pairs and fill batches in that order under the same budget."""
    src, tgt = data.encoded("train")
    idx = list(range(len(src)))
    random.Random(0).shuffle(idx)
    groups, cur, ms, mt = [], [], 0, 0
    for i in idx:
        ns, nt = max(ms, len(src[i])), max(mt, len(tgt[i]))
        if cur and (len(cur) + 1) * (ns + nt) > budget:
            groups.append(cur)
            cur, ns, nt = [], len(src[i]), len(tgt[i])
        cur.append(i)
        ms, mt = ns, nt
    groups.append(cur)
    out = []
    for g in groups:
        s = torch.nn.utils.rnn.pad_sequence([torch.tensor(src[i]) for i in g], True, 1)
        t = torch.nn.utils.rnn.pad_sequence([torch.tensor(tgt[i]) for i in g], True, 1)
        s_len = torch.tensor([len(src[i]) for i in g])
        t_len = torch.tensor([len(tgt[i]) for i in g])
        out.append(TranslationBatch(s, s_len, t, t_len))
    return out


def test_bucketing_wastes_little_padding():
    data = generated()
    bucketed = padding_efficiency(data.batches("train", 400))
    random_ = padding_efficiency(_random_batches(data, 400))
    print(f"padding efficiency: bucketed {bucketed:.3f}, random {random_:.3f}")
    assert bucketed > 0.95
    assert random_ < 0.85
    assert bucketed - random_ > 0.15


# ------------------------------------------------------------------ TranslationData


def test_generated_data_object():
    data = generated()
    assert (len(data.train), len(data.val), len(data.test)) == (2700, 150, 150)
    assert data.num_dropped == 0 and data.source == "generated"
    for vocab in (data.src_vocab, data.tgt_vocab):
        assert vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    splits = [{tuple(s) for s, _ in getattr(data, n)} for n in ("train", "val", "test")]
    assert not (splits[0] & splits[1] or splits[0] & splits[2] or splits[1] & splits[2])
    src, tgt = data.train[0]
    assert isinstance(src, list) and "<eos>" not in src and "<eos>" not in tgt
    assert "TranslationData(source='generated', train=2700" in repr(data)


def test_batch_contents_match_pairs():
    data = generated()
    batches = data.batches("val", 120, shuffle=False)
    seen = []
    for b in batches:
        B, S = b.src.shape  # (B, S)
        assert b.tgt.shape[0] == B and b.src_len.shape == b.tgt_len.shape == (B,)
        assert b.src.dtype == b.tgt.dtype == b.src_len.dtype == torch.long
        assert B * (S + b.tgt.shape[1]) <= 120
        for row in range(B):
            n, m = int(b.src_len[row]), int(b.tgt_len[row])
            assert int(b.src[row, n - 1]) == 3 and (b.src[row, n:] == 1).all()
            assert int(b.tgt[row, m - 1]) == 3 and (b.tgt[row, m:] == 1).all()
            src = data.src_vocab.to_tokens(b.src[row, : n - 1].tolist())
            seen.append((src, data.decode_target(b.tgt[row])))
    sv, tv = data.src_vocab, data.tgt_vocab
    # val words that are rare in train come back as <unk>
    expected = sorted((sv.to_tokens(sv[s]), " ".join(tv.to_tokens(tv[t]))) for s, t in data.val)
    assert sorted(seen) == expected
    assert sum(b.src.shape[0] for b in batches) == len(data.val)


def test_train_batches_shard_over_ranks():
    data = generated()
    shards = [data.batches("train", 300, epoch=2, rank=r, world_size=3) for r in range(3)]
    assert len({len(s) for s in shards}) == 1
    total = sum(b.src.shape[0] for s in shards for b in s)
    assert total == len(data.train)  # global batches of 300 tokens hold >= 3 rows each


def test_max_len_drops_long_pairs(tmp_path):
    path = tmp_path / "fra.txt"
    lines = [f"w{i} x .\tm{i} y ." for i in range(40)] + ["a b c d e f g\th ."]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = load_translation_data(path, max_len=5, min_freq=1, val_fraction=0.1, test_fraction=0.1)
    assert data.num_dropped == 1 and data.num_malformed == 0
    assert len(data.train) + len(data.val) + len(data.test) == 40
    assert data.source == str(path)
    with pytest.raises(ValueError, match=r"no pair of .* fits max_len=2"):
        load_translation_data(path, max_len=2)


def test_empty_requested_split_is_an_error_not_nan(tmp_path):
    one = tmp_path / "one.txt"
    one.write_text("Go.\tVa !\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=r"the validation and test splits of .*one\.txt would be empty: 1 usable pair "
        r"split 1 / 0 / 0 \(train / val / test\) with val_fraction=0\.05, "
        r"test_fraction=0\.05; use more data, or val_fraction=0 \(--val-fraction 0\) / "
        r"test_fraction=0 \(--test-fraction 0\)",
    ):
        load_translation_data(one)
    with pytest.raises(ValueError, match=r"the validation split .* with val_fraction=0\.05; "):
        load_translation_data(one, test_fraction=0.0)
    with pytest.raises(ValueError, match=r"the test split .* with test_fraction=0\.1; "):
        load_translation_data(one, val_fraction=0.0, test_fraction=0.1)
    # fractions 0: no validation/test split asked for, none made (as the benchmarks do)
    data = load_translation_data(one, val_fraction=0.0, test_fraction=0.0, min_freq=1)
    assert (len(data.train), len(data.val), len(data.test)) == (1, 0, 0)
    # pairs dropped by max_len are named in the message
    two = tmp_path / "two.txt"
    two.write_text("Go.\tVa !\na b c d e f\tg .\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"1 usable pair, after dropping 1 longer than max_len"):
        load_translation_data(two, max_len=4)


def test_generated_splits_with_fractions_zero():
    data = load_translation_data(num_pairs=50, val_fraction=0.0, test_fraction=0.0)
    assert (len(data.train), len(data.val), len(data.test)) == (50, 0, 0)
    assert data.batches("val", 100) == []


def test_encode_source():
    data = generated()
    src, src_len = data.encode_source(["The red car is big.", "I like zebras!"])
    assert src.shape == (2, 7) and src.dtype == src_len.dtype == torch.long
    assert src_len.tolist() == [7, 5]
    v = data.src_vocab
    assert src[0].tolist() == v[["the", "red", "car", "is", "big", "."]] + [3]
    assert src[1].tolist() == [v["i"], v["like"], 0, v["!"], 3, 1, 1]  # zebras -> <unk>
    with pytest.raises(ValueError, match="cannot translate an empty sentence: ' '"):
        data.encode_source(["hi", " "])
    long = "one two three four five six seven eight nine ten eleven twelve"
    with pytest.raises(ValueError, match=r"sentence 'one two .* more than max_len=12"):
        data.encode_source([long])
    with pytest.raises(TypeError, match="sentences must be a list of str, got one str: 'the car'"):
        data.encode_source("the car")
    with pytest.raises(ValueError, match=r"sentences must be a non-empty list of str, got \[\]"):
        data.encode_source([])
    with pytest.raises(ValueError, match="split must be one of 'train', 'val', 'test', got 'dev'"):
        data.split("dev")


def test_to_dict_is_json_and_round_trips():
    data = generated()
    d = json.loads(json.dumps(data.to_dict()))
    assert d["max_len"] == 12
    back = TranslationData.from_dict(d)
    assert back.src_vocab.idx_to_token == data.src_vocab.idx_to_token
    assert back.tgt_vocab.idx_to_token == data.tgt_vocab.idx_to_token
    assert torch.equal(back.encode_source(["i am sad ."])[0], data.encode_source(["i am sad ."])[0])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_examples": 0}, "num_examples must be a positive int, got 0"),
        ({"min_freq": -1}, "min_freq must be a non-negative int, got -1"),
        ({"max_len": 1}, "max_len must be an int >= 2, got 1"),
        ({"num_pairs": 0}, "num_pairs must be a positive int, got 0"),
        ({"val_fraction": 1.5}, r"val_fraction must be in \[0, 1\), got 1.5"),
        ({"test_fraction": -0.5}, r"test_fraction must be in \[0, 1\), got -0.5"),
        ({"val_fraction": 0.6, "test_fraction": 0.4}, "val_fraction \\+ test_fraction"),
        ({"tokenizer": "bpe"}, "tokenizer must be one of 'word', 'sentencepiece', got 'bpe'"),
    ],
)
def test_load_arguments_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_translation_data(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_examples": 2.5}, r"num_examples must be a positive int, got 2\.5 \(float\)"),
        ({"min_freq": True}, r"min_freq must be a non-negative int, got True \(bool\)"),
        ({"max_len": "12"}, r"max_len must be an int >= 2, got '12' \(str\)"),
        ({"num_pairs": 10.0}, r"num_pairs must be a positive int, got 10\.0 \(float\)"),
        ({"val_fraction": None}, r"val_fraction must be a float in \[0, 1\), got None"),
        ({"joint_vocab": "yes"}, r"joint_vocab must be a bool, got 'yes' \(str\)"),
    ],
)
def test_load_arguments_of_the_wrong_type_are_named(kwargs, message):
    with pytest.raises(TypeError, match=message):
        load_translation_data(**kwargs)


def test_real_file_splits(fra_file):
    data = load_translation_data(fra_file, num_examples=5000, seed=1)
    total = len(data.train) + len(data.val) + len(data.test) + data.num_dropped
    assert total == 5000 and data.num_malformed == 0
    assert data.src_vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert ["va", "!"] in [t for s, t in data.train + data.val + data.test if s == ["go", "."]]
    # fractions of pairs; the groups of linked pairs are small enough to hit them exactly
    assert (len(data.train), len(data.val), len(data.test)) == (4500, 250, 250)
    for side in (0, 1):  # no source and no target sentence in two splits
        seen = [{tuple(p[side]) for p in data.split(n)} for n in ("train", "val", "test")]
        assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="ab .!?\t\n\u202f", max_size=60))
def test_read_pairs_lazy_path_equals_whole_text_path(text):
    def pairs(n):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return read_pairs(text, n)[0]
        except ValueError:
            return None

    assert pairs(10_000) == pairs(None)
