"""The compiled sweep's guards (issue 44 item 3): a CC that allows reassociation or contraction is
refused, and the first call's check samples the whole call, not its first block."""
import numpy as np
import pytest

from symbolic.search import native


@pytest.mark.parametrize("flag", ["-ffast-math", "-funsafe-math-optimizations", "-ffp-contract=fast", "-Ofast",
                                  "-fassociative-math", "-ffp-contract=on", "-mrecip=all"])
def test_cc_with_a_rounding_flag_compiles_no_loop(monkeypatch, flag):
    monkeypatch.setenv("CC", f"cc -O2 {flag}")
    native._warn_unsafe.cache_clear()
    with pytest.warns(UserWarning, match="not used"):
        assert native.compiler() is None
    assert not native.enabled()


def test_cc_with_contraction_off_is_kept(monkeypatch):
    monkeypatch.setenv("CC", "cc -ffp-contract=off -march=native")
    assert native.unsafe_flags(["cc", "-ffp-contract=off", "-march=native"]) == []


def test_the_sample_spans_the_whole_call():
    picked = native.sample_indices(10**7)
    assert picked[0] == 0 and picked[-1] == 10**7 - 1 and len(picked) == 512
    assert np.all(np.diff(picked) > 10**4)  # spread, not the first block
    assert list(native.sample_indices(5)) == [0, 1, 2, 3, 4]
