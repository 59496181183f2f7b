"""deltalab.__main__: the command line's own checks (`python -m deltalab ...`). The `lab` command is
tested with JupyterLab's launch in tests/test_jupyterlab.py, `doctor` in tests/test_doctor.py."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("repeat", ["0", "-2", "three"])
def test_bench_refuses_a_repeat_count_below_one(repeat, capsys) -> None:
    from deltalab.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--skip-notebooks", "--repeat", repeat])
    assert exit_.value.code == 2
    assert f"{repeat!r} is not a whole number of 1 or more" in capsys.readouterr().err
