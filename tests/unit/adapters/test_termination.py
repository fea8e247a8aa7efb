"""SIGTERM / SIGHUP unwind the process once, as `Terminated`; a handler the program set stays."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from adapters.common.termination import STOP_SIGNALS, Terminated, unwind_on_termination


@pytest.fixture
def default_handlers() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_the_first_signal_unwinds_with_its_exit_code_and_a_second_does_not(default_handlers, sig):
    unwind_on_termination()
    with pytest.raises(Terminated) as caught:
        os.kill(os.getpid(), sig)
    assert caught.value.exit_code == 128 + sig
    assert isinstance(caught.value, KeyboardInterrupt)  # passes `except Exception`
    os.kill(os.getpid(), signal.SIGTERM)  # while cleaning up: logged, not raised


def test_a_handler_the_program_installed_is_kept(default_handlers):
    def mine(signum, frame):  # noqa: ANN001
        pass

    signal.signal(signal.SIGTERM, mine)
    unwind_on_termination()
    assert signal.getsignal(signal.SIGTERM) is mine
    assert signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL  # still at default: changed
