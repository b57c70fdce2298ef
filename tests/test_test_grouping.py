"""The test command's `--dist loadgroup` keeps each group in one process (tests/conftest.py groups the GPU tests,
so that no two time kernels at once, and the files whose module fixtures are slow to make). pytest 9.2 and
pytest-xdist 3.8 together stopped grouping without a word (pytest-dev/pytest-xdist#1386); this notices."""

import subprocess
import sys
import textwrap


def test_a_group_runs_in_one_process(tmp_path):
    (tmp_path / "test_grouped.py").write_text(
        textwrap.dedent(
            """
            import os
            import pytest

            @pytest.mark.xdist_group("together")
            @pytest.mark.parametrize("i", range(6))
            def test_grouped(i, tmp_path_factory):
                (tmp_path_factory.getbasetemp().parent / f"ran-{i}").write_text(os.environ["PYTEST_XDIST_WORKER"])

            @pytest.mark.parametrize("i", range(6))
            def test_free(i):
                pass
            """
        )
    )
    base = tmp_path / "base"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
         f"--basetemp={base}", str(tmp_path / "test_grouped.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    workers = {p.read_text() for p in base.glob("ran-*")}
    assert len(list(base.glob("ran-*"))) == 6 and len(workers) == 1, workers
