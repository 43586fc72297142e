"""The one I/O layer: every op reads through TensorSource and writes through TensorSink."""

from ._arrays import batch_keys, batch_values, make_batch, values_array
from .sink import TensorSink, open_sink, output_kind
from .source import TensorSource, open_source, read_all

__all__ = [
    "TensorSource", "TensorSink", "open_source", "open_sink", "output_kind", "read_all",
    "batch_keys", "batch_values", "make_batch", "values_array",
]
