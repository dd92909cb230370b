"""Ctrl-C / SIGTERM during training: finish the current step, save, then stop.

Both training loops (``Trainer`` and ``train_lm``) use one ``StopSignals``: entering it
installs the handlers (main thread only), ``requested`` turns True on the first signal,
a second Ctrl-C raises ``KeyboardInterrupt`` at once, and leaving restores the handlers.
"""

from __future__ import annotations

import signal
import threading

from attnkit.i18n import _

__all__ = ["StopSignals"]


class StopSignals:
    """Ask to stop after the current step; a second Ctrl-C stops now."""

    def __init__(self, verbose: bool = True) -> None:
        self.requested = False
        self.verbose = verbose
        self.previous: dict = {}

    def __call__(self) -> bool:
        return self.requested

    def _handle(self, signum, frame) -> None:
        if self.requested:  # asked twice: stop at once, without saving
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        self.requested = True
        if self.verbose:
            print("\n" + _("stopping after this step (Ctrl-C again to stop at once)"), flush=True)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
            for sig in self.previous:
                signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous = {}
        self.requested = False
