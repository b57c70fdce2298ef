"""spmv without a GPU: the Matrix Market reader, the generators, the scipy reference on awkward matrices,
the tolerance, matrix features and the size notation."""

import os

import numpy as np
import pytest
import scipy.sparse as sp

from tuner.errors import TunerError
from tuner.workloads import get_workload
from tuner.workloads import spmv_matrices as mats
from tuner.workloads.spmv import min_traffic_bytes, reference

BANNER = "%%MatrixMarket matrix coordinate"


@pytest.fixture(autouse=True)
def _own_file_registry(monkeypatch):
    monkeypatch.delenv(mats.FILES_ENV, raising=False)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, text, says", [
    ("empty.mtx", "", "Missing banner"),
    ("nohdr.mtx", "1 2 3\n", "Missing banner"),
    ("short.mtx", f"{BANNER} real general\n3 3 3\n1 1 1.0\n2 2 2.0\n", "Truncated"),
    ("range.mtx", f"{BANNER} real general\n3 3 2\n1 1 1.0\n4 2 2.0\n", "out of bounds"),
    ("word.mtx", f"{BANNER} real general\n3 3 1\n1 x 1.0\n", "Invalid"),
    ("complex.mtx", f"{BANNER} complex general\n3 3 1\n1 1 1.0 2.0\n", "field 'complex'"),
    ("herm.mtx", f"{BANNER} real hermitian\n3 3 1\n1 1 1.0\n", "hermitian"),
    ("dense.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "dense"),
    ("nocols.mtx", f"{BANNER} real general\n3 0 0\n", "no rows or no columns"),
])
def test_reader_rejects_malformed_files_with_one_line(tmp_path, name, text, says):
    path = write(tmp_path, name, text)
    with pytest.raises(TunerError) as e:
        mats.read_matrix_market(path)
    message = str(e.value)
    assert str(path) in message and says.lower() in message.lower() and "\n" not in message


def test_reader_reports_a_missing_file(tmp_path):
    with pytest.raises(TunerError, match="no such Matrix Market file"):
        mats.read_matrix_market(tmp_path / "none.mtx")


@pytest.mark.parametrize("field, symmetry, entries, dense", [
    ("real", "general", ["1 1 1.5", "3 2 -2.25", "2 3 4"], [[1.5, 0, 0], [0, 0, 4], [0, -2.25, 0]]),
    ("integer", "general", ["1 2 7", "3 3 -1"], [[0, 7, 0], [0, 0, 0], [0, 0, -1]]),
    ("pattern", "general", ["1 1", "2 3"], [[1, 0, 0], [0, 0, 1], [0, 0, 0]]),
    ("real", "symmetric", ["1 1 2.0", "3 1 -1.0", "3 2 0.5"], [[2, 0, -1], [0, 0, 0.5], [-1, 0.5, 0]]),
    ("integer", "symmetric", ["2 1 3", "3 3 1"], [[0, 3, 0], [3, 0, 0], [0, 0, 1]]),
    ("pattern", "symmetric", ["2 2", "3 1"], [[0, 0, 1], [0, 1, 0], [1, 0, 0]]),
    ("real", "skew-symmetric", ["2 1 3.0"], [[0, -3, 0], [3, 0, 0], [0, 0, 0]]),
])
def test_reader_reads_fields_and_symmetries(tmp_path, field, symmetry, entries, dense):
    text = f"{BANNER} {field} {symmetry}\n% a comment\n3 3 {len(entries)}\n" + "\n".join(entries) + "\n"
    m = mats.read_matrix_market(write(tmp_path, "m.mtx", text))
    assert isinstance(m, sp.csr_matrix) and m.has_sorted_indices
    np.testing.assert_array_equal(m.toarray(), np.array(dense, dtype=float))


CLASSES = [("uniform", 3000, 8), ("powerlaw", 3000, 8), ("laplace2d", 2500, 5), ("banded", 3000, 7),
           ("denserow", 3000, 4)]


@pytest.mark.parametrize("cls, rows, mean", CLASSES)
def test_generators_give_canonical_csr_of_the_stated_size(cls, rows, mean):
    size = mats.size_for(cls, rows, mean, seed=5)
    m = mats.generate(size)
    assert m.shape == (rows, rows) and m.nnz == size["nnz"] == mats.row_lengths(size).sum()
    assert m.indptr.dtype == np.int32 and m.indices.dtype == np.int32
    assert m.indices.min() >= 0 and m.indices.max() < rows
    step = np.diff(m.indices)
    starts = m.indptr[1:-1][np.diff(m.indptr)[1:] > 0]  # no ordering between rows: mask each row's first entry
    inner = np.ones(len(step), bool)
    inner[starts[(starts > 0) & (starts <= len(step))] - 1] = False
    assert (step[inner] > 0).all(), "columns sorted and distinct within each row"
    again = mats.generate(size)
    assert (again.indices == m.indices).all() and (again.data == m.data).all()  # determined by the size


def test_generator_classes_have_their_shape():
    uni = mats.row_lengths(mats.size_for("uniform", 20000, 8))
    assert (uni == 0).any() and uni.max() <= 16 and abs(uni.mean() - 8) < 0.2
    pw = mats.features(mats.row_lengths(mats.size_for("powerlaw", 20000, 8)))
    assert pw["cv"] > 1 and pw["max_over_mean"] > 50 and pw["mean"] == pytest.approx(8, rel=0.25)
    lap = mats.generate(mats.size_for("laplace2d", 400, 5))
    assert (lap != lap.T).nnz == 0 and (lap.diagonal() == 4).all() and lap.sum(axis=1).min() == 0
    band = mats.generate(mats.size_for("banded", 100, 5)).toarray()
    assert band[50, 48:53].all() and not band[50, :48].any() and not band[50, 53:].any()
    dense = mats.row_lengths(mats.size_for("denserow", 5000, 4))
    assert dense.max() == 5000 and np.sort(dense)[-2] <= 8


def test_named_sizes_state_what_the_generator_yields():
    space = get_workload("spmv").space
    assert len(space.sizes) >= 12
    for name, size in space.sizes.items():
        assert size["rows"] >= 2**20, name
        assert mats.size_for(mats.CLASS_NAMES[size["matrix"]], size["rows"], size["mean"], size["seed"],
                             size["cols"]) == size, name
    classes = {size["matrix"] for size in space.sizes.values()}
    assert classes == {1, 2, 3, 4, 5}


def test_arguments_check_that_the_size_describes_the_matrix():
    workload = get_workload("spmv")
    size = dict(mats.size_for("uniform", 100, 4), nnz=1)
    with pytest.raises(TunerError, match="nnz=1 given"):
        workload.arguments(size, "float32", np.random.default_rng(0))


def spmv_by_hand(m, x):
    dense = m.toarray().astype(np.float64)
    return dense @ x.astype(np.float64)


@pytest.mark.parametrize("text", [
    f"{BANNER} real general\n4 6 0\n",                                            # no nonzeros at all
    f"{BANNER} real general\n1 5 3\n1 2 1.5\n1 5 -2\n1 1 0.25\n",                  # a single row
    f"{BANNER} integer general\n5 5 3\n2 2 3\n2 4 1\n5 1 -2\n",                    # empty rows 1, 3, 4
    f"{BANNER} real symmetric\n4 4 3\n1 1 1\n4 2 2.5\n3 3 -1\n",                   # symmetric
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reference_on_awkward_matrices(tmp_path, text, dtype):
    workload = get_workload("spmv")
    size = workload.parse_size(f"mtx:{write(tmp_path, 'a.mtx', text)}")
    args = workload.arguments(size, dtype, np.random.default_rng(2))
    m = mats.read_matrix_market(tmp_path / "a.mtx")
    expected = spmv_by_hand(m, args[3])
    answer = workload.answer(args, size, dtype)
    assert [a is None for a in answer] == [i != 4 for i in range(len(args))]
    np.testing.assert_array_equal(answer[4], expected)
    empty = np.diff(args[0]) == 0
    assert (answer[4][empty] == 0).all()
    assert args[4].shape == (size["rows"],) and args[3].shape == (size["cols"],)
    assert len(args[5]) >= size["rows"] // 2 + 1  # one carry per block of the largest grid (64 threads, 32 per row)


def test_tolerance_fits_row_length_and_values(tmp_path):
    workload = get_workload("spmv")
    assert workload.tolerances(mats.size_for("powerlaw", 3000, 8), "float32") == (0.5, 0.0)  # exact integers
    short_path = write(tmp_path, "s.mtx", f"{BANNER} real general\n2 2 2\n1 1 0.3\n2 2 0.7\n")
    short = workload.parse_size(f"mtx:{short_path}")
    n = 4000
    long_text = f"{BANNER} real general\n1 {n} {n}\n" + "".join(f"1 {j + 1} 0.3\n" for j in range(n))
    long = workload.parse_size(f"mtx:{write(tmp_path, 'l.mtx', long_text)}")
    a32, a64 = workload.tolerances(long, "float32")[0], workload.tolerances(long, "float64")[0]
    assert 0 < a64 < a32 < 1 and workload.tolerances(short, "float32")[0] < a32 / 100


def test_rounding_within_the_tolerance_on_real_values(tmp_path):
    """float32 sums of a long real-valued row, in two orders, stay inside the fitted tolerance."""
    rng = np.random.default_rng(0)
    n = 20000
    text = f"{BANNER} real general\n1 {n} {n}\n" + "".join(f"1 {j + 1} {v:.7f}\n" for j, v in enumerate(rng.uniform(-1, 1, n)))
    workload = get_workload("spmv")
    size = workload.parse_size(f"mtx:{write(tmp_path, 'r.mtx', text)}")
    args = workload.arguments(size, "float32", np.random.default_rng(1))
    products = (args[2] * args[3][args[1]]).astype(np.float32)
    atol, _ = workload.tolerances(size, "float32")
    exact = reference(args, size)[0]
    sequential = np.float32(0)
    for p in products:
        sequential += p
    assert abs(sequential - exact) < atol and abs(products.reshape(-1, 32).sum(axis=0).sum() - exact) < atol


def test_size_notation():
    workload = get_workload("spmv")
    space = workload.space
    name, size = space.resolve_size("powerlaw:rows=1000,mean=4,seed=3", workload.parse_size)
    assert size == mats.size_for("powerlaw", 1000, 4, 3) and name.startswith("matrix=2,rows=1000")
    name, size = space.resolve_size("banded:rows=2048,mean=3,cols=4096", workload.parse_size)
    assert size["cols"] == 4096 and size["nnz"] == mats.row_lengths(size).sum()
    assert space.resolve_size("laplace2d-1M", workload.parse_size)[0] == "laplace2d-1M"
    with pytest.raises(TunerError, match="give rows= and mean="):
        workload.parse_size("uniform:rows=10")
    with pytest.raises(TunerError, match="unknown: width"):
        workload.parse_size("uniform:rows=10,mean=2,width=3")
    assert workload.parse_size("nosuchclass:rows=10,mean=2") is None
    with pytest.raises(TunerError, match="no such Matrix Market file"):
        workload.parse_size("mtx:/nonexistent/a.mtx")
    # said at once, before a row-length array of 10^11 rows is allocated (745 GiB)
    for text, message in (("uniform:rows=100000000000,mean=1", "too large for 32-bit CSR indices"),
                          ("powerlaw:rows=3000000000,mean=1", "too large for 32-bit CSR indices"),
                          ("uniform:rows=1000000,mean=4096", "too large for 32-bit CSR indices"),
                          ("uniform:rows=1000,mean=8,rows=5", "at most once"),
                          ("uniform:rows=10,mean=20,cols=5", "more than the matrix has")):
        with pytest.raises(TunerError, match=message):
            workload.parse_size(text)
    assert workload.parse_size("uniform:rows=1000 mean=8") is None  # fields are separated by commas


def test_file_sizes_reach_worker_processes_through_the_environment(tmp_path):
    path = write(tmp_path, "f.mtx", f"{BANNER} pattern general\n3 4 2\n1 4\n3 1\n")
    size = mats.register_file(path)
    assert size["matrix"] == 0 and (size["rows"], size["cols"], size["nnz"]) == (3, 4, 2)
    assert mats.registered_path(size) == str(path.resolve()) and str(size["seed"]) in os.environ[mats.FILES_ENV]
    os.environ.pop(mats.FILES_ENV)
    with pytest.raises(TunerError, match="pass it with --matrix"):
        mats.generate(size)


def test_features_and_distance():
    f = mats.features(np.array([0, 2, 4, 2]))
    assert f == {"rows": 4, "mean": 2.0, "cv": pytest.approx(np.sqrt(2) / 2), "max_over_mean": 2.0}
    assert mats.features(np.zeros(3))["cv"] == 0
    a = mats.size_features(mats.size_for("powerlaw", 4000, 8))
    b = mats.size_features(mats.size_for("powerlaw", 4000, 8, seed=2))
    c = mats.size_features(mats.size_for("banded", 4000, 8))
    assert mats.feature_distance(a, b) < mats.feature_distance(a, c)


def test_nearest_size_by_features(tmp_path):
    workload = get_workload("spmv")
    measured = {str(i): s for i, s in enumerate([mats.size_for("uniform", 5000, 8), mats.size_for("powerlaw", 5000, 8),
                                                  mats.size_for("banded", 5000, 32), mats.size_for("denserow", 5000, 8)])}
    # a file with power-law rows (written from a generated one) is nearest the power-law matrix
    m = mats.generate(mats.size_for("powerlaw", 4000, 8, seed=9))
    coo = m.tocoo()
    lines = "".join(f"{i + 1} {j + 1} {v:g}\n" for i, j, v in zip(coo.row, coo.col, coo.data))
    path = write(tmp_path, "pl.mtx", f"{BANNER} real general\n4000 4000 {m.nnz}\n{lines}")
    assert workload.nearest_size(workload.parse_size(f"mtx:{path}"), measured) == "1"
    assert workload.nearest_size(mats.size_for("banded", 6000, 30), measured) == "2"


def test_minimum_traffic():
    size = {"rows": 10, "cols": 20, "nnz": 100}
    assert min_traffic_bytes(size, 4) == 100 * 8 + 11 * 4 + 30 * 4
    assert min_traffic_bytes(size, 8) == 100 * 12 + 11 * 4 + 30 * 8
