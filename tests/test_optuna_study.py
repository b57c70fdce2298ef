"""A campaign's Optuna study is what Optuna's own tools read unchanged (issue 23): real parameter values, the
objective in its unit and direction with its metric named, no COMPLETE trial for a failed or invalid config
(PRUNED, with its failure class), and the study named as the campaign. optuna-dashboard's own API reads it."""

import io
import json
import shutil
import sys
import wsgiref.util

import optuna
import pytest
from optuna.trial import TrialState

from tests.recorded import is_recorded, recording
from tuner.cli import main
from tuner.store import cache_path
from tuner.workloads import get_workload

H100 = "NVIDIA H100 80GB HBM3"
SPACE = get_workload("reduction").space
LARGE = (H100, "reduction", "large", "float32")
needs_recording = pytest.mark.skipif(not is_recorded(*LARGE), reason="no recording")
BROKEN = {7: "CompilationFailedConfig", 6: "RuntimeFailedConfig"}  # variant -> how its configs fail


@pytest.fixture
def study_db(results, tmp_path):
    """A replayed TPE campaign whose recording has the configs of two variants failing, in a SQLite study."""
    target = cache_path(results, H100, "reduction", "large", "float32")
    target.parent.mkdir(parents=True)
    shutil.copy(recording(*LARGE), target)
    doc = json.loads(target.read_text())
    for key, entry in doc["cache"].items():
        if entry["variant"] in BROKEN:
            params = {k: entry[k] for k in doc["tune_params_keys"]}
            doc["cache"][key] = {**params, "time": BROKEN[entry["variant"]], "compile_time": 1.0,
                                 "verification_time": 0, "benchmark_time": 0, "timestamp": entry["timestamp"]}
    target.write_text(json.dumps(doc))
    url = f"sqlite:///{tmp_path / 'x.db'}"
    args = ["tune", "reduction", "--size", "large", "--dtype", "float32", "--simulate", "--strategy", "tpe",
            "--seed", "0", "--budget", "40", "--no-warm-start", "--storage", url]
    assert main(args) == 0
    return url


@needs_recording
def test_a_replayed_study_holds_real_values_under_its_direction_and_no_complete_failure(study_db):
    (summary,) = optuna.get_all_study_summaries(study_db)
    assert summary.study_name == "reduction-large-float32-tpe-s0-replay"
    study = optuna.load_study(study_name=summary.study_name, storage=study_db)
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE and study.metric_names == ["GB/s"]
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    assert len(complete) > 10 and all(t.value > 100 for t in complete)  # GB/s, positive
    for t in complete + pruned:
        assert all(t.params[k] in SPACE.params[k] for k in SPACE.params), t.params  # real values, not indices
    assert all(t.params["variant"] not in BROKEN and t.user_attrs["tuner"]["kind"] == "measured" for t in complete)
    statuses = {t.user_attrs["tuner"].get("status") for t in pruned}
    assert {"compile", "invalid"} <= statuses  # failures and restriction-breakers are pruned, with their class
    failed = [t for t in pruned if t.user_attrs["tuner"]["kind"] == "measured"]
    assert failed and all(t.params["variant"] in BROKEN and t.value is None for t in failed)
    # the best trial is the campaign's best, in its own unit
    assert study.best_value == max(t.value for t in complete)


@needs_recording
def test_optuna_dashboard_reads_the_study_through_its_own_api(study_db):
    from optuna_dashboard import wsgi

    app = wsgi(optuna.storages.RDBStorage(study_db))

    def get(path: str) -> dict:
        environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO(b"")}
        wsgiref.util.setup_testing_defaults(environ)
        status = []
        body = b"".join(app(environ, lambda s, h, exc_info=None: status.append(s)))
        assert status[0].startswith("200"), (path, status, body[:300])
        return json.loads(body)

    (listed,) = get("/api/studies")["study_summaries"]
    assert listed["study_name"] == "reduction-large-float32-tpe-s0-replay" and listed["directions"] == ["maximize"]
    detail = get(f"/api/studies/{listed['study_id']}")
    assert detail["objective_names"] == ["GB/s"]  # from the metric names, as the dashboard labels its plots
    trials = detail["trials"]
    complete = [t for t in trials if t["state"] == "Complete"]
    assert complete and all(t["values"][0] > 100 for t in complete)
    variants = {p["param_external_value"] for t in trials for p in t["params"] if p["name"] == "variant"}
    assert {str(v) for v in SPACE.params["variant"]} >= variants  # real values, as the dashboard shows them
    assert any(t["state"] == "Pruned" for t in trials)


def test_dashboard_without_optuna_dashboard_says_what_to_install(monkeypatch, capsys, results):
    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)
    assert main(["dashboard"]) != 0
    assert "pip install 'gpu-tuner[dashboard]'" in capsys.readouterr().err


def test_dashboard_names_the_missing_campaign_and_those_there(study_db, capsys, results):
    assert main(["dashboard", "nope", "--storage", study_db]) != 0
    err = capsys.readouterr().err
    assert "no campaign 'nope'" in err and "reduction-large-float32-tpe-s0-replay" in err


def test_a_campaign_is_found_by_its_name_without_the_gpu_and_hashes(tmp_path):
    """A campaign on one process names its study `<campaign>@<gpu>/<hashes>`: `tuner dashboard <campaign>` finds
    it where the name is one study's, and lists them where it names several."""
    from tuner.campaign.study_storages import find_study
    from tuner.errors import TunerError

    url = f"sqlite:///{tmp_path / 'studies.db'}"
    for name in ["gemm-auto-s1@nvidia-h100-80gb-hbm3/ab12-cd34", "red-auto-s1@nvidia-h100/1-2", "red-auto-s1@nvidia-h200/1-2"]:
        optuna.create_study(study_name=name, storage=url)
    found_url, study_id = find_study(tmp_path, "gemm-auto-s1", url)
    assert found_url == url
    assert optuna.storages.RDBStorage(url).get_study_name_from_id(study_id) == "gemm-auto-s1@nvidia-h100-80gb-hbm3/ab12-cd34"
    with pytest.raises(TunerError, match="'red-auto-s1' names 2 studies .*: red-auto-s1@nvidia-h100/1-2, red-auto-s1@nvidia-h200/1-2"):
        find_study(tmp_path, "red-auto-s1", url)
