"""Process start-up: Kernel Tuner must not pull in torch (seconds of every worker's and parent's start)."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_kernel_tuner_is_imported_without_torch_and_torch_stays_importable(tmp_path):
    # a stand-in torch that records each import of it
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("import os\nopen(os.environ['TORCH_MARK'], 'a').write('imported\\n')\n"
                                      "class Tensor: pass\n")
    mark = tmp_path / "mark"
    code = textwrap.dedent("""
        import os, sys
        import tuner.distributed, tuner.campaign, tuner.cli  # everything a parent and a worker import
        import kernel_tuner.searchspace
        assert not os.path.exists(os.environ["TORCH_MARK"]), "torch was imported at start-up"
        assert kernel_tuner.searchspace.torch_available is False
        import torch  # what needs it (Optuna's GP sampler) still gets it
        assert os.path.exists(os.environ["TORCH_MARK"])
        print("ok")
    """)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "TORCH_MARK": str(mark), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
