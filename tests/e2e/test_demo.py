"""`karpy-emulator demo`'s whole machinery on a short schedule (0 → 8 → 0): the emulation, the controller, the live
view and the summary; it must end with exit code 0, every node it launched terminated. README's `make demo` runs the
full schedule (0 → 8 → 40 → 5 → 0) in the time README states; this one keeps the suite short."""

from __future__ import annotations

import io
import re

import pytest

from karpy_emulator import demo


@pytest.mark.slow
def test_the_demo_scales_up_and_back_to_nothing_and_exits_0() -> None:
    out = io.StringIO()
    # The demo runs on the wall clock for a person to watch, and its own deadline is part of what `make demo`
    # promises; 120 s is about four times what this short schedule takes.
    options = demo.Options(steps=(8, 0), boot_delay=1.0, consolidate_after="2s", live=False, deadline=120.0)
    code = demo.main(options, out=out)
    text = out.getvalue()
    assert code == demo.EXIT_OK, text[-2000:]
    assert "scale inflate 0 → 8" in text
    assert "scale inflate 8 → 0" in text
    summary = re.search(r"nodes launched: (\d+)\s+terminated: (\d+)", text)
    assert summary is not None, text[-2000:]
    launched, terminated = int(summary[1]), int(summary[2])
    assert launched >= 1
    assert terminated == launched  # emptiness removed every node it bought
    # the live view's "recent" lines name the node each deletion removed
    deleted = set(re.findall(r"deleted node(?! ?claim)(.*)", text))
    assert deleted, text[-2000:]
    assert all(re.fullmatch(r" node=\S+", rest) for rest in deleted), deleted
    assert "— ok" in text
