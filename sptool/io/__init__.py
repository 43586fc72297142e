"""The I/O layer: every op reads through a TensorSource and writes through a TensorSink.

This module is the layer's whole public surface; the modules behind it are private to it (an
import-linter contract in pyproject.toml holds the rest of sptool to that).
"""

from ._anndata import anndata_h5py, anndata_zarr, is_anndata
from ._arrays import arrow_of, batch_columns, batch_keys, batch_values, make_batch, normalize_batch, values_array
from ._atomic import AtomicTarget, ClosesOrAborts, SideOutputs, abort_live_targets, commit_all
from ._digest import DigestReader, digest_problem
from ._footer import FooterError, pages_without_crc
from ._iso import IsoCheck
from ._npy import (
    NPY_HEADER_ERRORS,
    BlockScatter,
    DenseScatter,
    DenseSink,
    GrowingNpy,
    check_dense_rows,
    check_dense_size,
    copy_slabs,
    dense_returned,
    file_map,
    is_zero,
    open_npy,
    release,
)
from ._pointers import pointer_problem
from ._prefetch import prefetch
from ._rowgroups import check_text, parquet_file, plan_chunks, read_chunks, read_failure_code
from ._scratch import before_removal, make_scratch_dir, remove_live_scratch, scratch_dir, sibling_name, sweep
from ._url import (
    absolute,
    bare,
    file_size,
    files_in,
    is_npy,
    is_remote,
    join_path,
    kind_of,
    listing,
    local_only,
    local_path,
    make_dir,
    matching,
    move,
    open_output,
    open_read,
    open_sequential,
    register_filesystem,
    remove_hidden,
    remove_path,
    split,
)
from .background import Background
from .sink import OrderTracker, TensorSink, check_shape, open_sink, output_kind, parquet_writer_options, schema_of
from .source import (
    CANONICAL_PART_NAME,
    NO_INPUT_ON_STDIN,
    PARQUET_MAGIC,
    READ_ERRORS,
    STREAM_MAGIC,
    AnnDataSource,
    DamagedBatch,
    MemorySource,
    ParquetSource,
    Part,
    TensorSource,
    check_inputs,
    edge_keys,
    filled_groups,
    index_bounds,
    is_part_name,
    known_shape,
    list_parts,
    locate,
    open_dataset,
    open_input,
    open_operands,
    open_parquet,
    open_source,
    part_name,
    read_all,
    read_part,
    read_stream_batch,
    row_bytes,
    sniff,
)

__all__ = [
    "TensorSource", "ParquetSource", "TensorSink", "open_source", "open_sink", "output_kind", "read_all",
    "known_shape", "row_bytes", "batch_columns", "batch_keys", "batch_values", "make_batch", "normalize_batch",
    "values_array",
    "arrow_of", "AtomicTarget", "commit_all", "ClosesOrAborts", "Background", "OrderTracker", "check_shape",
    "parquet_writer_options", "schema_of", "prefetch", "plan_chunks", "read_chunks", "PARQUET_MAGIC", "STREAM_MAGIC",
    "parquet_file", "read_failure_code", "check_text",
    "READ_ERRORS", "MemorySource", "open_input", "read_stream_batch", "DamagedBatch",
    "open_operands", "check_inputs", "part_name", "is_part_name", "list_parts", "sniff", "locate",
    "CANONICAL_PART_NAME", "NO_INPUT_ON_STDIN", "SideOutputs", "abort_live_targets",
    "scratch_dir", "make_scratch_dir", "before_removal", "remove_live_scratch", "sibling_name", "sweep",
    "DigestReader", "digest_problem", "Part", "open_dataset", "open_parquet", "read_part",
    "edge_keys",
    "filled_groups",
    "index_bounds",
    "FooterError", "pages_without_crc", "IsoCheck",
    "file_size", "is_remote", "join_path", "local_only", "local_path", "make_dir", "register_filesystem", "remove_path",
    "absolute", "bare", "files_in", "is_npy", "kind_of", "move", "remove_hidden",
    "listing", "matching", "open_output", "open_read", "open_sequential", "split",
    "AnnDataSource", "anndata_h5py", "anndata_zarr", "is_anndata", "pointer_problem",
    "BlockScatter", "DenseScatter", "DenseSink", "GrowingNpy", "NPY_HEADER_ERRORS", "check_dense_rows",
    "check_dense_size", "copy_slabs", "dense_returned", "file_map", "is_zero", "open_npy", "release",
]
