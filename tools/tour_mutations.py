"""Mutate one computation per tour topic and per exercise experiment, and show that the
test fails.

    python tools/tour_mutations.py [--topic NAME ...] [--exercises | --tour]
                                   [--mutants | --reversals] [--keep-going]

For each topic of ``attnkit.tour.TOPICS`` one line of its module is changed (the
computation its finding rests on: a sign, an axis, a scale, a formula), in a copy of
``src/`` in a temporary folder, never in the working tree. The topic's test in
``tests/tour/test_topics.py`` then runs against that copy (``PYTHONPATH``) and must fail:
a mutant that passes is a test that could pass by accident. One line per topic:
``killed`` (the test failed, with the first assertion line) or ``SURVIVED``. The
unmutated copy is run first with the same tests, which must pass, so a failure is the
mutation's doing. Exit status 1 when a mutant survives or the baseline fails.

The exercises' mutations (one per experiment exercise, the same rules, run against
``tests/exercises/``) are listed per group in ``tools/exercise_mutations/GROUP.py`` as
``MUTATIONS = [(exercise_id, path under src/attnkit, before, after, what, test), ...]``;
``--topic`` also takes an exercise ID.

Besides each wrong computation (a *mutant*), each experiment has a *reversal*: its claims'
comparison turned around in the experiment (the two arms swapped, or the direction
negated), which its test must also catch: ``REVERSALS`` (same rows) beside ``MUTATIONS``
in each group's file, and ``tools/tour_reversals.py`` for the tour's topics (rows of
``Mutation``'s first six fields, paths relative to src/attnkit/tour).

Results and the date they were taken: docs/tour.md and docs/exercises.md ("Mutation check").
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    topic: str  # a key of attnkit.tour.TOPICS, or an exercise ID
    path: str  # the module changed, relative to src/attnkit/tour (exercises: src/attnkit)
    before: str  # exactly one occurrence in that module
    after: str
    what: str  # the change, in words
    test: str  # the test (a -k expression over ``tests``) that must fail
    tests: str = "tests/tour/test_topics.py"
    root: str = "tour"  # the folder under src/attnkit that ``path`` is relative to
    kind: str = "mutant"  # "mutant": a wrong computation; "reversal": a claim's comparison reversed


MUTATIONS = [
    Mutation("cues", "pooling.py",
             'scores = X @ query if kind == "attention" else torch.zeros(X.shape[0], dtype=X.dtype)',
             'scores = X @ query if kind == "attention" else 0.01 * (X @ query)',
             "pooling without a query is steered a little by the query",
             "test_cues_query_changes_attention_not_pooling"),
    Mutation("kernels", "pooling.py",
             '"gaussian": lambda u: torch.exp(-(u**2) / 2),',
             '"gaussian": lambda u: torch.exp(-(u**2) / 2) * (1 + u.abs()) ** 3,',
             "the Gaussian kernel rises again away from 0",
             "test_kernels_give_a_closer_key_more_weight"),
    Mutation("scoring", "scoring_and_scaling.py",
             "scores = (queries @ w).unsqueeze(-1) + (keys @ w).unsqueeze(-2)  # wᵀq + wᵀk",
             "scores = (queries @ w).unsqueeze(-1) * (keys @ w).unsqueeze(-2)  # wᵀq + wᵀk",
             "the vector-sum score multiplies instead of adding",
             "test_scoring_exercises"),
    Mutation("scaling", "scoring_and_scaling.py",
             "jac_scaled.append(float(softmax_jacobian_norm(s / math.sqrt(d)).mean()))",
             "jac_scaled.append(float(softmax_jacobian_norm(s).mean()))",
             "the scaled scores lose their 1/sqrt(d)",
             "test_scaling_variance_linear_and_gradients_vanish"),
    Mutation("self-attention", "selfattn.py",
             "A_prime = torch.softmax(A, dim=0)",
             "A_prime = torch.softmax(A, dim=1)",
             "the matrix form's softmax runs over the wrong axis",
             "test_self_attention_matrix_form_equals_library"),
    Mutation("multihead", "selfattn.py",
             "per_row = (w * (pos[None, :] - pos[:, None]).abs()).sum(-1)  # (N, L, H, S)",
             "per_row = (w.mean(2, keepdim=True) * (pos[None, :] - pos[:, None]).abs()).sum(-1)",
             "every head's attended distance is the mean of the heads'",
             "test_multihead_heads_cover_different_ranges"),
    Mutation("positions", "positions.py",
             "M[1::2, 0::2] = torch.diag(-s)",
             "M[1::2, 0::2] = torch.diag(s)",
             "the offset map's sine block loses its sign (no longer a rotation)",
             "test_positions_rotation_and_uniqueness"),
    Mutation("rope", "rope.py",
             "by_offset = torch.stack([(q[:, 0] @ rope_matrix(n - m, Dh) * k[:, 0]).sum(-1)",
             "by_offset = torch.stack([(q[:, 0] @ rope_matrix(m - n, Dh) * k[:, 0]).sum(-1)",
             "the score from the offset alone uses the opposite offset",
             "test_rope_score_depends_on_the_offset_only"),
    Mutation("architectures", "cost.py",
             "return 2 * b * q * k * d + 2 * b * q * k * dv",
             "return 2 * b * q * d + 2 * b * q * dv",
             "the fused attention's FLOPs forget the keys",
             "test_architectures_counted_cost_grows_as_the_chapter_says"),
    Mutation("norms", "norms.py",
             "h = torch.relu(torch.cat([h[:half], F.layer_norm(h[half:], h.shape[-1:])]))",
             "h = torch.relu(torch.cat([h[:half], h[half:]]))",
             "the LayerNorm half of the comparison loses its LayerNorm",
             "test_norms_layernorm_speeds_convergence"),
    Mutation("gates", "gates.py",
             "Z = zr[..., :n] * z_on",
             "Z = zr[..., :n] * 0",
             "the update gate is removed from every variant",
             "test_gates_update_serves_long_range_reset_not_needed_short"),
    Mutation("bptt", "recurrent.py",
             "scale = torch.where(clipped, (theta / norm).clamp(max=1.0), torch.ones_like(norm))",
             "scale = torch.where(clipped, (theta / norm).clamp(min=1.0), torch.ones_like(norm))",
             "clipping scales gradients up instead of down",
             "test_bptt_clipping_prevents_divergence"),
    Mutation("autoregressive", "recurrent.py",
             "cols.append(net(torch.stack(cols[i - tau : i], 1)).reshape(-1))",
             "cols.append(x[i : i + n])",
             "k-step-ahead predictions read the true sequence",
             "test_autoregressive_degrades_with_k"),
    Mutation("seq2seq", "translation.py",
             "band = ((torch.arange(S)[None, :] - t[:, None] * (S - 1) / (T - 1)).abs() <= 1).float()",
             "band = ((torch.arange(S)[None, :] - (T - 1 - t[:, None]) * (S - 1) / (T - 1)).abs() <= 1).float()",
             "the alignment band runs along the anti-diagonal",
             "test_seq2seq_attention_helps_costs_more_and_aligns"),
    Mutation("transformer", "translation.py",
             "total -= float(logp[torch.arange(len(ids)), ids].sum())",
             "total -= float(logp[torch.arange(len(ids)), ids.flip(0)].sum())",
             "the decoder-alone log-likelihood scores the tokens in reverse order",
             "test_transformer_maps_encoder_alone_decoder_alone"),
    Mutation("extrapolation", "extrapolation.py",
             "full[f], past[f] = _perplexity(model, held_out, f * C, C)",
             "full[f], past[f] = _perplexity(model, held_out, C, C)",
             "every length is evaluated at the training context",
             "test_extrapolation_alibi_holds_learned_stops"),
    Mutation("coreference", "coreference.py",
             'held = report.heads["kinds"][kind]["cells"][layer - 1][head - 1]',
             'held = report.heads["kinds"]["encoder"]["cells"][layer - 1][head - 1]',
             "the held-out rate is read from the encoder's head at that place, not the one chosen",
             "test_coreference_claims_hold"),
]  # fmt: skip


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"mutations_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exercise_mutations() -> list[Mutation]:
    """Every ``tools/exercise_mutations/*.py``'s ``MUTATIONS`` and ``REVERSALS``."""
    found = []
    for path in sorted((REPO / "tools" / "exercise_mutations").glob("*.py")):
        module = _load(path)
        for kind, listed in (("mutant", module.MUTATIONS),
                             ("reversal", getattr(module, "REVERSALS", []))):  # fmt: skip
            for exercise, where, before, after, what, test in listed:
                found.append(Mutation(exercise, where, before, after, what, test,
                                      tests="tests/exercises", root="", kind=kind))  # fmt: skip
    return found


def tour_reversals() -> list[Mutation]:
    """``tools/tour_reversals.py``'s ``REVERSALS``: per topic, its claims' comparison reversed."""
    path = REPO / "tools" / "tour_reversals.py"
    if not path.is_file():
        return []
    return [Mutation(*row, kind="reversal") for row in _load(path).REVERSALS]


def _run_tests(src: Path, test: str, tests: str) -> tuple[int, str]:
    """Run the selected tests with ``src`` first on the path: (exit code, key line)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-m", "pytest", *tests.split(), "-q", "-x",
               "-p", "no:cacheprovider", "-k", test]  # fmt: skip
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    key = next((ln for ln in lines if ln.startswith("E ")), lines[-1] if lines else "")
    return proc.returncode, " ".join(key.split())[:150]


def _imports_from(src: Path) -> Path:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", "import attnkit; print(attnkit.__file__)"],
                         env=env, capture_output=True, text=True, check=True)  # fmt: skip
    return Path(out.stdout.strip()).parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topic", action="append", help="only these topics (repeatable)")
    parser.add_argument("--keep-going", action="store_true", help="run every mutant")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--exercises", action="store_true", help="only the exercises' mutants")
    which.add_argument("--tour", action="store_true", help="only the tour's mutants")
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument("--reversals", action="store_true", help="only the reversed comparisons")
    kinds.add_argument("--mutants", action="store_true", help="only the wrong computations")
    args = parser.parse_args(argv)
    every = ([] if args.exercises else MUTATIONS + tour_reversals()) + (
        [] if args.tour else exercise_mutations()
    )
    every = [m for m in every if not args.reversals or m.kind == "reversal"]
    every = [m for m in every if not args.mutants or m.kind == "mutant"]
    chosen = [m for m in every if not args.topic or m.topic in args.topic]
    unknown = set(args.topic or ()) - {m.topic for m in every}
    if unknown:
        parser.error(f"--topic: no mutation for {sorted(unknown)}")
    with tempfile.TemporaryDirectory(prefix="tour-mutants-") as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(REPO / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
        if _imports_from(src) != src / "attnkit":
            print(f"the copy in {src} is not the attnkit the tests import", file=sys.stderr)
            return 2
        for m in chosen:  # every edit applies to today's code exactly once
            count = (src / "attnkit" / m.root / m.path).read_text(encoding="utf-8").count(m.before)
            if count != 1:
                print(f"{m.topic}: the line to mutate occurs {count} times in {m.path}")
                return 2
        for tests in sorted({m.tests for m in chosen}):
            selection = " or ".join(sorted({m.test for m in chosen if m.tests == tests}))
            code, line = _run_tests(src, selection, tests)
            print(f"baseline {tests} (unmutated copy): {'pass' if code == 0 else 'FAIL ' + line}",
                  flush=True)  # fmt: skip
            if code != 0:
                return 1
        survived = 0
        alive_ones: list[Mutation] = []
        for m in chosen:
            path = src / "attnkit" / m.root / m.path
            original = path.read_text(encoding="utf-8")
            path.write_text(original.replace(m.before, m.after), encoding="utf-8")
            try:
                code, line = _run_tests(src, m.test, m.tests)
            finally:
                path.write_text(original, encoding="utf-8")
            verdict = "killed" if code != 0 else "SURVIVED"
            survived += code == 0
            if code == 0:
                alive_ones.append(m)
            print(f"{m.topic:15} {m.kind:8} {m.path}: {m.what} -> {m.test}: {verdict}"
                  + (f" ({line})" if code != 0 else ""), flush=True)  # fmt: skip
            if code == 0 and not args.keep_going:
                break
    for kind in ("mutant", "reversal"):
        these = [m for m in chosen if m.kind == kind]
        if these:
            alive = sum(m in alive_ones for m in these)
            print(f"{kind}s: {len(these) - alive} of {len(these)} killed")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
