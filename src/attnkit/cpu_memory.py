"""Keep freed memory in the process on CPU: glibc's ``malloc`` thresholds for training.

glibc's ``malloc`` (Linux) serves a block above its *mmap threshold* with a fresh
``mmap`` and returns it to the kernel when freed, and it gives the top of the heap back
(*trim*) once more than the *trim threshold* is free there. Both start at 128 KiB and
grow only as the process happens to free large blocks, so two processes doing the same
training step can run with different thresholds: one re-uses its memory, the other maps
and zero-fills new pages every step. Measured on the book's 0.17 deep-rnn model (a
2-layer LSTM, ~4 ms steps, one thread, separate processes): attnkit's process took
679,002 minor page faults in 10 epochs and the book's 196,128, and attnkit's
6.4 s against the book's 5.2 s; with the thresholds below both took ~85,000 faults and
5.0 s (docs/book-timing.md).

:func:`keep_freed_memory` sets the thresholds to the largest values glibc's own dynamic
rule reaches on 64-bit systems (mmap 32 MiB, trim twice that), so the process holds on to
at most that much freed memory instead of faulting it back in. The training engine calls
it when it trains on the CPU. Elsewhere (macOS, Windows, musl) it does nothing. Set
``ATTNKIT_MALLOC=default`` to leave ``malloc`` alone.

Decoding allocates blocks above 32 MiB at every step (a beam of 4 x 64 sentences over
59,514 words: 61 MB of logits, and the int8 output layer's product of the same size),
which glibc always maps afresh. :func:`keep_large_blocks`, which decoding calls on the
CPU, also stops ``malloc`` from mapping blocks of their own (``M_MMAP_MAX`` 0: every block
from the heap) and keeps up to ``DECODING_TRIM_THRESHOLD`` of freed heap. Measured
2026-12-07 at OPUS-MT en-fr's shapes in int8 (2 threads, AVX-512 EPYC, one batch of 64
random sentences, 32 steps): greedy 1.26 -> 1.08 s, beam 4 4.02 -> 3.39 s.
"""

from __future__ import annotations

import ctypes
import os
import sys

from attnkit.i18n import _

__all__ = [
    "DECODING_TRIM_THRESHOLD",
    "MMAP_THRESHOLD",
    "TRIM_THRESHOLD",
    "keep_freed_memory",
    "keep_large_blocks",
]

MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc's dynamic rule pairs with it
DECODING_TRIM_THRESHOLD = 512 << 20  # freed heap kept by decoding (keep_large_blocks)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4  # mallopt (<malloc.h>)
_done: bool | None = None  # the outcome of the first call (one per process)
_large_done: bool | None = None  # keep_large_blocks's


def _load_libc():
    """glibc's mallopt, or None where there is none (not Linux, not glibc)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return getattr(libc, "mallopt", None)


def keep_freed_memory() -> bool:
    """Set glibc's mmap threshold to 32 MiB and its trim threshold to 64 MiB, once per
    process. Returns True when they are set (now or by an earlier call), False where
    there is no glibc or ``ATTNKIT_MALLOC=default`` asks to leave ``malloc`` alone.

    Raises:
        ValueError: ``ATTNKIT_MALLOC`` set to anything but ``default`` or ``tuned``.
    """
    global _done
    if not _tuned():
        return False
    if _done is None:
        _done = _mallopt_all(
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        )
    return _done


def keep_large_blocks() -> bool:
    """For decoding: :func:`keep_freed_memory`, then no block of its own mapping
    (``M_MMAP_MAX`` 0) and a trim threshold of 512 MiB, once per process. Returns True when
    set, False without glibc or with ``ATTNKIT_MALLOC=default``.

    Raises:
        ValueError: ``ATTNKIT_MALLOC`` set to anything but ``default`` or ``tuned``.
    """
    global _large_done
    if not keep_freed_memory():
        return False
    if _large_done is None:
        _large_done = _mallopt_all((_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, DECODING_TRIM_THRESHOLD))
    return _large_done


def _mallopt_all(*settings: tuple[int, int]) -> bool:
    """``mallopt(param, value)`` for each setting in turn, stopping at the first refusal;
    True when glibc took them all (False without glibc)."""
    mallopt = _load_libc()
    return mallopt is not None and all(mallopt(param, value) == 1 for param, value in settings)


def _tuned() -> bool:
    """Whether ``ATTNKIT_MALLOC`` (default "tuned") lets attnkit set malloc's thresholds."""
    choice = os.environ.get("ATTNKIT_MALLOC", "tuned")
    if choice not in ("tuned", "default"):
        message = _("ATTNKIT_MALLOC must be 'tuned' or 'default', got {choice!r}")
        raise ValueError(message.format(choice=choice))
    return choice == "tuned"
