"""Shared fixtures: random tensors with the awkward cases (duplicates, unsorted, empty, hybrid)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.fs as pafs
import pytest

import sptool
from sptool import SparseTensor
from sptool.io import register_filesystem

DTYPES = ["float64", "float32", "int64", "int32", "int8", "uint64", "uint8", "bool", "complex128", "complex64",
          "float16"]


def random_values(rng, n, dtype, block=()):
    size = (n,) + tuple(block)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(size) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -50), min(info.max, 50)
        return rng.integers(lo, hi + 1, size=size).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(size) + 1j * rng.standard_normal(size)).astype(dt)
    return rng.standard_normal(size).astype(dt)


def random_tensor(rng, shape, nnz, *, dtype="float64", sparse_ndim=None, duplicates=False, sort=False,
                  fill_value=None):
    """A SparseTensor with ``nnz`` rows; duplicates repeat earlier coordinates; unsorted unless sort."""
    K = len(shape) if sparse_ndim is None else sparse_ndim
    dims = shape[:K]
    if nnz and min(dims) == 0:
        nnz = 0
    idx = np.stack([rng.integers(0, d, size=nnz) for d in dims], axis=1) if nnz else np.empty((0, K), np.int64)
    if not duplicates and nnz:
        idx = np.unique(idx, axis=0)
        rng.shuffle(idx)
    elif duplicates and nnz > 2:
        idx[nnz // 2:] = idx[rng.integers(0, nnz // 2, size=nnz - nnz // 2)]
    if sort and len(idx):
        idx = idx[np.lexsort(idx.T[::-1])]
    vals = random_values(rng, len(idx), dtype, shape[K:])
    # Uniqueness is known by construction: claimed, as a caller who knows it would (SparseTensor
    # measures it for unsorted rows only by a sort, when asked).
    unique = (False if len(idx) > 2 else None) if duplicates else True
    return SparseTensor(idx, vals, shape, fill_value=fill_value, unique=unique)


def column_major(t: SparseTensor) -> SparseTensor:
    """``t`` (unique) with its rows in column-major order, claiming that order and unique rows:
    out of row-major order, yet claims a reader trusts, since one pass checks them (a claim of
    unique rows in no order is not acted on: TensorMeta.trusted)."""
    order = np.lexsort(t.indices.T)  # the last dimension first
    K = t.indices.shape[1]
    return SparseTensor(t.indices[order], t.values[order], t.shape, fill_value=t.fill_value,
                        sort_order=tuple(reversed(range(K))), unique=True)


def dense_oracle(t: SparseTensor, fill=None) -> np.ndarray:
    """Independent dense form: a Python loop over rows (sum rule for duplicates)."""
    fill = t.fill_value if fill is None else fill
    out = np.full(t.shape, fill, dtype=t.values.dtype)
    seen = set()
    for i, coord in enumerate(map(tuple, t.indices)):
        v = t.values[i]
        if coord in seen:
            with np.errstate(over="ignore"):
                out[coord] = (out[coord] | v) if t.values.dtype == bool else out[coord] + v
        else:
            out[coord] = v
            seen.add(coord)
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def tiny_batches(monkeypatch):
    """Read every source in batches of 7 rows, and write row groups of 5, so that ops cross
    batch and row-group boundaries on small data (and the multi-threaded row-group reader,
    sptool/io/_rowgroups.py, runs on every file written during the test)."""
    monkeypatch.setenv("SPTOOL_BATCH_ROWS", "7")
    monkeypatch.setenv("SPTOOL_ROW_GROUP_ROWS", "5")
    return 7


def tiny_budget(total: int):
    """A budget of ``total`` bytes, below the 16 MiB that --memory accepts, with the tuning the
    fixtures set: what forces the external sort and the temporary files on small data."""
    from sptool._memory import budget_of

    return budget_of(None).with_total(total)


def small_runs(monkeypatch, run_rows: int, merge_rows: int):
    """Sorted runs of ``run_rows`` rows merged in slices of ``merge_rows``, whatever --memory says
    (the external sort's tuning, sptool._memory.Budget)."""
    monkeypatch.setenv("SPTOOL_RUN_ROWS", str(run_rows))
    monkeypatch.setenv("SPTOOL_MERGE_ROWS", str(merge_rows))


class WatchedFolder:
    """A folder (made if missing) whose modification time is set to 0, so that anything made or
    removed in it since shows: a sort's runs spill into --tmp-dir and are gone by the end, and
    no file is left to see.  With small_runs set, every sort spills; a stream through uses none."""

    def __init__(self, path):
        self.path = str(path)
        os.makedirs(self.path, exist_ok=True)
        self.reset()

    def reset(self):
        os.utime(self.path, ns=(0, 0))

    @property
    def touched(self) -> bool:
        return os.stat(self.path).st_mtime_ns != 0


def write_tensor(tmp_path, name, t) -> str:
    """Write a SparseTensor under tmp_path; its path."""
    path = str(tmp_path / name)
    sptool.write(t, path)
    return path


def save_npy(tmp_path, name, arr) -> str:
    """Save a dense array under tmp_path; its path."""
    path = str(tmp_path / name)
    np.save(path, arr)
    return path


@pytest.fixture(autouse=True, scope="session")
def _temp_files_under_pytest(tmp_path_factory):
    """Whatever asks for the system temp directory during the tests (spilled sort runs, the
    subprocesses the README tests start) gets one of pytest's own instead."""
    import os
    import tempfile

    scratch = str(tmp_path_factory.mktemp("system-temp"))
    old_env, old_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = scratch, scratch
    yield scratch
    tempfile.tempdir = old_dir
    if old_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old_env


@pytest.fixture(scope="session")
def _session_cluster():
    """One Dask cluster for every cluster test of the session (tests/test_distributed*.py and any
    other module that asks for it): a 2-worker LocalCluster of single-threaded processes, as
    ``--scheduler local:2`` starts, made when the first test asks for it (a run without cluster
    tests never starts one) and stopped at the end.  Starting one costs seconds of the load of
    two worker processes; a test that needs a fresh cluster (``local:N`` itself) starts its own.
    Command-line tests reach it with ``--scheduler`` and its ``scheduler.address``."""
    import logging

    distributed = pytest.importorskip("distributed")
    from sptool.distributed.cluster import keep_restarted_workers

    with keep_restarted_workers():
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", silence_logs=logging.ERROR)
        with cluster, distributed.Client(cluster) as client:
            yield client


@pytest.fixture
def cluster_client(_session_cluster):
    """The session's cluster with both its workers: a worker an earlier test killed (or one the
    scheduler dropped under load) is restarted by its nanny, and a test that counts workers or
    parts waits for it rather than running on one."""
    _session_cluster.wait_for_workers(2, timeout=120)
    return _session_cluster


@pytest.fixture
def store(tmp_path):
    """The scheme sub:// names paths inside tmp_path/store through pyarrow's SubTreeFileSystem."""
    root = tmp_path / "store"
    root.mkdir()
    register_filesystem("sub", pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem()))
    yield root
    register_filesystem("sub", None)


@pytest.fixture
def objstore(tmp_path):
    """obj:///ABS names local paths through a PyFileSystem over fsspec's local filesystem that
    behaves as S3 and GCS do (only objects under a prefix): its type name is S3's, so sptool
    moves a directory key by key, and a directory move fails; its moves are noted."""
    fsspec_local = pytest.importorskip("fsspec.implementations.local")

    class ObjectStoreLike(pafs.FSSpecHandler):
        moves: list = []

        def get_type_name(self):
            return "s3"

        def move(self, src, dest):
            if self.fs.isdir(src):
                raise OSError("an object store cannot move a directory")
            self.moves.append((os.path.basename(src), os.path.relpath(dest, tmp_path)))
            super().move(src, dest)

    handler = ObjectStoreLike(fsspec_local.LocalFileSystem())
    register_filesystem("obj", pafs.PyFileSystem(handler))
    yield handler
    register_filesystem("obj", None)


# The inner loop, `pytest -m "not slow"` (docs/development.md), leaves out what takes seconds a test;
# CI and the README's command run everything.  Whole modules: clusters, killed and terminal
# subprocesses, fuzzing, the docs build, memory ceilings, AnnData through h5py and zarr, the
# help and README examples run as commands, hostile inputs fed to every command.
SLOW_MODULES = {
    "test_anndata.py", "test_anndata_memory.py", "test_apply.py", "test_cluster_s3.py", "test_cluster_urls.py",
    "test_distributed.py", "test_distributed_driver.py", "test_distributed_maps.py", "test_distributed_pieces.py",
    "test_docs.py",
    "test_fuzz.py", "test_help.py", "test_hostile.py", "test_kill.py", "test_memory.py", "test_mutation.py",
    "test_precommit.py", "test_readme.py", "test_terminal.py", "test_wide_shapes.py",
}
# Tests of the other modules that take a second or more (all their parameters together).
SLOW_TESTS = {
    "test_checks_kernels.py::test_read_struct_agrees_with_the_reference_on_truncated_and_damaged_bytes",
    "test_stitch.py::test_an_aborted_fallback_writer_leaves_no_message", "test_expand_dims.py::test_matches_numpy",
    "test_convert.py::test_tns_round_trip", "test_writer_codecs.py::test_hybrid_blocks_are_compressed_too",
    "test_convert.py::test_mtx_import_matches_mmread", "test_add_scalar.py::test_matches_numpy",
    "test_todense.py::test_each_block_starts_from_zeros", "test_fill_empty_rows.py::test_matches_oracle",
    "test_add.py::test_sparse_sparse_matches_dense", "test_api.py::test_pydata_bridge",
    "test_api.py::test_read_refuses_over_budget", "test_bincount.py::test_in_a_terminal",
    "test_bincount.py::test_matches_tensorflow", "test_bincount.py::test_over_all_dense_and_sorted_ids_together",
    "test_bincount.py::test_random_against_np_bincount", "test_binsparse.py::test_canonicalising_note_in_a_terminal",
    "test_binsparse.py::test_memory_is_checked_where_it_is_held",
    "test_binsparse.py::test_reads_iso_complex_and_bool_values_in_slices",
    "test_binsparse.py::test_reads_the_package_scipy_files", "test_byteflip.py::test_byteflip_slice",
    "test_checks_cost.py::test_the_launcher_switches_page_crc_verification_off_and_only_when_asked",
    "test_checks_cost.py::test_the_launcher_switches_the_claim_check_off_and_only_when_asked",
    "test_checks_kernels.py::test_check_levels_finds_what_a_plain_loop_over_the_reference_finds",
    "test_checks_kernels.py::test_footer_chunks_agree_with_the_reference_on_truncated_and_damaged_footers",
    "test_cli.py::test_pipe_through_stdin", "test_cli.py::test_shell_completion_lists_commands",
    "test_cli.py::test_refuses_binary_to_terminal",
    "test_cli.py::test_signal_leaves_nothing_behind", "test_cli.py::test_stream_of_unknown_shape_is_spooled",
    "test_complexity.py::test_no_function_above_the_complexity_limit", "test_concat.py::test_matches_np_concatenate",
    "test_concat.py::test_pipe_concat_into_slice", "test_convert.py::test_kernel_agrees_with_a_python_reference",
    "test_convert.py::test_npz_refusals", "test_convert_table.py::test_zoned_timestamp_values_refused_in_one_line",
    "test_crashes.py::test_every_command_refuses_a_missing_tmp_dir_before_any_work",
    "test_cross.py::test_peak_rss_within_the_budget_when_the_output_is_far_larger",
    "test_cross.py::test_random_inputs_against_the_oracle",
    "test_cross.py::test_unsorted_inputs_give_tensorflows_result_of_the_sorted_ones",
    "test_dataset_view.py::test_a_float_sum_does_not_depend_on_the_batches",
    "test_dataset_view.py::test_claims_of_the_whole_are_numpys",
    "test_formats_real.py::test_a_pipe_from_a_slow_writer_is_told_and_read_whole",
    "test_inputs.py::test_path_source_and_tensor_agree", "test_interop.py::test_engines_read_every_encoding_exactly",
    "test_interop.py::test_polars_scan_dir_glob", "test_io.py::test_roundtrip_value_types",
    "test_iso_claim.py::test_a_broken_iso_claim_is_refused_naming_the_input",
    "test_iso_claim.py::test_a_cluster_refuses_a_broken_claim_too", "test_jsonl.py::test_broken_lines_are_named",
    "test_lying_claims.py::test_a_lying_claim_is_an_error_or_harmless",
    "test_lying_claims.py::test_an_output_does_not_inherit_an_unchecked_claim", "test_map.py::test_matches_numpy",
    "test_matmul.py::test_sparse_dense_adjoints",
    "test_matmul.py::test_sparse_sparse_at_the_minimum_memory_with_a_on_stdin",
    "test_matmul.py::test_sparse_sparse_matches_scipy", "test_matmul.py::test_sparse_sparse_value_types_and_rows_split",
    "test_maximum.py::test_matches_dense", "test_npy_maps.py::test_release_gives_back_the_pages_of_a_read_map",
    "test_npy_maps.py::test_release_gives_back_the_pages_of_a_written_map_and_keeps_its_data",
    "test_npy_maps.py::test_release_rows_gives_back_the_pages_of_those_rows_only",
    "test_partwise.py::test_reduce_of_unique_rows_part_by_part",
    "test_reduce.py::test_hybrid", "test_reduce.py::test_matches_numpy", "test_reduce.py::test_small_and_empty",
    "test_reduce.py::test_streaming_paths", "test_reduce_bounds.py::test_a_cluster_refuses_it_too",
    "test_reduce_bounds.py::test_reduce_refuses_an_entry_outside_the_shape", "test_reorder.py::test_duplicate_policies",
    "test_reorder.py::test_input_larger_than_the_budget_goes_to_the_external_sort",
    "test_reorder.py::test_keep_matches_stable_lexsort", "test_reshape.py::test_matches_numpy_reshape",
    "test_retain.py::test_pipeline_through_stdin_and_stdout", "test_retain.py::test_where_matches_numpy",
    "test_samples.py::test_make_samples_reproduces_the_files", "test_segment.py::test_peak_rss_within_the_budget",
    "test_shared_storage.py::test_apply_state_files_leave_another_hosts_same_pid_temporary_alone",
    "test_shared_storage.py::test_workers_in_two_pid_namespaces_write_into_one_directory",
    "test_slice.py::test_small_box_reads_few_row_groups", "test_slice.py::test_unsorted_with_duplicates",
    "test_spec.py::test_check_metadata_agrees_with_schema", "test_split.py::test_unsorted_with_duplicates",
    "test_spy.py::test_ascii_in_a_pipe", "test_spy.py::test_ascii_in_a_terminal",
    "test_spy.py::test_long_spy_draws_a_bar_in_a_terminal",
    "test_startup.py::test_pandas_stays_importable_beside_the_command_line",
    "test_startup.py::test_sptool_leaves_its_host_process_as_it_was", "test_stitch.py::test_same_bytes_as_one_writer",
    "test_summaries.py::test_every_command_writes_one_complete_summary", "test_svmlight.py::test_in_a_terminal",
    "test_svmlight.py::test_large_file_within_memory", "test_svmlight.py::test_late_zero_reads_the_file_again",
    "test_svmlight.py::test_rows_far_apart_are_written_in_blocks",
    "test_textparse_kernels.py::test_floats_parse_as_python_parses_them",
    "test_tfrecord.py::test_convert_and_a_corrupt_file_in_a_terminal",
    "test_tfrecord.py::test_peak_rss_within_the_stated_figure", "test_tfrecord.py::test_protobuf_written_file",
    "test_tfrecord.py::test_sparse_merge_as_tensorflow_computed",
    "test_tfrecord.py::test_varlen_feature_as_tensorflow_computed",
    "test_tfrecord_kernels.py::test_decoding_matches_reference_on_damaged_bytes",
    "test_todense.py::test_memmap_release_path", "test_todense.py::test_todense_matches_oracle",
    "test_transpose.py::test_matches_numpy_and_stable_sort",
    "test_urls.py::test_cluster_with_file_urls_matches_one_machine",
    "test_urls.py::test_cluster_workers_resolve_input_urls",
    "test_urls.py::test_part_directory_read_and_replaced_through_a_filesystem",
    "test_urls_validate_convert.py::test_cluster_convert_of_url_files_gives_the_single_machine_tensors",
    "test_urls_validate_convert.py::test_cluster_validate_of_urls_gives_the_single_machine_report",
    "test_urls_validate_convert.py::test_validate_and_convert_of_urls_in_a_terminal",
    "test_urls_validate_convert.py::test_validate_through_a_filesystem_gives_the_local_report",
    "test_validate.py::test_out_of_order_message", "test_validate.py::test_strict_requires_page_checksums",
    "test_versions.py::test_the_command_line_adopts_a_plain_tables_number_column",
    "test_versions.py::test_the_command_line_reorders_the_sample",
    "test_vocabulary.py::test_an_old_spelling_warns_once_per_process",
    "test_widekeys_kernels.py::test_relinearize_names_an_index_outside_the_shape",
    "test_writer_codecs.py::test_duckdb_and_polars_read_uncompressed_index_pages",
    "test_crc32c.py::test_the_stream_digest_is_the_same_and_checked_without_google_crc32c",
    "test_formats_real.py::test_sklearns_svmlight_files_are_told_by_content", "test_softmax.py::test_matches_oracle",
    "test_binsparse.py::test_export_reads_back_in_the_package", "test_binsparse.py::test_zarr_container",
    "test_writer_codecs.py::test_index_columns_uncompressed_values_zstd",
    "test_split.py::test_sorted_pieces_stay_sorted", "test_bincount.py::test_weights",
    "test_io.py::test_an_abandoned_read_collected_by_gc_does_not_wait_for_its_threads",
    "test_spec.py::test_writer_metadata_validates_against_schema",
    "test_spec.py::test_check_metadata_agrees_with_schema_per_value",
    "test_binsparse.py::test_reads_the_package_dense_files", "test_svmlight.py::test_generated_files_match_sklearn",
    "test_formats_real.py::test_text_formats_are_told_by_content_in_files_and_on_stdin",
    "test_convert_table.py::test_polars_parquet_any_integer_types",
}


def _slow_left_out(config) -> bool:
    """Whether -m leaves out every slow test, whatever its other markers (-m "not slow")."""
    from _pytest.mark.expression import Expression

    markexpr = config.getoption("markexpr", "")
    if not markexpr:
        return False
    expression = Expression.compile(markexpr)
    return not any(expression.evaluate(lambda name, others=others, **kw: name == "slow" or others)
                   for others in (False, True))


def pytest_ignore_collect(collection_path, config):
    """The slow modules are not even imported when the slow tests are left out: their imports
    (AnnData, Dask's distributed) and their thousands of parameters cost seconds to collect."""
    if collection_path.name in SLOW_MODULES and _slow_left_out(config):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if item.path.name in SLOW_MODULES or name in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter):
    """How many kill-test runs covered each outcome (test_kill.py records it), so a run that only
    ever finished before its signal shows as such."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        for name, value in getattr(report, "user_properties", ()):
            if name == "kill path" and report.when == "call":
                counts[value] = counts.get(value, 0) + 1
    if counts:
        terminalreporter.write_line("kill tests covered: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
